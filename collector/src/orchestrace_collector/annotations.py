"""Late rewards (``orchestrace annotate``, ``--reward`` functions): team-unit rewards added to a trace after
its spans were converted.

A late reward is a team-unit channel, part of the episode's outcome (``orchestrace_collector.outcome``): its
key is the family or ``family:name`` (``verifier:unit_tests``), the family one of
``orchestrace.semconv.OUTCOME_FAMILIES`` (``team``, ``verifier``, ``hybrid``; ``shared`` and ``outcome`` are
written ``team``). A reward of another family is of an agent, a tool, a turn: it needs a target, which only
``ot.reward`` gives, so it is refused here. ``replace`` (the rule for outcomes, and the default) sets the
channel to the value; ``add`` adds to what it holds. Credit is assigned again on events, turns and agents
by the converter's own credit engine (``convert.credit.recredit``). Annotations recorded in
``annotations.jsonl`` beside the traces are applied by the writer to every later revision of their trace.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from orchestrace_semconv import OUTCOME_FAMILIES, REWARD_FAMILY_ALIASES

from orchestrace_collector.convert.credit import check_strategy, recredit
from orchestrace_collector.model import Trace, Turn

Mode = Literal["replace", "add"]
MODES: tuple[Mode, ...] = ("replace", "add")


def check_key(key: str) -> str:
    """A late reward's key: ``family`` or ``family:name`` with a team-unit family, as written (ValueError
    otherwise)."""
    family, sep, name = key.partition(":")
    family = REWARD_FAMILY_ALIASES.get(family, family)
    if family not in OUTCOME_FAMILIES:
        raise ValueError(
            f"reward key {key!r}: a late reward is the team's, its family one of "
            f"{', '.join((*OUTCOME_FAMILIES, *REWARD_FAMILY_ALIASES))}; rewards of an agent, tool or turn "
            "are recorded with ot.reward(..., target=...)"
        )
    return family + sep + name


@dataclass(frozen=True)
class Annotation:
    trace_id: str
    key: str
    value: float
    mode: Mode = "replace"
    strategy: str = "causal"
    #: The revision ``annotate`` wrote with it: a later revision of the trace is numbered above it.
    revision: int = 0

    def apply(self, trace: Trace, turns: Sequence[Turn]) -> list[Turn]:
        """Apply in place on ``trace``; returns its turns with their new credit."""
        value = self.value if self.mode == "replace" else trace.rewards.get(self.key, 0.0) + self.value
        return recredit(trace, turns, self.strategy, self.key, value)


def make_annotation(trace_id: str, key: str, value: float, mode: str, strategy: str,
                    revision: int = 0) -> Annotation:
    key = check_key(key)
    check_strategy(strategy)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if isinstance(value, bool) or not math.isfinite(float(value)):
        raise ValueError(f"a reward must be a finite number, not {value!r}")
    return Annotation(trace_id, key, float(value), mode, strategy, revision)


def read_annotations(path: Path) -> dict[str, list[Annotation]]:
    """The annotations recorded in ``path`` (``annotations.jsonl``), by trace id, in recorded order."""
    found: dict[str, list[Annotation]] = {}
    if not path.exists():
        return found
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                annotation = Annotation(**json.loads(line))
            except (ValueError, TypeError):
                continue  # a torn last line (a crash while appending) is not an annotation
            found.setdefault(annotation.trace_id, []).append(annotation)
    return found


def annotation_line(annotation: Annotation) -> str:
    return json.dumps(asdict(annotation), ensure_ascii=False) + "\n"
