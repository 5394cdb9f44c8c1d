"""Recompute a written trace's rewards, credit, parallelism and cost from the trace and its turns alone.

    python examples/recompute_trace.py traces/          # every trace: recomputed vs written

Standard library only: what a researcher needs to check (or change) the numbers is in the files. The rules
are those of the collector's mapping document (``collector/src/orchestrace_collector/convert/README.md``).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

Trace = dict[str, Any]
#: One activation of an agent: its stable name and which instance (``from`` / ``from_activation``, ...).
Activation = tuple[str, Any]
#: A span's time, seconds: start, end, and whether it ran beside its parent (``concurrent``).
Interval = tuple[float, float, bool]


def latest(out: Path) -> tuple[dict[str, Trace], dict[str, list[dict[str, Any]]]]:
    """The last revision of each trace, and the turns of that revision."""
    traces: dict[str, Trace] = {}
    for path in sorted(out.glob("traces-*.jsonl")):
        for line in path.read_text().splitlines():
            trace = json.loads(line)
            old = traces.get(trace["trace_id"])
            if old is None or trace["metrics"]["revision"] >= old["metrics"]["revision"]:
                traces[trace["trace_id"]] = trace
    turns: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for path in sorted(out.glob("turns-*.jsonl")):
        for line in path.read_text().splitlines():
            turn = json.loads(line)
            trace = traces.get(turn["trace_id"])
            if trace is not None and turn["revision"] == trace["metrics"]["revision"]:
                turns[turn["trace_id"]][turn["turn_id"]] = turn
    return traces, {trace_id: list(by_id.values()) for trace_id, by_id in turns.items()}


def causal_events(trace: Trace) -> set[str]:
    """The answer (last aggregate or stop decision, else last return) and every event it depends on; a
    merge with inputs depends on those inputs, not on every child that returned before it."""
    events = trace["events"]
    final = next((e["id"] for e in reversed(events)
                  if e["type"] == "aggregate" or e.get("decision") == "stop"), None)
    final = final or next((e["id"] for e in reversed(events) if e["type"] == "return"), events[-1]["id"])
    kind = {e["id"]: e["type"] for e in events}
    merges = {edge["dst"] for edge in trace["edges"] if edge["type"] == "aggregate"}
    parents: dict[str, list[str]] = defaultdict(list)
    for edge in trace["edges"]:
        if not (edge["type"] == "return" and edge["dst"] in merges and kind[edge["dst"]] == "aggregate"):
            parents[edge["dst"]].append(edge["src"])
    seen, stack = {final}, [final]
    while stack:
        for src in parents[stack.pop()]:
            if src not in seen:
                seen.add(src)
                stack.append(src)
    return seen


def team_shares(trace: Trace, turns: list[dict[str, Any]], strategy: str = "causal") -> dict[str, float]:
    """Each turn's fraction of a team-unit reward (by turn id)."""
    ordered = sorted(turns, key=lambda t: t["t"])
    chosen = [t["turn_id"] for t in ordered]
    if strategy == "causal":
        on_path = causal_events(trace)
        last: dict[Any, int] = {}
        for i, turn in enumerate(ordered):
            if on_path & set(turn["event_ids"]):
                last[(turn["agent"], turn.get("activation"))] = i
        causal = [t["turn_id"] for i, t in enumerate(ordered)
                  if i <= last.get((t["agent"], t.get("activation")), -1)]
        chosen = causal or chosen
    return {turn_id: 1 / len(chosen) for turn_id in chosen}


def busy_seconds(trace: Trace, turns: list[dict[str, Any]]) -> float:
    """T_serial: the summed own time of every activation, tool call, aggregate and model call (its duration
    less the union of what ran inside it), rebuilt from the events' and turns' start and end times. Inside
    an activation, a model call or a child activation within one of its tool calls or aggregates ran inside
    that call (an agent used as a tool, a tool that asks a model). An activation that records its ``waits``
    for work it handed out worked while that work ran: its own time is its duration less those waits and
    less what ran inside it that is not ``concurrent`` (handed to a worker)."""
    containers: dict[Activation, list[Interval]] = defaultdict(list)  # its tools, merges
    others: dict[Activation, list[Interval]] = defaultdict(list)  # its calls, children
    activations: dict[Activation, tuple[float, float]] = {}
    waits: dict[Activation, list[tuple[float, float]]] = {}
    for e in trace["events"]:
        beside = bool(e.get("concurrent"))
        if e["type"] == "return":
            key = (e["from"], e.get("from_activation"))
            activations[key] = (e["t_start"], e["t"])
            if "waits" in e:
                waits[key] = list(zip(e["waits"][::2], e["waits"][1::2], strict=True))
            if e.get("to"):
                others[e["to"], e.get("to_activation")].append((e["t_start"], e["t"], beside))
        elif e["type"] in ("tool_call", "aggregate") and e.get("t_end") is not None:
            containers[e["agent"], e.get("activation")].append((e["t"], e["t_end"], beside))
    total = 0.0
    for turn in turns:
        beside = bool(turn.get("concurrent"))
        others[turn["agent"], turn.get("activation")].append((turn["t"], turn["t_end"], beside))
        total += turn["t_end"] - turn["t"]  # a model call's own time is all of it
    for name, (start, end) in activations.items():
        inside: dict[int, list[Interval]] = defaultdict(list)  # container index (-1: none)
        boxes = containers[name]
        for item in others[name]:
            holders = [i for i, (s, e, _) in enumerate(boxes) if s <= item[0] and item[1] <= e]
            inside[min(holders, key=lambda i: boxes[i][1] - boxes[i][0]) if holders else -1].append(item)
        own = boxes + inside[-1]
        if name in waits:
            covered = waits[name] + [(s, e) for s, e, beside in own if not beside]
        else:
            covered = [(s, e) for s, e, _ in own]
        total += end - start - _union(covered)
        total += sum(e - s - _union([(a, b) for a, b, _ in inside[i]]) for i, (s, e, _) in enumerate(boxes))
    return total


def _union(intervals: list[tuple[float, float]]) -> float:
    total, cur_start, cur_end = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_end is None or s > cur_end:
            total += (cur_end - cur_start) if cur_end is not None and cur_start is not None else 0.0
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    return total + ((cur_end - cur_start) if cur_end is not None and cur_start is not None else 0.0)


def recompute(trace: Trace, turns: list[dict[str, Any]]) -> dict[str, Any]:
    channels: dict[str, float] = defaultdict(float)
    for turn in turns:
        for key, share in (turn.get("credit") or {}).items():
            channels[key] += share
    # Team-unit channels are written on every turn (0 included): re-split them by the causal strategy.
    team = [k for k in channels if turns and all(k in (t.get("credit") or {}) for t in turns)]
    shares = team_shares(trace, turns)
    credit = {t["turn_id"]: {k: trace["rewards"][k] * shares.get(t["turn_id"], 0.0) for k in team}
              for t in turns}
    top = [(e["t_start"], e["t"]) for e in trace["events"] if e["type"] == "return" and not e.get("to")]
    wall = _union(top)
    return {
        "rewards": dict(channels),
        "team_credit": credit,
        "parallelism_efficiency": busy_seconds(trace, turns) / wall if wall else None,
        "tokens": sum((t.get("input_tokens") or 0) + (t.get("output_tokens") or 0) for t in turns),
        "tool_calls": sum(1 for e in trace["events"] if e["type"] == "tool_call"),
        "messages": sum(1 for e in trace["events"] if e["type"] == "message"),
    }


def main(out: Path) -> int:
    traces, turns = latest(out)
    for trace_id, trace in traces.items():
        got = recompute(trace, turns.get(trace_id, []))
        print(trace_id, json.dumps({
            "rewards": {k: (round(v, 6), trace["rewards"].get(k)) for k, v in got["rewards"].items()},
            "parallelism_efficiency": (got["parallelism_efficiency"],
                                       trace["metrics"].get("parallelism_efficiency")),
            "tokens": (got["tokens"], trace["costs"]["tokens"]),
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "traces")))
