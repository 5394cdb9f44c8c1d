"""Rewards recorded on spans (``gen_ai.evaluation.result`` events) -> event ``reward`` fields and ``rewards``
keys.

Keys written to ``rewards`` (all sums of the recorded values):

- ``<family>``: ``orchestrace.reward.family`` when given, else by unit: ``team`` (unit team or none),
  ``individual`` (agent), ``role`` (role), ``tool`` (tool), ``process`` (turn, message, event). A reward
  recorded on a model-call span without a unit is a turn reward.
- ``agent:<label>``, ``role:<role>``, ``tool:<name>``, ``turn:<span id>``, ``event:<event id>``: the same
  value scoped to its unit (``orchestrace.reward.target``, else the unit the recording span stands for).

Credited shares of the team reward are added later by ``credit.py`` under ``credit:agent:<label>``.
"""

from __future__ import annotations

import math

from orchestrace import semconv as sc

from .actors import Actors
from .classify import Kind, tool_name
from .events import Ev, EventSet
from .forest import Node
from .turns import TurnRec

_FAMILY_BY_UNIT = {
    None: "team",
    "team": "team",
    "agent": "individual",
    "role": "role",
    "tool": "tool",
    "turn": "process",
    "message": "process",
    "event": "process",
}


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


def apply_rewards(events_set: EventSet, actors: Actors, turns: list[TurnRec]) -> dict[str, float]:
    rewards: dict[str, float] = {}
    turn_by_span = {t.node.span.span_id: t for t in turns}
    for node, event in events_set.evaluations:
        attrs = event.attributes
        value = reward_value(attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE))
        if value is None:
            continue
        unit_raw = attrs.get(sc.ORCH_REWARD_UNIT)
        unit = str(unit_raw) if unit_raw else ("turn" if node.kind is Kind.MODEL else None)
        family_raw = attrs.get(sc.ORCH_REWARD_FAMILY)
        family = str(family_raw) if family_raw else _FAMILY_BY_UNIT.get(unit, "team")
        target_raw = attrs.get(sc.ORCH_REWARD_TARGET)
        target = str(target_raw) if target_raw else None
        rewards[family] = rewards.get(family, 0.0) + value

        ev: Ev | None = _span_event(events_set, node)
        key: str | None = None
        if unit == "agent":
            inst = actors.resolve(target, event.time_ns) if target else node.instance
            if inst is not None:
                key = f"agent:{inst.label}"
                ev = inst.ret or ev
            elif target:
                key = f"agent:{target}"
        elif unit == "role":
            role = target or (node.instance.role if node.instance is not None else None)
            key = f"role:{role}" if role else None
        elif unit == "tool":
            name = target or (tool_name(node.span) if node.kind is Kind.TOOL else None)
            key = f"tool:{name}" if name else None
        elif unit == "turn":
            turn = turn_by_span.get(target or node.span.span_id)
            if turn is not None:
                turn.reward = (turn.reward or 0.0) + value
                key = f"turn:{turn.node.span.span_id}"
                ev = None
        elif unit in ("message", "event"):
            if target:
                ev = events_set.closing.get(target, ev)
            key = f"event:{ev.id}" if ev is not None else None
        if key is not None:
            rewards[key] = rewards.get(key, 0.0) + value
        if ev is not None:
            ev.reward = (ev.reward or 0.0) + value
    return rewards


def _span_event(events_set: EventSet, node: Node) -> Ev | None:
    """The event that stands for a span: its closing event, else its enclosing actor's return."""
    ev = events_set.closing.get(node.span.span_id)
    if ev is not None:
        return ev
    if node.kind is Kind.MODEL:
        return None
    return node.instance.ret if node.instance is not None else None
