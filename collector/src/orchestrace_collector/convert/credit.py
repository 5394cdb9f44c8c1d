"""Credit assignment: every reward channel spread over the episode's turns (the training samples) so that it
adds up.

Per channel (``rewards`` key, see ``rewards.py``):

- a **team-unit** channel (unit ``team``; ``orchestrator`` goes to the turns that made orchestration
  decisions, by the same rule) is split over the turns by the *strategy*:

  - ``uniform``: every turn gets ``R / N`` (N = the episode's turns).
  - ``causal`` (default): the final answer is the last ``aggregate`` or stop decision, else the last
    ``return`` (else the last event); the events it depends on are its ancestors along every edge (itself
    included), except that a merge with inputs (``aggregate`` edges) depends on those inputs only, not on
    every child that happened to return before it. A turn is causal when it links one of them
    (``event_ids``); each causal turn gets ``R / |causal turns|``, every other turn 0 (work whose result
    never reached the answer: a branch nobody aggregated, work after the answer). With no causal turn it
    falls back to ``uniform``.

- a channel of another unit goes to the turns of its unit instance, equally: an agent activation's turns
  (else the turns of the activations it started, else of those that started it), a role's activations'
  turns, the turn itself, the turn that requested a tool call or produced a message or event.

So for every channel, the turns' shares add up to the channel's value (to floating-point tolerance) whenever
the episode has turns; a turn row carries ``credit`` ({channel: share}) and ``reward`` (their sum). Shares
are parts of a whole: with more turns each gets less (``R / N``), by design, so that a turn file sums to the
episode's reward; a trainer that wants the whole return on every turn reads the trace's ``rewards``.

Events carry ``credit`` too: the team-unit channels split the same way over events (``uniform``: ``R / N``
events; ``causal``: ``R / |ancestors|`` on the answer's ancestors, 0 elsewhere). ``credit:agent:<name>`` is
the sum of the turn credit of every activation of an agent (of its events' credit when the episode has no
turns): keys name the policy; one activation's share is the sum of its turns' credit (turns carry
``activation``). Re-running
credit (``annotate``) replaces all of it; recorded rewards are never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import compress
from typing import TypeVar

from ..model import Trace, Turn

STRATEGIES = ("uniform", "causal")
CREDIT_PREFIX = "credit:agent:"
K = TypeVar("K")


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown credit strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")


def shares(strategy: str, pool: float, n_events: int, on_path: Collection[int]) -> list[float]:
    """Each event's credit, by position (``on_path``: positions of the causal events, used by ``causal``)."""
    check_strategy(strategy)
    if strategy == "uniform" or not on_path:
        return [pool / n_events] * n_events if n_events else []
    share = pool / len(on_path)
    return [share if i in on_path else 0.0 for i in range(n_events)]


def turn_weights(strategy: str, turn_events: Sequence[Collection[int]], owners: Sequence[object],
                 on_path: Collection[int], among: Collection[int] | None = None) -> list[float]:
    """Each turn's fraction of a team-unit channel (they add up to 1 when there are turns). Turns are in
    start order; ``owners``: each turn's activation. ``among``: only those turns may get any (the
    ``orchestrator`` unit)."""
    check_strategy(strategy)
    n = len(turn_events)
    allowed = set(range(n)) if among is None or not among else set(among)
    chosen = allowed
    if strategy == "causal":
        chosen = allowed & _causal_turns(turn_events, owners, on_path) or allowed  # computed once: O(turns)
    return [1.0 / len(chosen) if i in chosen else 0.0 for i in range(n)]


def _causal_turns(turn_events: Sequence[Collection[int]], owners: Sequence[object],
                  on_path: Collection[int]) -> set[int]:
    """Turns linking an event on the path, and the earlier turns of the same activation (its context: what
    an agent's last call answers builds on its earlier calls)."""
    last: dict[object, int] = {}
    for i, events in enumerate(turn_events):
        if any(e in on_path for e in events):
            last[owners[i]] = i
    return {i for i, owner in enumerate(owners) if owner in last and i <= last[owner]}


def spread(credits: list[dict[str, float]], key: str, value: float, weights: Sequence[float], *,
           team: bool = False) -> None:
    """Add ``value`` of channel ``key`` to the turns' credit by ``weights``. A ``team`` channel is written on
    every turn, 0 included (a turn the strategy gave nothing says so); another only on its unit's turns."""
    for credit, weight in zip(credits, weights, strict=True):
        if weight or team:
            credit[key] = credit.get(key, 0.0) + value * weight


def agent_totals(credits: Sequence[float], owners: Sequence[str]) -> dict[str, float]:
    """``credit:agent:<name>`` keys: the credit of each agent's units (``owners``: by position)."""
    totals: dict[str, float] = {}
    for value, owner in zip(credits, owners, strict=True):
        if value:
            key = CREDIT_PREFIX + owner
            totals[key] = totals.get(key, 0.0) + value
    return totals


def final_position(types: Sequence[str], decisions: Sequence[str | None]) -> int:
    """Position of the event that stands for the answer (see the module docstring)."""
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "aggregate" or decisions[i] == "stop":
            return i
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "return":
            return i
    return len(types) - 1


def causal_path(edges: Iterable[tuple[int, int, str]], types: Sequence[str],
                decisions: Sequence[str | None]) -> set[int]:
    """Positions of the answer and of the events it depends on (``edges``: ``(src, dst, type)`` by
    position)."""
    edges = list(edges)
    if "aggregate" in types:
        # A child's return into an aggregate that names its inputs (``aggregate`` edges) is no dependency.
        merges = {dst for _, dst, kind in edges if kind == "aggregate"}
        edges = [e for e in edges if not (e[2] == "return" and e[1] in merges and types[e[1]] == "aggregate")]
    final = final_position(types, decisions)
    if not types:
        return {final}
    # Edges sorted by source, each to a later event (as ``build_edges`` gives them): one backward pass, where
    # an event's successors are settled before its own edges are read.
    on = [False] * len(types)
    on[final] = True
    last = len(types)
    for src, dst, _ in reversed(edges):
        if src > last or src >= dst:
            return _causal_path_any_order(edges, final)
        last = src
        if on[dst]:
            on[src] = True
    return set(compress(range(len(on)), on))


def _causal_path_any_order(edges: list[tuple[int, int, str]], final: int) -> set[int]:
    parents: dict[int, list[int]] = {}
    for src, dst, _ in edges:
        parents.setdefault(dst, []).append(src)
    return ancestors(parents, final)


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


# --- on a written trace (``annotate``, and the recompute recipe) ----------------------------------------


def causal_positions(trace: Trace) -> set[int]:
    """``causal_path`` of a written trace."""
    position = {ev.id: i for i, ev in enumerate(trace.events)}
    events = trace.events
    return causal_path(((position[e.src], position[e.dst], e.type) for e in trace.edges),
                       [e.type for e in events], [e.decision for e in events])


def recredit(trace: Trace, turns: Sequence[Turn], key: str, value: float | None, strategy: str,
             team_pool_before: float) -> list[Turn]:
    """Give team-unit channel ``key`` the value ``value`` (``None``: remove it) on a written trace and its
    turns, in place on ``trace``; returns the turns with their new credit. ``team_pool_before``: the sum of
    the team-unit channels the events' credit was computed from."""
    check_strategy(strategy)
    old = trace.rewards.get(key)
    if value is None:
        trace.rewards.pop(key, None)
    else:
        trace.rewards[key] = value
    on_path = causal_positions(trace)
    position = {ev.id: i for i, ev in enumerate(trace.events)}
    order = sorted(range(len(turns)), key=lambda i: turns[i].t)
    events_of = [{position[e] for e in turns[i].event_ids if e in position} for i in order]
    by_order = turn_weights(strategy, events_of, [turn_activation(turns[i]) for i in order], on_path)
    weights = [0.0] * len(turns)
    for position_in_order, i in enumerate(order):
        weights[i] = by_order[position_in_order]
    credits = [{k: v for k, v in (t.credit or {}).items() if k != key} for t in turns]
    if value is not None:
        spread(credits, key, value, weights, team=True)
    pool = team_pool_before - (old or 0.0) + (value or 0.0)
    events = trace.events
    for ev, share in zip(events, shares(strategy, pool, len(events), on_path), strict=True):
        ev.credit = share
    new_turns = [
        t.model_copy(update={"credit": c or None, "reward": sum(c.values()) if c else None})
        for t, c in zip(turns, credits, strict=True)
    ]
    for k in [k for k in trace.rewards if k.startswith(CREDIT_PREFIX)]:
        del trace.rewards[k]
    if new_turns:
        trace.rewards.update(agent_totals([t.reward or 0.0 for t in new_turns], [t.agent for t in new_turns]))
    else:
        trace.rewards.update(agent_totals([ev.credit or 0.0 for ev in events], event_owners(trace)))
    return new_turns


def turn_activation(turn: Turn) -> tuple[str, int | None]:
    return turn.agent, turn.activation


def event_owners(trace: Trace) -> list[str]:
    """The agent each event counts for, by position (a tool result counts for the caller)."""
    by_id = {ev.id: ev for ev in trace.events}
    owners = {ev.id: ev.agent for ev in trace.events}
    for edge in trace.edges:
        src, dst = by_id[edge.src], by_id[edge.dst]
        if edge.type == "return" and dst.type == "tool_result" and src.type == "tool_call":
            owners[dst.id] = owners[src.id]
    return [owners[ev.id] for ev in trace.events]
