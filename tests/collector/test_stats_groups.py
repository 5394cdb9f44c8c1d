"""``orchestrace stats``: the group structure (tasks, rollouts per task, reward spread within groups), against
rollouts whose rewards are known by construction."""

from __future__ import annotations

from pathlib import Path

import pytest
from export_fixtures import episode, write
from orchestrace_collector.cli import app
from orchestrace_collector.output import latest_traces
from orchestrace_collector.stats import compute_stats
from typer.testing import CliRunner


@pytest.fixture
def out(tmp_path: Path) -> Path:
    rollouts = [
        ("a1", "task-1", 1.0),
        ("a2", "task-1", 0.0),
        ("a3", "task-1", 0.5),
        ("b1", "task-2", 1.0),
        ("b2", "task-2", 1.0),
        ("c1", "task-3", None),
    ]
    return write(tmp_path / "out", *(episode(t, task, team=r, answer="x") for t, task, r in rollouts))


def test_groups_by_task(out: Path) -> None:
    stats = compute_stats(latest_traces([out]).values())
    assert {task: sorted(r, key=str) for task, r in stats.groups.items()} == {
        "task-1": [0.0, 0.5, 1.0],
        "task-2": [1.0, 1.0],
        "task-3": [None],
    }


def test_stats_shows_rollouts_per_task_and_reward_spread(out: Path) -> None:
    result = CliRunner().invoke(app, ["stats", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    cells = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
        for line in result.output.splitlines()
        if line.count("│") >= 3
    }
    assert cells["tasks"] == ["3"]
    assert cells["rollouts per task (min / mean / max)"] == ["1 / 2 / 3"]
    assert cells["tasks with 2+ rollouts"] == ["2"]
    assert cells["tasks with 2+ rewarded rollouts, all the same reward"] == ["1"]  # task-2: no signal
    assert cells["task-1"] == ["3", "3", "0.5", "0.4082", "0", "1"]
    assert cells["task-2"] == ["2", "2", "1", "0", "1", "1"]
    assert cells["task-3"] == ["1", "0", "-", "-", "-", "-"]
