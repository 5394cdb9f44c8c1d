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
from dataclasses import dataclass, field
from itertools import compress
from typing import Final, TypeVar

from orchestrace_semconv import OUTCOME_FAMILIES, REWARD_FAMILY_ALIASES, REWARD_UNIT_FAMILY

from ..model import Trace, Turn
from .kinds import Decision, EdgeType, EventType, RewardUnit

STRATEGIES = ("uniform", "causal")
CREDIT_PREFIX: Final = "credit:agent:"
#: Units credited to the whole team's turns by the credit strategy (the others go to the turns of their unit).
TEAM_UNITS: Final[frozenset[RewardUnit]] = frozenset({"team", "orchestrator"})
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


def final_position(types: Sequence[EventType], decisions: Sequence[Decision | None]) -> int:
    """Position of the event that stands for the answer (see the module docstring)."""
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "aggregate" or decisions[i] == "stop":
            return i
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "return":
            return i
    return len(types) - 1


def causal_path(edges: Iterable[tuple[int, int, EdgeType]], types: Sequence[EventType],
                decisions: Sequence[Decision | None]) -> set[int]:
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


def _causal_path_any_order(edges: list[tuple[int, int, EdgeType]], final: int) -> set[int]:
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


# --- the engine: one episode's credit, from conversion or from a written trace -------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """What credit reads of an episode, by position, as written: each event's type, decision and agent
    (its ``agent`` field), the edges ``(src, dst, type)``, and the turns in start order (the positions of
    the events each links, its activation ``(agent, activation)``)."""

    types: Sequence[EventType]
    decisions: Sequence[Decision | None]
    agents: Sequence[str]
    edges: Sequence[tuple[int, int, EdgeType]]
    turn_events: Sequence[Collection[int]]
    turn_owners: Sequence[tuple[str, int | None]]

    def on_path(self) -> set[int]:
        return causal_path(self.edges, self.types, self.decisions)

    def event_owners(self) -> list[str]:
        """The agent each event counts for: a tool result counts for the caller of the tool."""
        owners = list(self.agents)
        types = self.types
        for src, dst, kind in self.edges:
            if kind == "return" and types[dst] == "tool_result" and types[src] == "tool_call":
                owners[dst] = owners[src]
        return owners


@dataclass(slots=True)
class Part:
    """One unit instance's value within a channel."""

    value: float
    scope: str | None  # ``agent:<name>``, ``tool:<name>``, ...: the unit-scoped key; None for team units
    #: turn positions it is credited to (empty: by the team strategy); of a team unit, the only turns the
    #: strategy may choose (``orchestrator``)
    turns: list[int]


@dataclass(slots=True)
class Channel:
    key: str
    unit: RewardUnit
    parts: dict[str, Part] = field(default_factory=dict)  # unit instance -> its (last recorded) part
    #: Its turns' credit is given (``assign``'s ``kept``), not spread again; a team unit's value is still
    #: split over the events.
    kept: bool = False

    @property
    def total(self) -> float:
        return sum(part.value for part in self.parts.values())


@dataclass(frozen=True, slots=True)
class Credit:
    """``channels``: each channel's total and its parts' unit-scoped keys, in channel order; ``agents``: the
    ``credit:agent:<name>`` keys; ``turns``: each turn's credit by channel; ``events``: each event's credit
    (None: no team-unit channel)."""

    channels: dict[str, float]
    agents: dict[str, float]
    turns: list[dict[str, float]]
    events: list[float] | None


def uncredited(n_turns: int) -> Credit:
    """The credit of an episode without rewards (``assign`` with no channel)."""
    return Credit({}, {}, [{} for _ in range(n_turns)], None)


def assign(shape: Shape, on_path: Collection[int], channels: Iterable[Channel], strategy: str,
           kept: Sequence[Mapping[str, float]] | None = None) -> Credit:
    """Every channel spread over the turns and the team-unit ones over the events (see the module
    docstring). ``kept``: each turn's credit to start from (``recredit``: the channels not spread again)."""
    check_strategy(strategy)
    channels = list(channels)
    n_turns = len(shape.turn_events)
    if not channels and kept is None:
        return uncredited(n_turns)
    credits = [dict(c) for c in kept] if kept is not None else [{} for _ in range(n_turns)]
    rewards: dict[str, float] = {}
    team = turn_weights(strategy, shape.turn_events, shape.turn_owners, on_path)
    pool = 0.0  # the team-unit value, which the events' credit splits
    team_units = False
    for channel in channels:
        rewards[channel.key] = channel.total
        team_unit = channel.unit in TEAM_UNITS
        team_units = team_units or team_unit
        if channel.kept:
            pool += channel.total if team_unit else 0.0
            continue
        for part in channel.parts.values():
            if part.scope is not None:
                rewards[part.scope] = rewards.get(part.scope, 0.0) + part.value
            if team_unit:
                pool += part.value
                weights = (turn_weights(strategy, shape.turn_events, shape.turn_owners, on_path, part.turns)
                           if part.turns else team)
            elif part.turns:
                own = set(part.turns)
                weights = [1.0 / len(own) if i in own else 0.0 for i in range(n_turns)]
            else:
                weights = team  # nothing of its unit made a model call: the team's turns carry it
            spread(credits, channel.key, part.value, weights, team=team_unit or weights is team)
    events = shares(strategy, pool, len(shape.types), on_path) if team_units else None
    if n_turns:
        agents = agent_totals([sum(c.values()) for c in credits], [owner for owner, _ in shape.turn_owners])
    else:
        agents = agent_totals(events or [0.0] * len(shape.types), shape.event_owners())
    return Credit(rewards, agents, credits, events)


# --- on a written trace (``annotate``, reward functions, the viewer) ----------------------------------


def written_shape(trace: Trace, turns: Sequence[Turn]) -> tuple[Shape, list[int]]:
    """The shape of a written trace and its turns, and the turns' positions in start order."""
    events = trace.events
    position = {ev.id: i for i, ev in enumerate(events)}
    order = sorted(range(len(turns)), key=lambda i: turns[i].t)
    shape = Shape(
        [ev.type for ev in events],
        [ev.decision for ev in events],
        [ev.agent for ev in events],
        [(position[e.src], position[e.dst], e.type) for e in trace.edges],
        [{position[e] for e in turns[i].event_ids if e in position} for i in order],
        [(turns[i].agent, turns[i].activation) for i in order],
    )
    return shape, order


def _family(key: str) -> str:
    family = key.split(":", 1)[0]
    return REWARD_FAMILY_ALIASES.get(family, family)


_TEAM_FAMILIES: Final = frozenset({*OUTCOME_FAMILIES, REWARD_UNIT_FAMILY["orchestrator"]})


def recredit(trace: Trace, turns: Sequence[Turn], strategy: str, key: str | None = None,
             value: float | None = None) -> list[Turn]:
    """Credit a written trace and its turns again with ``strategy`` (``key``: first set that team-unit
    channel to ``value``), in place on ``trace``; returns the turns with their new credit. The outcome's
    channels are spread again by the engine; every other channel's turn credit is kept (an ``orchestrator``
    channel's turns are not in a written trace), its team-unit value still split over the events."""
    if key is not None and value is not None:
        trace.rewards[key] = value
    shape, order = written_shape(trace, turns)
    # The team-unit channels, in their order: the outcome's (``team``, ``verifier``, ``hybrid``), spread
    # again over every turn; the orchestrator's, whose turns a written trace does not say, kept.
    channels = [Channel(k, "team", {"team": Part(v, None, [])}) if _family(k) in OUTCOME_FAMILIES else
                Channel(k, "orchestrator", {"orchestrator": Part(v, None, [])}, kept=True)
                for k, v in trace.rewards.items() if _family(k) in _TEAM_FAMILIES]
    again = {c.key for c in channels if not c.kept}
    # A channel spread again keeps its place in a turn's credit (0 until spread: adding to 0 is exact).
    kept = [{k: 0.0 if k in again else v for k, v in (turns[i].credit or {}).items()} for i in order]
    credit = assign(shape, shape.on_path(), channels, strategy, kept)
    shares_ = credit.events
    for i, ev in enumerate(trace.events):
        ev.credit = shares_[i] if shares_ is not None else None
    new_turns = list(turns)
    for c, i in zip(credit.turns, order, strict=True):
        update = {"credit": c or None, "reward": sum(c.values()) if c else None}
        new_turns[i] = turns[i].model_copy(update=update)
    for k in [k for k in trace.rewards if k.startswith(CREDIT_PREFIX)]:
        del trace.rewards[k]
    trace.rewards.update(credit.agents)
    return new_turns
