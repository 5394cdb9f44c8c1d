"""The live feed (``GET /v1/episodes``, ``orchestrace_collector.feed``) against a real ``orchestrace collect``
fed by the real SDK over OTLP: rollouts whose tasks, outcomes and turns are known by construction."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from collector_fixtures import RunningCollector, start_collector, validate_trace_dir
from orchestrace_collector.cli import app
from orchestrace_collector.export import export
from orchestrace_collector.feed import Feed, Group
from typer.testing import CliRunner

PROGRAM = textwrap.dedent("""
    import sys
    import orchestrace as ot

    endpoint, spec = sys.argv[1], sys.argv[2]
    handle = ot.configure("feed-test", exporter="otlp", endpoint=endpoint, capture_content=True)

    @ot.llm("fake-model", provider="test")
    def chat(messages, answer):
        return {"choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2}}

    @ot.agent
    def solver(name, steps):
        for k in range(steps):
            chat([{"role": "user", "content": f"step {k}"}], f"{name} answer {k}")

    for task, name, steps, outcome in [s.split(":") for s in spec.split(",")]:
        with ot.task(task):
            solver(name, int(steps))
            ot.reward(float(outcome), family="team")
    handle.shutdown()
""")


def run_app(collector: RunningCollector, *rollouts: tuple[str, str, int, float]) -> None:
    spec = ",".join(f"{t}:{n}:{s}:{o}" for t, n, s, o in rollouts)
    done = subprocess.run([sys.executable, "-c", PROGRAM, collector.base_url, spec], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


ROLLOUTS = [("t1", "a", 2, 1.0), ("t2", "b", 1, 0.0), ("t1", "c", 1, 0.0), ("t2", "d", 3, 1.0),
            ("t1", "e", 1, 0.5)]


def wait_written(collector: RunningCollector, count: int) -> list[dict[str, object]]:
    """Every trace the feed lists, once ``count`` are there (the collector writes an episode when its root
    span ends)."""
    with Feed(collector.base_url, wait_s=5) as feed:
        seen = []
        for episode in feed.episodes():
            seen.append(episode)
            if len(seen) == count:
                return seen
    raise AssertionError("unreachable")


def test_groups_of_n_rollouts_with_advantages_and_rows_as_export_writes(tmp_path: Path) -> None:
    collector = start_collector(tmp_path / "out")
    try:
        run_app(collector, *ROLLOUTS)
        wait_written(collector, len(ROLLOUTS))
        with Feed(collector.base_url, wait_s=0.2) as feed:
            groups = list(feed.groups(2, follow=False))
    finally:
        assert collector.stop() == 0
    validate_trace_dir(collector.out)
    # t1 and t2 complete their pairs in write order; t1's third rollout is left over: a partial group.
    assert [(g.task_id, len(g.episodes), g.partial) for g in groups] == [
        ("t1", 2, False), ("t2", 2, False), ("t1", 1, True)]
    assert [g.advantages() for g in groups] == [[0.5, -0.5], [-0.5, 0.5], [0.0]]
    answers = [[r["completion"][0]["content"] for e in g.episodes for r in e.rows] for g in groups]
    assert answers == [["a answer 0", "a answer 1", "c answer 0"], ["b answer 0", "d answer 0", "d answer 1",
                       "d answer 2"], ["e answer 0"]]
    # The rows are those `orchestrace export` writes for the same directory, formats alike.
    for fmt, feed_format in (("jsonl", "turns"), ("trl", "trl"), ("decisions", "decisions")):
        export([collector.out], fmt, tmp_path / f"{fmt}.jsonl")
        written = [json.loads(line) for line in (tmp_path / f"{fmt}.jsonl").read_text().splitlines()]
        collector = start_collector(collector.out)  # the feed of a restarted collector: same rows
        try:
            with Feed(collector.base_url, format=feed_format, wait_s=0) as feed:
                fed = [row for e in feed.episodes(follow=False) for row in e.rows]
        finally:
            assert collector.stop() == 0
        key = "turn_id" if fmt != "decisions" else "event_id"
        assert sorted(fed, key=lambda r: (r["trace_id"], str(r.get(key)))) == sorted(
            written, key=lambda r: (r["trace_id"], str(r.get(key))))


def test_a_consumer_cursor_survives_restarts_and_late_rewards_come_as_updates(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cursor = tmp_path / "trainer.cursor"
    collector = start_collector(out)
    try:
        run_app(collector, *ROLLOUTS[:3])
        wait_written(collector, 3)
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            stream = feed.episodes(follow=False)
            first = [next(stream), next(stream)]  # the second is not consumed: the consumer stops in it
            stream.close()
    finally:
        assert collector.stop() == 0
    collector = start_collector(out)  # a restarted collector: the cursor still holds
    try:
        run_app(collector, ROLLOUTS[3])
        wait_written(collector, 4)
        result = CliRunner().invoke(app, ["annotate", str(out), "--trace-id", first[0].trace_id,
                                          "--reward", "0.25", "--name", "late", "--family", "verifier"])
        assert result.exit_code == 0, result.output
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            rest = list(feed.episodes(follow=False))
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            assert list(feed.episodes(follow=False)) == []  # all consumed: nothing twice
        response = httpx.get(f"{collector.base_url}/v1/episodes", params={"after": "x"})
        assert response.status_code == 400
    finally:
        assert collector.stop() == 0
    validate_trace_dir(out)
    assert [(e.trace_id, e.update) for e in rest] == [(first[1].trace_id, False), (rest[1].trace_id, False),
                                                      (rest[2].trace_id, False), (first[0].trace_id, True)]
    assert rest[3].outcome() == 1.25 and rest[3].revision > first[0].revision
    assert len({e.trace_id for e in [*first, *rest]}) == 4


def test_the_feed_asks_for_the_receivers_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret\n")
    collector = start_collector(tmp_path / "out", "--token-file", str(tmp_path / "token"))
    try:
        assert httpx.get(f"{collector.base_url}/v1/episodes").status_code == 401
        with Feed(collector.base_url, token="s3cret", wait_s=0) as feed:
            assert list(feed.episodes(follow=False)) == []
        with Feed(collector.base_url, token="wrong", wait_s=0) as feed, pytest.raises(httpx.HTTPStatusError):
            list(feed.episodes(follow=False))
    finally:
        assert collector.stop() == 0


def _solvers(group: Group) -> list[str]:
    """The rollouts of a group, by their solver's name (each rollout's first answer starts with it)."""
    return [e.rows[0]["completion"][0]["content"].split()[0] for e in group.episodes]


def _annotate(out: Path, trace_id: str) -> None:
    result = CliRunner().invoke(app, ["annotate", str(out), "--trace-id", trace_id, "--reward", "0.25",
                                      "--name", "late", "--family", "verifier"])
    assert result.exit_code == 0, result.output


def test_groups_delivered_before_a_restart_are_not_delivered_again(tmp_path: Path) -> None:
    """A consumer takes a group, then restarts (a new ``Feed`` on its cursor file; the collector restarted
    too) while a late reward revises a rollout of that group: the revision comes alone as an update, never
    as a fresh rollout of a new group; the group it was in does not come again."""
    out, cursor = tmp_path / "out", tmp_path / "trainer.cursor"
    collector = start_collector(out)
    try:
        run_app(collector, ("t1", "a", 1, 1.0), ("t2", "b", 1, 0.0), ("t1", "c", 1, 0.0))
        wait_written(collector, 3)
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            stream = feed.groups(2, follow=False)
            first = next(stream)
            unfinished = next(stream)  # asking for it consumed the first; the consumer stops in this one
            stream.close()
    finally:
        assert collector.stop() == 0
    assert (first.task_id, _solvers(first), first.partial) == ("t1", ["a", "c"], False)
    assert (unfinished.task_id, _solvers(unfinished), unfinished.partial) == ("t2", ["b"], True)
    collector = start_collector(out)
    try:
        _annotate(out, first.episodes[0].trace_id)  # rollout "a", delivered
        run_app(collector, ("t1", "e", 1, 0.5), ("t2", "d", 1, 1.0))
        wait_written(collector, 6)
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            after = list(feed.groups(2, follow=False))
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            assert list(feed.groups(2, follow=False)) == []  # all consumed: nothing twice
    finally:
        assert collector.stop() == 0
    validate_trace_dir(out)
    assert [(g.task_id, _solvers(g), g.partial, g.update) for g in after] == [
        ("t1", ["a"], False, True), ("t2", ["b", "d"], False, False), ("t1", ["e"], True, False)]
    (revised,) = after[0].episodes
    assert revised.outcome() == 1.25 and revised.revision > first.episodes[0].revision


def test_a_rollout_revised_before_its_group_came_is_still_grouped_after_a_restart(tmp_path: Path) -> None:
    """A rollout revised (a late reward) while it waits for its group, and the consumer restarting after
    taking another group: the revision that replaced it still comes in a group, not as an update."""
    out, cursor = tmp_path / "out", tmp_path / "trainer.cursor"
    collector = start_collector(out)
    try:
        run_app(collector, ("t1", "a", 1, 1.0), ("t2", "b", 1, 0.0))
        (a,) = [e for e in wait_written(collector, 2) if e.task_id == "t1"]
        _annotate(out, a.trace_id)
        run_app(collector, ("t2", "c", 1, 1.0))
        wait_written(collector, 4)
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            stream = feed.groups(2, follow=False)
            first = next(stream)
            unfinished = next(stream)  # the consumer stops in it
            stream.close()
        with Feed(collector.base_url, cursor_file=cursor, wait_s=0) as feed:
            after = list(feed.groups(2, follow=False))
    finally:
        assert collector.stop() == 0
    validate_trace_dir(out)
    assert (first.task_id, _solvers(first)) == ("t2", ["b", "c"])
    for group in (unfinished, *after):
        assert (group.task_id, _solvers(group), group.partial, group.update) == ("t1", ["a"], True, False)
        assert group.episodes[0].revision > a.revision
    assert len(after) == 1
