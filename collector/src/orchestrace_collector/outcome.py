"""The episode's outcome: one number per trace, the one every export and ``stats`` read (``episode_reward``,
the groups of GRPO/RLOO, DPO pairs, KTO labels, ``--min-reward``, the reward spread).

It is the sum of the trace's team-unit channels: the ``rewards`` keys whose family is credited to the whole
team by default (``orchestrace_semconv.OUTCOME_FAMILIES``: ``team``, ``verifier``, ``hybrid``; ``shared`` and
``outcome`` as other names of ``team``), named (``verifier:unit_tests``) or not. That is what the turns'
team-unit shares add up to. A trace without any has no outcome (None: not rewarded, which is not 0). Rewards
of another unit (an agent's, a tool's, a turn's) and the derived keys (``agent:<label>``, ``credit:...``)
are never part of it. ``key`` (``--outcome KEY``) picks one channel instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from orchestrace_semconv import OUTCOME_FAMILIES, REWARD_FAMILIES, REWARD_FAMILY_ALIASES


class OutcomeKeyError(ValueError):
    pass


def family_of(key: str) -> str:
    """The family of a channel key (``verifier:unit_tests`` -> ``verifier``), aliases read as theirs."""
    family = key.split(":", 1)[0]
    return REWARD_FAMILY_ALIASES.get(family, family)


def outcome_key(key: str | None) -> str | None:
    """``--outcome KEY`` checked: a reward channel (``family`` or ``family:name``), aliases read as theirs."""
    if key is None:
        return None
    family, sep, name = key.partition(":")
    if family_of(key) not in REWARD_FAMILIES or (sep and not name):
        raise OutcomeKeyError(
            f"--outcome {key!r}: give a reward channel, family or family:name "
            f"(families: {', '.join(REWARD_FAMILIES)})"
        )
    return REWARD_FAMILY_ALIASES.get(family, family) + sep + name


def episode_outcome(rewards: Mapping[str, Any], key: str | None = None) -> float | None:
    """The outcome of a trace with these ``rewards`` (see the module docstring); ``key``: that channel's
    value instead (as :func:`outcome_key` returns it)."""
    values = {str(k): _number(v) for k, v in rewards.items()}
    if key is not None:
        return values.get(key)
    parts = [v for k, v in values.items() if v is not None and family_of(k) in OUTCOME_FAMILIES]
    return math.fsum(parts) if parts else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)
