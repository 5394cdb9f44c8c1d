"""The timeline, replay and credit pages in a real browser, against what the written trace says: lanes,
arrows, decision marks and credit colours by id and count, the scrubber's state at given steps, keyboard
folding."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from collector_fixtures import validate_trace_dir
from example_runs import ExampleRun
from orchestrace_collector.output import latest_turns
from orchestrace_collector.view.credit import credit_by_strategy
from view_support import expected_arrows, expected_lanes, lane_key, route_to, running_view

from bench.view_data import build_episode, write_episodes

pytestmark = pytest.mark.xdist_group("example_runs")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two rollouts of one task (hostile names, a name run twice, a handoff, a spawn, a branch nobody
    aggregates) written by the collector's writer."""
    out = tmp_path_factory.mktemp("built")
    names = ["alpha <b>", "beta#2", "alpha <b>"]
    write_episodes(out, [
        build_episode("ep-a", "task-1", names, handoff_worker=1, spawn_workers=[2], dropped=[1], outcome=1.0),
        build_episode("ep-b", "task-1", ["alpha <b>", "gamma"], outcome=0.0),
    ])
    validate_trace_dir(out)
    return out


@pytest.fixture(scope="module")
def served(built: Path, example_run: Callable[[str], ExampleRun]) -> Iterator[tuple[str, dict[str, Any]]]:
    runs = {key: example_run(key) for key in ("supervisor-content-a", "map_reduce")}
    dirs = [run.trace_dir for run in runs.values() if run.trace_dir is not None]
    with running_view(built, *dirs) as base:
        yield base, {"built": built, **{k: run.trace_dir for k, run in runs.items()}}


def latest(out: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    traces = validate_trace_dir(out)
    return traces, latest_turns(out, traces)


def drawn(page: Any, selector: str, attribute: str) -> list[str]:
    return page.eval_on_selector_all(selector, f"els => els.map(e => e.getAttribute('{attribute}'))")


def drawn_pairs(page: Any, selector: str, key: str, value: str) -> dict[str, str]:
    return dict(zip(drawn(page, selector, key), drawn(page, selector, value), strict=True))


def episode_url(trace_id: str, tab: str, query: str = "") -> str:
    return f"#/episode/{quote(trace_id, safe='')}/{tab}{query}"


@pytest.mark.parametrize("run", ["built", "supervisor-content-a", "map_reduce"])
def test_timeline_draws_every_lane_arrow_and_decision_of_the_trace(
        page: Any, served: tuple[str, dict[str, Any]], run: str) -> None:
    base, dirs = served
    traces, turns = latest(dirs[run])
    for trace_id, trace in traces.items():
        assert route_to(page, base, episode_url(trace_id, "timeline")) == "ready"
        lanes = expected_lanes(trace, turns[trace_id])
        assert sorted(drawn(page, ".busy.lane", "data-lane-key")) == sorted(set(lanes.values()))
        arrows = expected_arrows(trace, turns[trace_id])
        assert arrows, "the trace has arrows to draw"
        assert drawn_pairs(page, "path.arrow", "data-event-id", "data-kind") == arrows
        decisions = {e["id"]: e.get("decision") or "other" for e in trace["events"]
                     if e["type"] == "orchestrator_decision"}
        assert drawn_pairs(page, ".decision", "data-event-id", "data-decision") == decisions
        # Every mark sits in the lane of its event or turn, and says what it is in words.
        for mark in page.query_selector_all(".mark"):
            key = mark.get_attribute("data-event-id") or mark.get_attribute("data-turn-id")
            assert mark.get_attribute("data-lane-key") == lanes[key]
            assert mark.get_attribute("aria-label")
        tools = [e["id"] for e in trace["events"] if e["type"] == "tool_call"]
        assert sorted(drawn(page, ".mark-tool", "data-event-id")) == sorted(tools)
        want_turns = sorted(t["turn_id"] for t in turns[trace_id])
        assert sorted(drawn(page, ".mark-turn", "data-turn-id")) == want_turns


def test_handoffs_spawn_decisions_and_hostile_names(page: Any, served: tuple[str, dict[str, Any]]) -> None:
    base, dirs = served
    traces, _ = latest(dirs["built"])
    route_to(page, base, episode_url("ep-a", "timeline"))
    kinds = drawn(page, "path.arrow", "data-kind")
    assert kinds.count("handoff") == 1 and kinds.count("delegate") == 1
    spawns = [e["id"] for e in traces["ep-a"]["events"] if e.get("decision") == "spawn"]
    assert len(spawns) == 2  # the lead's first decision and the spawned third worker
    assert drawn(page, ".decision-spawn", "data-event-id") == spawns
    labels = page.eval_on_selector_all(".lane-label text", "els => els.map(e => e.textContent)")
    assert any("alpha <b> #2" in label for label in labels)  # shown as text, never as markup
    assert page.query_selector("b") is None
    assert any("beta#2" in label for label in labels)


def test_lanes_fold_to_their_agent_by_keyboard(page: Any, served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    route_to(page, base, episode_url("ep-a", "timeline"))
    assert len(page.query_selector_all(".lane-label")) == 4  # lead, alpha #1, alpha #2, beta#2
    page.focus(".lane-label[data-row='0']")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.agent") == "alpha <b>"
    page.keyboard.press("Enter")
    assert len(page.query_selector_all(".lane-label")) == 3
    assert page.get_attribute(".lane-label[data-agent='alpha <b>']", "aria-expanded") == "false"
    assert len(page.query_selector_all(".busy.lane")) == 4  # both activations drawn in the agent's row
    page.keyboard.press("Enter")
    assert len(page.query_selector_all(".lane-label")) == 4


def test_zoom_shows_a_part_of_the_time(page: Any, served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    route_to(page, base, episode_url("ep-a", "timeline"))
    before = len(page.query_selector_all(".mark"))
    page.focus("svg.timeline-svg")
    for _ in range(4):
        page.keyboard.press("+")
    assert 0 < len(page.query_selector_all(".mark")) < before
    page.keyboard.press("0")
    assert len(page.query_selector_all(".mark")) == before


def replay_expected(trace: dict[str, Any], turns: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """After step ``step``: activations busy at its time, the last decision, tokens of finished calls."""
    order = sorted(enumerate(trace["events"]), key=lambda pair: (pair[1]["t"], pair[0]))
    now = order[step][1]["t"]
    decisions = [e["id"] for _, e in order[: step + 1] if e["type"] == "orchestrator_decision"]
    busy = [(e["agent"], e["activation"], e["t_start"], e["t"]) for e in trace["events"]
            if e["type"] == "return" and isinstance(e.get("activation"), int)]
    return {
        "active": sorted(lane_key(a, k) for a, k, start, end in busy if start <= now < end),
        "decision": decisions[-1] if decisions else "",
        "tokens": sum(t["input_tokens"] + t["output_tokens"] for t in turns if t["t_end"] <= now),
    }


def test_replay_state_at_given_steps_and_in_the_url(page: Any, served: tuple[str, dict[str, Any]]) -> None:
    base, dirs = served
    traces, turns = latest(dirs["built"])
    trace = traces["ep-a"]
    for step in (0, 7, 20, len(trace["events"]) - 1):
        assert route_to(page, base, episode_url("ep-a", "replay", f"?step={step}")) == "ready"
        want = replay_expected(trace, turns["ep-a"], step)
        assert page.get_attribute(".replay-state", "data-step") == str(step)
        assert sorted(json.loads(page.get_attribute(".replay-state", "data-active"))) == want["active"]
        assert page.get_attribute("#replay-decision", "data-event-id") == want["decision"]
        assert page.get_attribute(".replay-state", "data-tokens") == str(want["tokens"])
    # Keyboard on the scrubber steps, and the URL follows (a link opens the same moment).
    route_to(page, base, episode_url("ep-a", "replay", "?step=3"))
    page.focus("#scrubber")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.get_attribute(".replay-state", "data-step") == "5"
    assert page.evaluate("location.hash").endswith("step=5")
    page.click("#step-back")
    assert page.get_attribute(".replay-state", "data-step") == "4"
    assert len(page.query_selector_all(".cursor")) == 1


@pytest.mark.parametrize("strategy", ["uniform", "causal"])
def test_credit_colours_follow_the_strategy(
        page: Any, served: tuple[str, dict[str, Any]], strategy: str) -> None:
    base, dirs = served
    traces, turns = latest(dirs["built"])
    credit = credit_by_strategy(traces["ep-a"], turns["ep-a"])["by_strategy"][strategy]
    route_to(page, base, episode_url("ep-a", "credit", f"?strategy={strategy}"))
    signs = drawn_pairs(page, ".mark-turn", "data-turn-id", "data-credit-sign")
    want = {turn_id: "positive" if sum(c.values()) > 0 else "zero" for turn_id, c in credit["turns"].items()}
    assert signs == want
    assert ("zero" in want.values()) == (strategy == "causal")  # the branch nobody aggregated
    split = {row.get_attribute("data-lane-key"): float(row.get_attribute("data-credit"))
             for row in page.query_selector_all(".agent-split tbody tr")}
    assert split == pytest.approx({lane_key(a, k): v for a, k, v in credit["agents"]})
    assert sum(split.values()) == pytest.approx(traces["ep-a"]["rewards"]["team"])
    # Switching strategy recomputes in place.
    other = "causal" if strategy == "uniform" else "uniform"
    page.check(f"input[name=strategy][value={other}]")
    assert page.evaluate("location.hash").endswith(f"strategy={other}")
    hover = page.get_attribute(".mark-turn", "aria-label")
    assert "team" in hover and other in hover
