"""Hand-built episodes for the view's tests and its render benchmark: a lead agent that delegates to workers
(by name; a name given twice runs twice), each worker making model calls and tool calls, messaging the lead
and returning; the lead aggregates what came back and stops. Any size, any agent names, written through the
collector's own writer with credit assigned by its own code, so every trace validates."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from orchestrace_collector.convert.credit import recredit
from orchestrace_collector.model import Costs, Edge, Event, Message, Trace, Turn
from orchestrace_collector.output import TraceDirWriter


def build_episode(
    trace_id: str,
    task_id: str,
    workers: Sequence[str],
    *,
    lead: str = "lead",
    turns_per_worker: int = 2,
    tools_per_turn: int = 1,
    outcome: float | None = 1.0,
    handoff_worker: int | None = None,
    spawn_workers: Sequence[int] = (),
    parallel: bool = True,
    dropped: Sequence[int] = (),
) -> tuple[Trace, list[Turn]]:
    """``workers``: names in delegation order. ``spawn_workers``: positions the lead spawns (decision
    ``spawn``) rather than delegates to; ``handoff_worker``: the position whose delegation is a handoff.
    ``parallel``: workers overlap in time (else they run one after another). ``dropped``: positions whose
    result the lead does not aggregate (causal credit gives their turns nothing)."""
    events: list[Event] = []
    edges: list[Edge] = []
    turns: list[Turn] = []
    counts: dict[str, int] = {}
    step = 0.01

    def add(**fields: object) -> Event:
        event = Event.model_validate({"id": f"e{len(events) + 1}", **fields})
        events.append(event)
        return event

    def label(name: str, activation: int) -> str:
        return f"{name}#{activation}" if workers.count(name) > 1 else name

    lead_start = add(t=0.0, type="orchestrator_decision", agent=lead, activation=1, decision="spawn",
                     to=workers[0] if workers else lead)
    returns: list[Event] = []
    t = step
    for position, name in enumerate(workers):
        counts[name] = counts.get(name, 0) + 1
        activation = counts[name]
        to = label(name, activation)
        start = step * (position + 1) if parallel else t
        kind = "spawn" if position in spawn_workers else "delegate"
        decision = add(t=start, type="orchestrator_decision", agent=lead, activation=1, decision=kind, to=to,
                       handoff=True if position == handoff_worker else None)
        spawn = add(t=start, type="spawn", agent=lead, activation=1, to=to)
        edges.append(Edge(src=decision.id, dst=spawn.id, type="spawn"))
        t = start + step
        previous = spawn
        for _ in range(turns_per_worker):
            call_ids = []
            turn_start = t
            t += step
            for _ in range(tools_per_turn):
                call = add(t=t, t_end=t + step / 2, type="tool_call", agent=name, activation=activation,
                           tool="search", trusted=True)
                result = add(t=t + step / 2, type="tool_result", agent="search", tool="search", trusted=False)
                edges.append(Edge(src=previous.id, dst=call.id, type="causal"))
                edges.append(Edge(src=call.id, dst=result.id, type="return"))
                previous = result
                call_ids += [call.id, result.id]
                t += step
            turns.append(Turn(
                trace_id=trace_id, task_id=task_id, turn_id=f"{trace_id}-t{len(turns) + 1}", agent=name,
                activation=activation, model="scripted", t=turn_start, t_end=turn_start + step,
                input_tokens=10, output_tokens=5, event_ids=call_ids,
                prompt=[Message(role="user", content=f"work for {name}")],
                completion=[Message(role="assistant", content="done")],
            ))
        message = add(t=t, type="message", agent=name, activation=activation, to=lead, trusted=True)
        edges.append(Edge(src=previous.id, dst=message.id, type="message"))
        done = add(t=t + step, type="return", agent=name, activation=activation, to=lead, t_start=start,
                   trusted=True, **{"from": to})
        edges.append(Edge(src=message.id, dst=done.id, type="causal"))
        if position not in dropped:
            returns.append(done)
        t += 2 * step
    end = max([t, *(r.t for r in returns)]) + step
    merge = add(t=end, t_end=end + step, type="aggregate", agent=lead, activation=1)
    edges.extend(Edge(src=r.id, dst=merge.id, type="aggregate") for r in returns)
    stop = add(t=end + step, type="orchestrator_decision", agent=lead, activation=1, decision="stop")
    edges.append(Edge(src=merge.id, dst=stop.id, type="causal"))
    edges.append(Edge(src=lead_start.id, dst=events[1].id if len(events) > 1 else stop.id, type="temporal"))
    last = add(t=end + 2 * step, type="return", agent=lead, activation=1, t_start=0.0, trusted=True,
               **{"from": lead})
    edges.append(Edge(src=stop.id, dst=last.id, type="temporal"))
    trace = Trace(
        trace_id=trace_id, task_id=task_id, system="view-test", topology="centralized", events=events,
        edges=edges, rewards={}, costs=Costs(tokens=15.0 * len(turns), wall_clock_s=last.t,
                                             tool_calls=sum(e.type == "tool_call" for e in events),
                                             messages=sum(e.type == "message" for e in events)),
    )
    if outcome is not None:
        turns = recredit(trace, turns, "causal", "team", outcome)
    return trace, turns


def write_episodes(out: Path, episodes: Sequence[tuple[Trace, list[Turn]]]) -> Path:
    writer = TraceDirWriter(out)
    for trace, turns in episodes:
        writer.write(trace, turns)
    writer.close()
    return out
