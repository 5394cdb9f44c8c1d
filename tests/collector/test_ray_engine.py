"""``--engine ray`` on a local Ray cluster writes what the local engine writes, from the same dump files.

The inputs exercise what the Ray engine has to get right across files: one OTel trace split over a protobuf
and an OTLP-JSON file, an episode stitched from two OTel traces by its episode id, a span sent twice (an
exporter retry), and a file that is not a trace export.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from collector_fixtures import encode_otlp_json, encode_protobuf, record_run
from orchestrace_collector.offline import convert_local
from orchestrace_collector.output import TraceDirWriter

pytest.importorskip("ray")


def _digest(out: Path, prefix: str) -> tuple[int, str]:
    lines = sorted(
        json.dumps(json.loads(line), sort_keys=True)
        for path in out.glob(f"{prefix}*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    )
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


@pytest.fixture
def dumps(tmp_path: Path) -> list[Path]:
    plain_a, plain_b = record_run("task-a"), record_run("task-b", tools=3)
    split = record_run("task-split", tools=4)
    first_half = record_run("task-ep", episode_id="ep-1")
    second_half = record_run("task-ep", episode_id="ep-1")
    directory = tmp_path / "dumps"
    directory.mkdir()
    (directory / "a.pb").write_bytes(encode_protobuf([*plain_a, *plain_b, *first_half, *split[:2]]))
    (directory / "b.json").write_text(json.dumps(encode_otlp_json([*split[2:], *second_half, plain_a[0]])))
    (directory / "c.pb").write_bytes(b"this is not a trace export")
    return [directory]


def test_ray_engine_writes_what_the_local_engine_writes(tmp_path: Path, dumps: list[Path]) -> None:
    from orchestrace_collector.ray_engine import convert_with_ray

    local_writer, ray_writer = TraceDirWriter(tmp_path / "local"), TraceDirWriter(tmp_path / "ray")
    local = convert_local(dumps, local_writer)
    local_writer.close()
    on_ray = convert_with_ray(dumps, ray_writer)
    ray_writer.close()

    # Four episodes: two plain runs, the run split over two files, and ep-1 stitched from two OTel traces.
    assert local.written == on_ray.written == 4
    assert (on_ray.files, on_ray.spans, on_ray.failed) == (local.files, local.spans, local.failed)
    assert len(on_ray.bad_files) == len(local.bad_files) == 1
    assert "c.pb" in on_ray.bad_files[0]
    assert _digest(tmp_path / "ray", "traces-") == _digest(tmp_path / "local", "traces-")
    assert _digest(tmp_path / "ray", "turns-") == _digest(tmp_path / "local", "turns-")
    stitched = [
        json.loads(line)
        for line in next((tmp_path / "ray").glob("traces-*.jsonl")).read_text().splitlines()
        if json.loads(line)["task_id"] == "task-ep"
    ]
    assert len(stitched) == 1
    assert len({e["otel_trace_id"] for e in stitched[0]["events"] if "otel_trace_id" in e}) == 2
