"""Credit assignment: the team reward (``rewards["team"]``) split over events, turns and agents.

Strategies:

- ``uniform``: every event gets ``team / N`` (N = number of events).
- ``causal``: the final answer is the last ``aggregate`` or stop decision, else the last ``return`` (else the
  last event); the events it depends on are its ancestors along every edge type (its information-flow closure,
  itself included). Each of them gets ``team / |ancestors|``; every other event (work that ended after the
  answer, dead ends such as a branch whose result nobody consumed) gets 0.

Written: ``credit`` on every event, ``rewards["credit:agent:<label>"]`` = the sum of credit over that agent's
events (a tool result counts for the agent that called the tool), and, through ``credit_turns``, a turn's
``reward`` = the credit of the events it links plus any reward recorded for the turn itself (``turn:<span
id>``). Re-running (after a late reward) replaces earlier credit; recorded rewards are never touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from ..model import Trace, Turn

STRATEGIES = ("uniform", "causal")
CREDIT_PREFIX = "credit:agent:"
K = TypeVar("K")


def assign_credit(trace: Trace, strategy: str = "causal") -> Trace:
    """A copy of ``trace`` with credit (re)assigned from its current team reward."""
    copy = trace.model_copy(deep=True)
    apply_credit(copy, strategy)
    return copy


def apply_credit(
    trace: Trace,
    strategy: str,
    causal: set[str] | None = None,
    owners: Mapping[str, str] | None = None,
) -> None:
    """Assign credit in place (``causal`` / ``owners``: the results of ``causal_events`` / ``event_owners``
    when the caller has them already)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown credit strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    for key in [k for k in trace.rewards if k.startswith(CREDIT_PREFIX)]:
        del trace.rewards[key]
    pool = trace.rewards.get("team")
    events = trace.events
    if pool is None:
        for ev in events:
            ev.credit = None
        return
    if strategy == "uniform":
        share = pool / len(events)
        for ev in events:
            ev.credit = share
    else:
        chosen = causal if causal is not None else causal_events(trace)
        share = pool / len(chosen)
        for ev in events:
            ev.credit = share if ev.id in chosen else 0.0
    if owners is None:
        owners = event_owners(trace)
    for ev in events:
        if ev.credit:
            key = CREDIT_PREFIX + owners[ev.id]
            trace.rewards[key] = trace.rewards.get(key, 0.0) + ev.credit


def final_position(types: Sequence[str], decisions: Sequence[str | None]) -> int:
    """Position of the event that stands for the answer (see the module docstring)."""
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "aggregate" or decisions[i] == "stop":
            return i
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "return":
            return i
    return len(types) - 1


def ancestors(parents: Mapping[K, Sequence[K]], start: K) -> set[K]:
    """``start`` and everything that reaches it through ``parents`` (node -> its direct predecessors)."""
    seen = {start}
    stack = [start]
    while stack:
        for src in parents.get(stack.pop(), ()):
            if src not in seen:
                seen.add(src)
                stack.append(src)
    return seen


def final_event(trace: Trace) -> str:
    events = trace.events
    return events[final_position([e.type for e in events], [e.decision for e in events])].id


def causal_events(trace: Trace) -> set[str]:
    """Ids of the final event and of every event it depends on through edges."""
    parents: dict[str, list[str]] = {}
    for edge in trace.edges:
        parents.setdefault(edge.dst, []).append(edge.src)
    return ancestors(parents, final_event(trace))


def event_owners(trace: Trace) -> dict[str, str]:
    """Event id -> the agent the event counts for (a tool result counts for the caller of the tool)."""
    owners = {ev.id: ev.agent for ev in trace.events}
    by_id = {ev.id: ev for ev in trace.events}
    for edge in trace.edges:
        if (
            edge.type == "return"
            and by_id[edge.dst].type == "tool_result"
            and by_id[edge.src].type == "tool_call"
        ):
            owners[edge.dst] = by_id[edge.src].agent
    return owners


def credit_turns(trace: Trace, turns: Sequence[Turn]) -> list[Turn]:
    """Copies of ``turns`` whose ``reward`` is their credited share plus the reward recorded for them."""
    credit = {ev.id: ev.credit for ev in trace.events}
    return [
        turn.model_copy(update={"reward": turn_reward(trace.rewards, credit, turn.turn_id, turn.event_ids)})
        for turn in turns
    ]


def turn_reward(
    rewards: dict[str, float], credit: dict[str, float | None], turn_id: str, event_ids: Sequence[str]
) -> float | None:
    """The reward recorded for a turn (``turn:<id>``) plus the credit of the events it links."""
    total = rewards.get(f"turn:{turn_id}")
    for event_id in event_ids:
        value = credit.get(event_id)
        if value is not None:
            total = (total or 0.0) + value
    return total
