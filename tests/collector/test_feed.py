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
from orchestrace_collector.feed import Feed
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
