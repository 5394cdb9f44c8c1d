"""Random multi-agent apps (``random_apps``): what was written, in-process, offline and through ``collect``,
against what each app did by construction."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from collector_fixtures import RunningCollector
from ground_truth_apps import WAYS, run_three_ways
from random_apps import draw, run, truth


def _base(label: str | None) -> str:
    """The agent name of an activation label (``worker#2`` -> ``worker``; ``agent#1#2`` -> ``agent#1``)."""
    if label is None:
        return ""
    name, sep, k = label.rpartition("#")
    return name if sep and k.isdigit() else label


def _pairs(events: list[dict[str, Any]], kind: str) -> Counter[tuple[str, str]]:
    """(parent, child) agent names of the spawns, or of the returns to a parent."""
    if kind == "spawn":
        return Counter((e["agent"], _base(e["to"])) for e in events if e["type"] == "spawn")
    return Counter((_base(e.get("to")), e["agent"]) for e in events if e["type"] == "return" and e.get("to"))


@pytest.mark.parametrize("seed", range(30))
def test_a_random_app_is_written_as_it_ran(tmp_path: Path, collector: RunningCollector, seed: int) -> None:
    app = draw(seed)
    want = truth(app)
    outputs = run_three_ways(tmp_path, collector, lambda: run(app, f"random-{seed}"))
    written = {}
    for way in WAYS:
        trace, turns = outputs[way].only()
        tokens: Counter[str] = Counter()
        for turn in turns:
            tokens[turn["agent"]] += turn.get("input_tokens", 0) + turn.get("output_tokens", 0)
        assert +tokens == want.tokens, way
        assert len(turns) == want.turns, way
        assert sum(turn.get("cache_read_input_tokens", 0) for turn in turns) == want.cached, way
        assert sum(bool(turn.get("completion_incomplete")) for turn in turns) == want.incomplete, way
        costs = trace["costs"]
        assert (costs["tokens"], costs["tool_calls"], costs["messages"]) == (
            sum(want.tokens.values()), want.tool_calls, want.messages), way
        assert trace["rewards"].get("individual", 0) == pytest.approx(want.individual), way
        credited = sum((turn.get("credit") or {}).get("individual", 0) for turn in turns)
        assert credited == pytest.approx(want.individual), way
        events = trace["events"]
        assert sum(e["type"] == "aggregate" for e in events) == want.aggregates, way
        task = events[0]["agent"]
        spawns = _pairs(events, "spawn")
        returns = _pairs(events, "return")
        assert {pair: n for pair, n in spawns.items() if pair[0] != task} == want.children, way
        assert {pair: n for pair, n in returns.items() if pair[0] != task} == want.children, way
        replies = Counter((e["agent"], _base(e["to"])) for e in events
                          if e["type"] == "message" and e.get("to") != "peer")
        assert +replies == want.replies, way
        assert sum(e["type"] == "safety_event" for e in events) == want.safety_events, way
        assert sum(e["type"] == "human_intervention" for e in events) == want.human_interventions, way
        metrics = {k: v for k, v in trace["metrics"].items() if k != "revision"}
        written[way] = json.dumps({**trace, "metrics": metrics}, sort_keys=True)
    assert written["trace_dir"] == written["convert"] == written["collect"]
