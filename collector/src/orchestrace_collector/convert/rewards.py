"""Rewards recorded on spans (``gen_ai.evaluation.result`` events) -> reward channels, each resolved to the
turns it is credited to.

A reward has a *family* (what kind it is) and a *unit* (what it is credited to), from one vocabulary
(``orchestrace.semconv.REWARD_UNIT_FAMILY`` / ``REWARD_FAMILY_UNIT``; ``shared`` and ``outcome`` are read as
``team``): each defaults from the other; with neither, a reward with a target is of the target's unit (an
agent, a role, a tool, a turn, an event: never the team's), one recorded on a model-call span a ``process``
reward of that turn, any other a ``team`` reward. Its *channel* (its key in ``rewards``) is ``family``, or
``family:name`` when it has a name of its own (``gen_ai.evaluation.name`` other than the family).

**The outcome.** The channels of unit ``team`` are the episode's outcome, and a written trace says so by the
key alone (``orchestrace_collector.outcome``: the families ``team``, ``verifier``, ``hybrid``). So a family
given with a unit of the other kind is written under the unit's family with the given family as its name:
``family="verifier", unit="turn"`` is ``process:verifier`` (one turn's, not the outcome);
``family="individual", unit="team"`` is ``team:individual`` (the team's, part of the outcome).

**Repeated keys.** Within a channel, one value per unit instance: the last recorded wins (a team outcome
recorded twice is one outcome; a verifier re-run replaces its score). Values for distinct instances add up
(two agents each rewarded 0.5 make the channel 1.0).

**Nothing vanishes silently.** A value that is not a finite number, an unknown family or unit, a target that
matches nothing, or a reward the SDK already refused (``orchestrace.reward.rejected``) is not credited: it is
counted in ``metrics.rejected_rewards`` (and ``rejected_rewards:<reason>``) and logged once per reason.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import orchestrace_semconv as sc

from .actors import Actors, Instance
from .classify import K_MODEL, K_TOOL
from .credit import TEAM_UNITS, Channel, Part
from .events import Ev, EventSet
from .forest import Node
from .kinds import FAMILIES, FAMILY_UNIT, UNIT_FAMILY, UNITS, RewardUnit
from .turns import TurnIndex, TurnRec

log = logging.getLogger(__name__)

REJECTED = "rejected_rewards"
_logged: set[str] = set()
_logged_lock = threading.Lock()


def reward_value(raw: object) -> float | None:
    """A finite number, or None (rewards are numbers only)."""
    if isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw)
        except ValueError:
            return None
    else:
        return None
    return value if math.isfinite(value) else None


def channel_key(family: str, name: str | None) -> str:
    return f"{family}:{name}" if name and name != family else family


@dataclass(slots=True)
class RewardSet:
    channels: dict[str, Channel]
    rejected: dict[str, int]
    #: event position -> its reward (the sum of the parts it stands for: an agent's return, a tool's result)
    event_rewards: dict[int, float]


def collect_rewards(events_set: EventSet, actors: Actors, turns: list[TurnRec],
                    linked: TurnIndex) -> RewardSet:
    channels: dict[str, Channel] = {}
    rejected: dict[str, int] = {}
    if not events_set.evaluations:
        return RewardSet(channels, rejected, {})  # most episodes: no index of turns and agents to build
    resolver = _Resolver(events_set, actors, turns, linked)
    standing: dict[tuple[str, str], Ev | None] = {}  # (channel, unit instance) -> the event standing for it
    recorded = sorted(events_set.evaluations, key=lambda item: item[1].time_ns)  # stable: ties keep order
    for node, event in recorded:
        attrs = event.attributes
        family_raw, unit_raw = attrs.get(sc.ORCH_REWARD_FAMILY), attrs.get(sc.ORCH_REWARD_UNIT)
        unit_named = str(unit_raw) if unit_raw else None
        given = str(family_raw) if family_raw else None
        family_named = sc.REWARD_FAMILY_ALIASES.get(given, given) if given else None
        # Known (typed) or None; a name given that is no unit or family is refused below.
        unit = UNITS.get(unit_named) if unit_named else None
        family = FAMILIES.get(family_named) if family_named else None
        target_raw = attrs.get(sc.ORCH_REWARD_TARGET)
        target = str(target_raw) if target_raw else None
        if unit_named is None and family_named is None and target is not None:
            unit = resolver.unit_of(target)  # None: the target matches nothing
            if unit is None:
                _reject(rejected, "no_target", attrs)
                continue
        if unit is None:
            unit = (FAMILY_UNIT.get(family) if family else None) or (
                "turn" if node.kind is K_MODEL and family_named is None else "team")
        if family is None and family_named is None:
            family = UNIT_FAMILY[unit] if unit_named is None or unit_named in UNITS else "team"
        value = reward_value(attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE))
        reason = attrs.get(sc.ORCH_REWARD_REJECTED)
        if reason:
            problem: str | None = str(reason)
        elif value is None:
            raw = attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
            problem = "not_finite" if _is_number(raw) else "not_a_number"
        elif family is None:
            problem = "unknown_family"
        elif unit_named is not None and unit_named not in UNITS:
            problem = "unknown_unit"
        else:
            problem = None
        resolved = resolver.resolve(unit, target, node, event.time_ns) if problem is None else None
        if problem is None and resolved is None:
            problem = "no_target"
        if problem is not None or resolved is None or value is None or family is None:
            _reject(rejected, problem or "no_target", attrs)
            continue
        name = attrs.get(sc.GEN_AI_EVALUATION_NAME)
        named = str(name) if name and name not in ("reward", given) else None
        if (unit == "team") != (FAMILY_UNIT[family] == "team"):
            # The key's family tells every reader whether the channel is part of the outcome: a family given
            # with a unit of the other kind becomes the name, under the unit's family.
            named, family = named or family, "team" if unit == "team" else UNIT_FAMILY[unit]
        key = channel_key(family, named)
        instance, part, ev = resolved
        part.value = value
        channel = channels.setdefault(key, Channel(key, unit))
        channel.parts[f"{unit}:{instance}"] = part  # last recorded wins
        standing[(key, f"{unit}:{instance}")] = ev
    event_rewards: dict[int, float] = {}
    for channel in channels.values():
        for instance, part in channel.parts.items():
            ev = standing[(channel.key, instance)]
            if ev is not None:
                event_rewards[ev.index] = event_rewards.get(ev.index, 0.0) + part.value
    return RewardSet(channels, rejected, event_rewards)


def _is_number(raw: object) -> bool:
    return isinstance(raw, int | float) and not isinstance(raw, bool)


def _reject(rejected: dict[str, int], reason: str, attrs: object) -> None:
    rejected[reason] = rejected.get(reason, 0) + 1
    with _logged_lock:
        first = reason not in _logged
        _logged.add(reason)
    if first:
        log.warning("orchestrace: reward not credited (%s): %s; further ones are counted in "
                    "metrics.%s:%s, not logged", reason, attrs, REJECTED, reason)


def rejected_metrics(rejected: dict[str, int]) -> dict[str, float]:
    if not rejected:
        return {}
    metrics = {f"{REJECTED}:{reason}": float(n) for reason, n in sorted(rejected.items())}
    metrics[REJECTED] = float(sum(rejected.values()))
    return metrics


class _Resolver:
    """A reward's unit instance and the turns it is credited to."""

    def __init__(self, events_set: EventSet, actors: Actors, turns: list[TurnRec],
                 linked: TurnIndex) -> None:
        self.events_set = events_set
        self.actors = actors
        self.turns = turns
        self.turn_by_span = {t.node.span.span_id: i for i, t in enumerate(turns)}
        self.turn_of_event: dict[int, int] = {}
        self.turns_of: dict[int, list[int]] = {}  # id(instance) -> its turns
        for i, turn in enumerate(turns):
            self.turns_of.setdefault(id(turn.owner), []).append(i)
            for ev in linked.events[i]:
                self.turn_of_event.setdefault(id(ev), i)
        self.by_agent_id = {inst.agent_id: inst for inst in actors.instances if inst.agent_id}

    def unit_of(self, target: str) -> RewardUnit | None:
        """The unit of the first kind of instance ``target`` names: an agent (id, name or activation label),
        a role, a tool (call id or name), a model call (span id), an event (span id)."""
        if target in self.by_agent_id or target in self.actors.by_name or target in self.actors.by_label:
            return "agent"
        if any(inst.role == target for inst in self.actors.instances):
            return "role"
        if target in self.turn_by_span:
            return "turn"
        if target in self.events_set.tool_calls or any(
                ev.type == "tool_result" and ev.node is not None and ev.node.name == target
                for ev in self.events_set.events):
            return "tool"
        return "event" if target in self.events_set.closing else None

    def resolve(self, unit: RewardUnit, target: str | None, node: Node,
                t_ns: int) -> tuple[str, Part, Ev | None] | None:
        """The unit instance a reward is of, its part (value 0 until set) and the event standing for it."""
        if unit in TEAM_UNITS:
            turns = self._orchestrator_turns() if unit == "orchestrator" else []
            return unit, Part(0.0, None, turns), None
        if unit == "agent":
            inst = self._agent(target, t_ns) if target else self.actors.of(node)
            if inst is None:
                return None
            # One value per activation (the last recorded wins), summed per agent in the key.
            part = Part(0.0, f"agent:{inst.name}", self._instance_turns([inst]))
            return inst.label, part, self.events_set.ret(inst)
        if unit == "role":
            role = target or self.actors.of(node).role
            members = [inst for inst in self.actors.instances if role and inst.role == role]
            if not members:
                return None
            return str(role), Part(0.0, f"role:{role}", self._instance_turns(members)), None
        if unit in ("turn", "token"):
            turn = self._turn(target, node, t_ns)
            if turn is None:
                return None
            span_id = self.turns[turn].node.span.span_id
            return span_id, Part(0.0, f"turn:{span_id}", [turn]), None
        if unit == "tool":
            result = self._tool_result(target, node, t_ns)
            if result is None:
                return None
            call = result.decision_ev or result
            turns = self._event_turns(call)
            return call.id or str(id(call)), Part(0.0, f"tool:{result.agent}", turns), result
        events_set = self.events_set
        ev = events_set.closing.get(target) if target else _span_event(events_set, self.actors, node)
        if ev is None:
            return None
        return str(id(ev)), Part(0.0, f"event:{ev.id}", self._event_turns(ev)), ev

    # --- instances --------------------------------------------------------------------------------------

    def _agent(self, target: str, t_ns: int) -> Instance | None:
        """An explicit handle (agent id, activation label ``name#k``), else the activation of that name whose
        work was judged: the latest that finished before the reward, else the one running then."""
        inst = self.by_agent_id.get(target)
        if inst is not None:
            return inst
        candidates = self.actors.by_name.get(target)
        if not candidates:
            return self.actors.by_label.get(target)
        finished = [c for c in candidates if c.end_ns <= t_ns]
        if finished:
            return max(finished, key=lambda c: c.end_ns)
        return self.actors.resolve(target, t_ns)

    def _instance_turns(self, insts: list[Instance]) -> list[int]:
        """The turns of those activations; else of the activations they started; else of those that started
        them; else none (the team strategy decides)."""
        for group in (insts, _descendants(insts), _ancestors(insts)):
            turns = sorted(t for inst in group for t in self.turns_of.get(id(inst), ()))
            if turns:
                return turns
        return []

    def _orchestrator_turns(self) -> list[int]:
        """The turns that made orchestration decisions, else the top-level activations' turns."""
        deciding = sorted({self.turn_of_event[id(ev)] for ev in self.events_set.events
                           if ev.type == "orchestrator_decision" and id(ev) in self.turn_of_event})
        if deciding:
            return deciding
        return self._instance_turns([inst for inst in self.actors.instances if inst.parent is None])

    # --- turns and events -------------------------------------------------------------------------------

    def _turn(self, target: str | None, node: Node, t_ns: int) -> int | None:
        if target is not None:
            return self.turn_by_span.get(target)
        if node.kind is K_MODEL:
            return self.turn_by_span.get(node.span.span_id)
        # The recording agent's latest model call so far.
        owned = self.turns_of.get(id(self.actors.of(node)), [])
        started = [i for i in owned if self.turns[i].node.start_ns <= t_ns]
        return started[-1] if started else None

    def _tool_result(self, target: str | None, node: Node, t_ns: int) -> Ev | None:
        if target is None:
            return self.events_set.closing.get(node.span.span_id) if node.kind is K_TOOL else None
        by_id = self.events_set.tool_calls.get(target) or self.events_set.closing.get(target)
        if by_id is not None:
            return by_id
        named = [ev for ev in self.events_set.events
                 if ev.type == "tool_result" and ev.node is not None and ev.node.name == target]
        finished = [ev for ev in named if ev.t_ns <= t_ns] or named
        return finished[-1] if finished else None

    def _event_turns(self, ev: Ev) -> list[int]:
        """The turn that produced ``ev``, else its agent's latest turn before it, else its agent's turns."""
        turn = self.turn_of_event.get(id(ev))
        if turn is not None:
            return [turn]
        owner = ev.decision_ev.owner if ev.type == "tool_result" and ev.decision_ev else ev.owner
        owned = self.turns_of.get(id(owner), [])
        before = [i for i in owned if self.turns[i].node.start_ns <= ev.t_ns]
        return [before[-1]] if before else self._instance_turns([owner])


def _descendants(insts: Iterable[Instance]) -> list[Instance]:
    found: list[Instance] = []
    stack = [child for inst in insts for child in inst.children]
    while stack:
        inst = stack.pop()
        found.append(inst)
        stack.extend(inst.children)
    return found


def _ancestors(insts: Iterable[Instance]) -> list[Instance]:
    found: list[Instance] = []
    for inst in insts:
        parent = inst.parent
        while parent is not None:
            found.append(parent)
            parent = parent.parent
    return found


def _span_event(events_set: EventSet, actors: Actors, node: Node) -> Ev | None:
    """The event that stands for a span: its closing event, else its enclosing actor's return."""
    ev = events_set.closing.get(node.span.span_id)
    if ev is not None:
        return ev
    if node.kind is K_MODEL:
        return None
    return events_set.ret(actors.of(node))
