"""One credit engine: conversion, ``annotate``, reward functions and the viewer credit with the same code
(``convert.credit.assign``), so a written trace credited again gives the numbers its conversion wrote.

Every golden span dump (``golden/*.jsonl``), each of its traces given team, verifier, orchestrator, agent and
turn rewards on its root span, is converted with each strategy; its written credit (``rewards``, each turn's
``credit`` and ``reward``, each event's ``credit``) must come back exactly when the written trace is credited
again (``recredit``) with that strategy from a conversion with any strategy, and when the outcome's rewards
are added late by ``annotate`` to the trace converted without them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from convert_support import GOLDEN, traces_of
from orchestrace import semconv as sc
from orchestrace_collector.annotations import make_annotation
from orchestrace_collector.convert import Episode, convert_episode
from orchestrace_collector.convert.credit import STRATEGIES, recredit
from orchestrace_collector.decode import decode_file
from orchestrace_collector.model import Trace, Turn
from orchestrace_collector.spans import Span, SpanEvent
from written_traces import checked

#: The outcome's rewards (added late by ``annotate`` too) and the others (only recorded on spans).
OUTCOME = {"team": 1.0, "verifier:tests": 0.5}
OTHERS: list[dict[str, Any]] = [
    {sc.ORCH_REWARD_UNIT: "orchestrator", sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.25},
    {sc.ORCH_REWARD_UNIT: "agent", sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.125},
    {sc.ORCH_REWARD_UNIT: "turn", sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.0625},
]
DUMPS = sorted(GOLDEN.glob("*.jsonl"))


def _rewarded(spans: Sequence[Span], outcome: bool) -> list[Span]:
    """The spans with rewards recorded on the root span at its end (the outcome's only if ``outcome``)."""
    ids = {s.span_id for s in spans}
    root = next(s for s in spans if s.parent_span_id not in ids)
    attrs = [dict(a) for a in OTHERS]
    if outcome:
        attrs.append({sc.GEN_AI_EVALUATION_SCORE_VALUE: OUTCOME["team"]})
        attrs.append({sc.ORCH_REWARD_FAMILY: "verifier", sc.GEN_AI_EVALUATION_NAME: "tests",
                      sc.GEN_AI_EVALUATION_SCORE_VALUE: OUTCOME["verifier:tests"]})
    events = [*root.events, *(SpanEvent(sc.EVENT_EVALUATION_RESULT, root.end_ns, a) for a in attrs)]
    return [replace(s, events=tuple(events)) if s is root else s for s in spans]


def _credit(trace: Trace, turns: Sequence[Turn]) -> tuple[Any, ...]:
    return (dict(trace.rewards), [(t.turn_id, t.credit, t.reward) for t in turns],
            [(e.id, e.credit) for e in trace.events])


def _recredited(episode: Episode, strategy: str) -> tuple[Any, ...]:
    trace = episode.trace.model_copy(deep=True)
    turns = recredit(trace, episode.turns, strategy)
    checked(trace)  # still a valid trace
    return _credit(trace, turns)


@pytest.mark.parametrize("dump", DUMPS, ids=[p.stem for p in DUMPS])
def test_every_golden_trace_credited_again_gives_its_written_credit(dump: Any) -> None:
    for spans in traces_of(decode_file(dump)):
        rewarded = _rewarded(spans, outcome=True)
        written = {s: convert_episode(rewarded, credit=s) for s in STRATEGIES}
        for strategy, episode in written.items():
            checked(episode)
            expected = _credit(episode.trace, episode.turns)
            assert set(OUTCOME) <= set(expected[0]), expected[0]
            assert any(e.credit for e in episode.trace.events)
            assert all(t.credit for t in episode.turns)  # the outcome is written on every turn
            for source in STRATEGIES:  # the viewer's and recompute's path: from a trace of any strategy
                assert _recredited(written[source], strategy) == expected, (source, strategy)
            # annotate's (and a reward function's) path: the outcome added to the trace converted without it
            late = convert_episode(_rewarded(spans, outcome=False), credit=strategy)
            trace, turns = late.trace.model_copy(deep=True), late.turns
            for key, value in OUTCOME.items():
                turns = make_annotation(trace.trace_id, key, value, "replace", strategy).apply(trace, turns)
            assert _credit(trace, turns) == expected, strategy
