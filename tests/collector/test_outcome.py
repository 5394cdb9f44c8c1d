"""One outcome per episode (the sum of its team-unit reward channels), used by every export and by ``stats``:
rollouts of one task whose outcome and length are known by construction, recorded by the real SDK and
written in-process (``trace_dir``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orchestrace as ot
import pytest
from collector_fixtures import validate_trace_dir
from opentelemetry.sdk.trace import TracerProvider
from orchestrace_collector.cli import app
from orchestrace_collector.export import Filters, export
from orchestrace_collector.output import latest_traces
from orchestrace_collector.stats import compute_stats
from typer.testing import CliRunner


@ot.llm("fake-model", provider="test")
def _chat(messages: list[dict[str, str]], answer: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2}}


@ot.agent
def solver(rollout: str, steps: int) -> str:
    for k in range(steps):
        _chat([{"role": "user", "content": f"step {k}"}], f"{rollout} answer {k}")
    return rollout


def record(tmp_path: Path, app_fn: Callable[[], None]) -> Path:
    out = tmp_path / "out"
    handle = ot.configure("outcome-test", exporter="none", trace_dir=out, capture_content=True,
                          tracer_provider=TracerProvider(shutdown_on_exit=False))
    try:
        app_fn()
    finally:
        handle.shutdown()
    validate_trace_dir(out)
    return out


#: The issue's three rollouts of one task: (name, team outcome, turns).
ROLLOUTS = (("GOOD", 1.0, 4), ("MID", 0.6, 2), ("BAD", 0.4, 1))


def _rollouts() -> None:
    for name, outcome, steps in ROLLOUTS:
        with ot.task("task-1"):
            solver(name, steps)
            ot.reward(outcome, family="team")


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_pairs_choose_the_best_rollout_whatever_its_length(tmp_path: Path) -> None:
    out = record(tmp_path, _rollouts)
    export([out], "trl", tmp_path / "dpo.jsonl", trl_kind="dpo")
    pairs = rows(tmp_path / "dpo.jsonl")
    # Every turn of BAD, the worst rollout, has its match in GOOD, the best: one pair, chosen from GOOD.
    assert [(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in pairs] == [
        ("GOOD answer 0", "BAD answer 0")]
    assert (pairs[0]["chosen_reward"], pairs[0]["rejected_reward"]) == (1.0, 0.4)


def test_labels_say_whether_the_rollout_beat_its_group(tmp_path: Path) -> None:
    out = record(tmp_path, _rollouts)
    export([out], "trl", tmp_path / "kto.jsonl", trl_kind="kto")
    labelled = rows(tmp_path / "kto.jsonl")
    by_answer = {r["completion"][0]["content"].split()[0]: r["label"] for r in labelled}
    assert by_answer == {"GOOD": True, "MID": False, "BAD": False}
    assert sorted(r["label"] for r in labelled) == [False] * 3 + [True] * 4
    assert [r["group_mean_reward"] for r in labelled] == pytest.approx([2.0 / 3] * 7)


def test_min_reward_keeps_the_turns_of_rollouts_that_reached_it(tmp_path: Path) -> None:
    out = record(tmp_path, _rollouts)
    assert export([out], "jsonl", tmp_path / "turns.jsonl", filters=Filters(min_reward=0.5)) == 6
    assert {r["episode_reward"] for r in rows(tmp_path / "turns.jsonl")} == {1.0, 0.6}


def _verified() -> None:
    with ot.task("verified"):
        solver("V", 2)
        ot.reward(0.75, family="verifier")
    with ot.task("verified"):
        solver("W", 1)
        ot.reward(0.25, family="verifier", name="unit_tests")
        ot.reward(0.5, family="shared", unit="team")


def test_verifier_and_shared_rewards_are_the_outcome(tmp_path: Path) -> None:
    out = record(tmp_path, _verified)
    export([out], "jsonl", tmp_path / "turns.jsonl")
    outcomes = {r["completion"][0]["content"][0]: r["episode_reward"] for r in rows(tmp_path / "turns.jsonl")}
    assert outcomes == {"V": 0.75, "W": 0.75}
    traces = latest_traces([out]).values()
    assert sorted(t["rewards"].get("team", 0) for t in traces) == [0, 0.5]
    stats = compute_stats(traces)
    assert stats.groups["verified"] == [0.75, 0.75]
    # One channel picked by name: only the second rollout has a verifier:unit_tests reward.
    export([out], "jsonl", tmp_path / "picked.jsonl", outcome="verifier:unit_tests")
    picked = {r["completion"][0]["content"][0]: r["episode_reward"] for r in rows(tmp_path / "picked.jsonl")}
    assert picked == {"V": None, "W": 0.25}


def _targeted() -> None:
    with ot.task("targeted"):
        solver("w", 2)
        ot.reward(0.3, family="team")
        ot.reward(5.0, target="solver")


def test_a_reward_with_a_target_and_no_family_is_of_the_targets_unit(tmp_path: Path) -> None:
    out = record(tmp_path, _targeted)
    (trace,) = latest_traces([out]).values()
    assert trace["rewards"]["team"] == 0.3
    assert trace["rewards"]["individual"] == 5.0 and trace["rewards"]["agent:solver"] == 5.0
    export([out], "jsonl", tmp_path / "turns.jsonl")
    turns = rows(tmp_path / "turns.jsonl")
    assert {r["episode_reward"] for r in turns} == {0.3}
    assert sum(r["reward"] for r in turns) == pytest.approx(5.3)


def test_stats_counts_the_outcome_of_every_rollout(tmp_path: Path) -> None:
    out = record(tmp_path, lambda: (_rollouts(), _verified()))
    result = CliRunner().invoke(app, ["stats", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    cells = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
             for line in result.output.splitlines() if line.count("│") >= 3}
    assert cells["verified"][:2] == ["2", "2"]  # rollouts, rewarded
    assert cells["task-1"][:3] == ["3", "3", "0.6667"]


@ot.tool
def lookup(query: str) -> str:
    return query


@ot.agent(role="reviewer")
def checker() -> None:
    _chat([{"role": "user", "content": "check"}], "checked")
    lookup("q")


def _targets_of_every_kind() -> None:
    with ot.task("kinds"):
        checker()
        ot.reward(0.25, target="lookup")  # a tool
        ot.reward(0.5, target="checker")  # an agent
        ot.reward(0.125, target="reviewer")  # a role
        ot.reward(1.0, target="nobody")  # matches nothing: refused and counted, never the team's


def test_a_target_names_its_unit_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    out = record(tmp_path, _targets_of_every_kind)
    (trace,) = latest_traces([out]).values()
    rewards = trace["rewards"]
    assert (rewards["tool"], rewards["individual"], rewards["agent:checker"]) == (0.25, 0.5, 0.5)
    assert (rewards["role"], rewards["role:reviewer"]) == (0.125, 0.125)
    assert "team" not in rewards and trace["metrics"]["rejected_rewards:no_target"] == 1


def test_annotate_takes_the_papers_names_of_the_team_family(tmp_path: Path) -> None:
    out = record(tmp_path, _targeted)
    for family, value in (("shared", 0.5), ("outcome", 0.7)):
        done = CliRunner().invoke(app, ["annotate", str(out), "--task-id", "targeted", "--reward", str(value),
                                        "--family", family])
        assert done.exit_code == 0, done.output
        (trace,) = validate_trace_dir(out).values()
        assert trace["rewards"]["team"] == value
    refused = CliRunner().invoke(app, ["annotate", str(out), "--task-id", "targeted", "--reward", "1",
                                       "--family", "individual"])
    assert refused.exit_code == 1 and "--family must be one of team, verifier, hybrid" in refused.output


@ot.agent
def graded() -> None:
    _chat([{"role": "user", "content": "grade me"}], "graded")
    ot.reward(0.75, family="verifier", unit="turn")  # a verifier's score of that one turn


def _crossed() -> None:
    with ot.task("crossed"):
        solver("c", 2)
        graded()
        ot.reward(0.5, family="individual", unit="team")  # the team's, whatever its family
        ot.reward(0.25, family="verifier", name="judge", unit="agent", target="solver")


def test_a_family_given_with_a_unit_of_the_other_kind_keys_by_the_unit(tmp_path: Path) -> None:
    out = record(tmp_path, _crossed)
    (trace,) = latest_traces([out]).values()
    channels = {k: v for k, v in trace["rewards"].items() if not k.startswith(("credit:", "turn:", "agent:"))}
    assert channels == {"process:verifier": 0.75, "team:individual": 0.5, "individual:judge": 0.25}
    export([out], "jsonl", tmp_path / "turns.jsonl")
    turns = rows(tmp_path / "turns.jsonl")
    assert {r["episode_reward"] for r in turns} == {0.5}  # only the team-unit reward is the outcome
    assert sum(r["reward"] for r in turns) == pytest.approx(1.5)
