"""Random multi-agent apps (``random_apps``): what was written, in-process, offline and through ``collect``,
against what each app did by construction."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from collector_fixtures import RunningCollector
from ground_truth_apps import WAYS, run_three_ways
from random_apps import RELAY_LEAD, Step, draw, draw_relay, relay_truth, run, run_relay, truth


def _base(label: str | None) -> str:
    """The agent name of an activation label (``worker#2`` -> ``worker``; ``agent#1#2`` -> ``agent#1``)."""
    if label is None:
        return ""
    name, sep, k = label.rpartition("#")
    return name if sep and k.isdigit() else label


def _pairs(events: list[dict[str, Any]], kind: str) -> Counter[tuple[str, str]]:
    """(parent, child) agent names of the spawns, or of the returns to a parent."""
    if kind == "spawn":
        return Counter((e["agent"], _base(e["to"])) for e in events if e["type"] == "spawn")
    return Counter((_base(e.get("to")), e["agent"]) for e in events if e["type"] == "return" and e.get("to"))


@pytest.mark.parametrize("seed", range(30))
def test_a_random_app_is_written_as_it_ran(tmp_path: Path, collector: RunningCollector, seed: int) -> None:
    app = draw(seed)
    want = truth(app)
    outputs = run_three_ways(tmp_path, collector, lambda: run(app, f"random-{seed}"))
    written = {}
    for way in WAYS:
        trace, turns = outputs[way].only()
        tokens: Counter[str] = Counter()
        for turn in turns:
            tokens[turn["agent"]] += turn.get("input_tokens", 0) + turn.get("output_tokens", 0)
        assert +tokens == want.tokens, way
        assert len(turns) == want.turns, way
        assert sum(turn.get("cache_read_input_tokens", 0) for turn in turns) == want.cached, way
        assert sum(bool(turn.get("completion_incomplete")) for turn in turns) == want.incomplete, way
        costs = trace["costs"]
        assert (costs["tokens"], costs["tool_calls"], costs["messages"]) == (
            sum(want.tokens.values()), want.tool_calls, want.messages), way
        assert trace["rewards"].get("individual", 0) == pytest.approx(want.individual), way
        credited = sum((turn.get("credit") or {}).get("individual", 0) for turn in turns)
        assert credited == pytest.approx(want.individual), way
        events = trace["events"]
        assert sum(e["type"] == "aggregate" for e in events) == want.aggregates, way
        task = events[0]["agent"]
        spawns = _pairs(events, "spawn")
        returns = _pairs(events, "return")
        assert {pair: n for pair, n in spawns.items() if pair[0] != task} == want.children, way
        assert {pair: n for pair, n in returns.items() if pair[0] != task} == want.children, way
        replies = Counter((e["agent"], _base(e["to"])) for e in events
                          if e["type"] == "message" and e.get("to") != "peer")
        assert +replies == want.replies, way
        assert sum(e["type"] == "safety_event" for e in events) == want.safety_events, way
        assert sum(e["type"] == "human_intervention" for e in events) == want.human_interventions, way
        metrics = {k: v for k, v in trace["metrics"].items() if k != "revision"}
        written[way] = json.dumps({**trace, "metrics": metrics}, sort_keys=True)
    assert written["trace_dir"] == written["convert"] == written["collect"]


_RELAY_STEPS = {("tool_call", "web_fetch"): "fetch_call", ("tool_result", "web_fetch"): "fetch_result",
                ("tool_call", "vault"): "vault_call", ("tool_result", "vault"): "vault_result",
                ("tool_call", "act"): "act_call", ("tool_result", "act"): "act_result"}


def _relay_steps(events: list[dict[str, Any]]) -> dict[str, Step]:
    """Each hop's events by (hop, step): the hops run one after another, each after the lead's spawn."""
    steps: dict[str, Step] = {}
    hop = -1
    for e in events:
        if e["type"] == "spawn" and e["agent"] == RELAY_LEAD:
            hop += 1
        elif e["agent"] == RELAY_LEAD and e["type"] == "return":
            break
        elif hop >= 0 and e["agent"] != RELAY_LEAD and e["type"] in ("tool_call", "tool_result"):
            steps[e["id"]] = (hop, _RELAY_STEPS[(e["type"], e["tool"])])
        elif hop >= 0 and e["agent"] != RELAY_LEAD and e["type"] in ("message", "return"):
            steps[e["id"]] = (hop, e["type"])
    return steps


@pytest.mark.parametrize("seed", range(12))
def test_untrusted_content_is_followed_from_agent_to_agent(tmp_path: Path, collector: RunningCollector,
                                                          seed: int) -> None:
    """A relay of agents passing pages, secrets, model replies or notes on by message: which events are
    untrusted, which edges are ``safety_flow`` and which model calls read untrusted content, as built."""
    hops = draw_relay(seed)
    want = relay_truth(hops)
    outputs = run_three_ways(tmp_path, collector, lambda: run_relay(hops, f"relay-{seed}"),
                             capture_content=True)
    for way in WAYS:
        trace, turns = outputs[way].only()
        steps = _relay_steps(trace["events"])
        assert len(steps) == len({*steps.values()}), way  # every step once
        assert {steps[e["id"]] for e in trace["events"] if e.get("trusted") is False} == want.untrusted, way
        flows = {(steps[x["src"]], steps[x["dst"]]) for x in trace["edges"] if x["type"] == "safety_flow"}
        assert flows == want.flows, way
        assert [bool(t.get("tainted")) for t in turns] == want.tainted, way
