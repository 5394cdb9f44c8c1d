"""The kinds the conversion compares, as ``Literal`` aliases so that mypy checks every comparison
(``strict_equality`` on this package) at no cost at run time (plain ``str`` to mypyc): of events, edges and
decisions as written (``model``'s), and of rewards, the unit and family of ``orchestrace_semconv``'s one
reward vocabulary (the tables below are built from it at import: a unit or family it adds and these do not
name fails the import, and ``tests/collector/test_credit_engine.py`` checks the converse)."""

from __future__ import annotations

from typing import Literal, get_args

import orchestrace_semconv as sc

from ..model import Decision, EdgeType, EventType, Topology

__all__ = [
    "DECISIONS", "FAMILIES", "FAMILY_UNIT", "TOPOLOGIES", "UNITS", "UNIT_FAMILY", "Decision", "EdgeType",
    "EventType", "RewardFamily", "RewardUnit", "Topology",
]

RewardUnit = Literal["team", "orchestrator", "role", "agent", "turn", "message", "event", "tool", "token"]
RewardFamily = Literal[
    "team", "individual", "role", "process", "tool", "debate", "verifier", "orchestration", "hybrid",
]
#: Every decision kind by its name (a name read from a span is checked with ``.get``).
DECISIONS: dict[str, Decision] = {kind: kind for kind in get_args(Decision)}
TOPOLOGIES: dict[str, Topology] = {topology: topology for topology in get_args(Topology)}
#: Every unit and family by its name (a name read from a span is checked with ``.get``).
UNITS: dict[str, RewardUnit] = {unit: unit for unit in get_args(RewardUnit)}
FAMILIES: dict[str, RewardFamily] = {family: family for family in get_args(RewardFamily)}
#: ``sc.REWARD_UNIT_FAMILY`` and ``sc.REWARD_FAMILY_UNIT``, typed.
UNIT_FAMILY: dict[RewardUnit, RewardFamily] = {
    UNITS[unit]: FAMILIES[family] for unit, family in sc.REWARD_UNIT_FAMILY.items()}
FAMILY_UNIT: dict[RewardFamily, RewardUnit] = {
    FAMILIES[family]: UNITS[unit] for family, unit in sc.REWARD_FAMILY_UNIT.items()}
