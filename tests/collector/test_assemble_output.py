"""The output directory writer: content store, rotation, revisions and what readers take."""

from __future__ import annotations

import hashlib
from pathlib import Path

from collector_fixtures import record_run, validate_trace_dir
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.model import Turn
from orchestrace_collector.output import TraceDirWriter, content_path, latest_traces, latest_turns


def test_content_rotation_and_last_revision_wins(tmp_path: Path) -> None:
    writer = TraceDirWriter(tmp_path, rotate_bytes=1)  # every line starts a new file
    episode = convert_episode([span_from_readable(s) for s in record_run("out-1")])
    text = "the captured prompt"
    ref = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    turn = Turn(trace_id=episode.trace.trace_id, task_id="out-1", turn_id="t1", agent="worker", t=0.0)
    writer.write(episode.trace, [turn], {ref: text}, revision=0)
    episode.trace.rewards["team"] = 1.0
    writer.write(episode.trace, [turn.model_copy(update={"reward": 1.0})], {ref: text}, revision=1)
    writer.close()

    assert content_path(tmp_path, ref.removeprefix("sha256:")).read_text() == text
    assert sorted(p.name for p in tmp_path.glob("traces-*.jsonl")) == [
        "traces-00000.jsonl",
        "traces-00001.jsonl",
    ]
    traces = validate_trace_dir(tmp_path)
    (trace,) = traces.values()
    assert trace["metrics"]["revision"] == 1 and trace["rewards"]["team"] == 1.0
    (latest_turn,) = latest_turns(tmp_path, traces)[trace["trace_id"]]
    assert latest_turn["reward"] == 1.0 and latest_turn["revision"] == 1

    # A new writer on the same directory appends after what is there.
    again = TraceDirWriter(tmp_path, rotate_bytes=1 << 20)
    again.write(episode.trace, revision=2)
    again.close()
    assert latest_traces([tmp_path])[trace["trace_id"]]["metrics"]["revision"] == 2
    assert len(list(tmp_path.glob("traces-*.jsonl"))) == 2
