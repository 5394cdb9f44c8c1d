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

from collections.abc import Collection, Mapping, Sequence
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


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown credit strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")


def shares(strategy: str, pool: float, n_events: int, on_path: Collection[int]) -> list[float]:
    """Each event's credit, by position (``on_path``: positions of the causal events, used by ``causal``)."""
    check_strategy(strategy)
    if strategy == "uniform":
        return [pool / n_events] * n_events
    share = pool / len(on_path)
    return [share if i in on_path else 0.0 for i in range(n_events)]


def agent_totals(credits: Sequence[float], owners: Sequence[str]) -> dict[str, float]:
    """``credit:agent:<label>`` keys: the credit of each agent's events (``owners``: by position)."""
    totals: dict[str, float] = {}
    for value, owner in zip(credits, owners, strict=True):
        if value:
            key = CREDIT_PREFIX + owner
            totals[key] = totals.get(key, 0.0) + value
    return totals


def apply_credit(trace: Trace, strategy: str) -> None:
    """Assign credit in place, replacing earlier credit."""
    check_strategy(strategy)
    for key in [k for k in trace.rewards if k.startswith(CREDIT_PREFIX)]:
        del trace.rewards[key]
    pool = trace.rewards.get("team")
    events = trace.events
    if pool is None:
        for ev in events:
            ev.credit = None
        return
    chosen = causal_events(trace) if strategy == "causal" else set()
    credits = shares(strategy, pool, len(events), {i for i, ev in enumerate(events) if ev.id in chosen})
    for ev, value in zip(events, credits, strict=True):
        ev.credit = value
    owners = event_owners(trace)
    trace.rewards.update(agent_totals(credits, [owners[ev.id] for ev in events]))


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
