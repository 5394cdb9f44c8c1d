"""Write-ahead log: records, torn tails, retention, and the kill -9 test on a real collector."""

from __future__ import annotations

import errno
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from collector_fixtures import encode_protobuf, record_run, start_collector, validate_trace_dir
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from orchestrace_collector.assemble import Assembler
from orchestrace_collector.ingest import Ingest
from orchestrace_collector.output import TraceDirWriter
from orchestrace_collector.wal import KIND_BATCH, KIND_WRITTEN, WriteAheadLog, iter_records


@pytest.mark.parametrize("policy", ["batch", "interval", "none"])
def test_records_survive_reopen_in_order(tmp_path: Path, policy: str) -> None:
    wal = WriteAheadLog(tmp_path, fsync=policy, segment_bytes=100)  # type: ignore[arg-type]
    payloads = [f"batch {i}".encode() * (i + 1) for i in range(12)]
    for payload in payloads:
        _, seq = wal.append(payload)
        wal.sync(seq)
    wal.append(b'{"key": "k"}', KIND_WRITTEN)
    wal.close()
    assert len(wal.segments) > 2, "small segments rotate"
    reopened = WriteAheadLog(tmp_path, fsync=policy)  # type: ignore[arg-type]
    records = list(reopened.replay())
    assert [p for _, kind, p in records if kind == KIND_BATCH] == payloads
    assert records[-1][1:] == (KIND_WRITTEN, b'{"key": "k"}')
    assert reopened.segments[-1] > max(s for s, _, _ in records), "a restart appends to a new segment"
    reopened.close()


def test_torn_and_corrupt_tails_are_cut(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path)
    for index in range(3):
        wal.append(f"record {index}".encode())
    wal.close()
    segment = next(tmp_path.glob("*.wal"))
    data = segment.read_bytes()
    segment.write_bytes(data[:-3])  # the crash cut the last write short
    assert [p for _, _, p in WriteAheadLog(tmp_path).replay()] == [b"record 0", b"record 1"]
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF  # a flipped bit in the last payload: its checksum fails
    segment.write_bytes(bytes(corrupt))
    assert [p for _, _, p in WriteAheadLog(tmp_path).replay()] == [b"record 0", b"record 1"]


def test_replay_continues_past_a_torn_record_in_the_middle(tmp_path: Path) -> None:
    def record(payload: bytes) -> bytes:
        directory = tmp_path / payload.decode()
        wal = WriteAheadLog(directory)
        wal.append(payload)
        wal.close()
        return next(directory.glob("*.wal")).read_bytes()

    corrupt = bytearray(record(b"flipped"))
    corrupt[-1] ^= 0xFF  # a checksum that fails
    live = tmp_path / "live"
    live.mkdir()
    (live / "0000000001.wal").write_bytes(
        record(b"before") + record(b"torn")[:-2] + bytes(corrupt) + b"\0garbage" + record(b"after")
    )
    assert [p for _, _, p in WriteAheadLog(live).replay()] == [b"before", b"after"]


def test_a_failed_append_leaves_no_partial_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import orchestrace_collector.wal as wal_module

    wal = WriteAheadLog(tmp_path)
    wal.append(b"kept")
    real_write = os.write

    def half_then_enospc(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 8:
            real_write(fd, bytes(data[:8]))  # the disk fills up in the middle of the record
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(wal_module.os, "write", half_then_enospc)
    with pytest.raises(OSError):
        wal.append(b"refused")
    assert wal.error is not None and "No space" in wal.error
    monkeypatch.setattr(wal_module.os, "write", real_write)
    wal.append(b"after")
    assert wal.error is None, "the next append that works clears the error"
    wal.close()
    data = next(tmp_path.glob("*.wal")).read_bytes()
    assert [p for _, p in iter_records(data)] == [b"kept", b"after"]
    assert len(data) == 2 * (13 + 4) + len(b"kept") + len(b"after") - 8, "no stray bytes"


def test_a_failed_rotation_keeps_the_current_segment_open(tmp_path: Path) -> None:
    directory = tmp_path / "wal"
    wal = WriteAheadLog(directory, segment_bytes=10)
    directory.chmod(0o500)  # new segments cannot be created (as root too: the fsync of the dir still works)
    try:
        if os.access(directory, os.W_OK) and os.geteuid() == 0:
            # root ignores the mode: make creation fail by taking the next segment's name with a directory
            directory.chmod(0o700)
            (directory / f"{wal.segments[-1] + 1:010d}.wal").mkdir()
        for index in range(5):
            segment, seq = wal.append(f"record {index}".encode())
            wal.sync(seq)
            wal.done(segment)
        assert len(wal.segments) == 1, "rotation failed: every record went to the one open segment"
    finally:
        directory.chmod(0o700)
    for blocker in directory.glob("*.wal"):
        if blocker.is_dir():
            blocker.rmdir()
    wal.append(b"after recovery")  # the rotation is retried and now succeeds
    assert len(wal.segments) == 2
    wal.close()
    payloads = [p for _, _, p in WriteAheadLog(directory).replay()]
    assert payloads == [f"record {i}".encode() for i in range(5)] + [b"after recovery"]


def test_retire_deletes_only_a_prefix_with_nothing_in_flight(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, segment_bytes=10)
    first, _ = wal.append(b"first batch")
    second, _ = wal.append(b"second batch")
    third, _ = wal.append(b"third batch")
    assert first < second < third < wal.segments[-1]
    wal.done(second)
    wal.done(third)
    assert wal.retire(None) == 0, "the first batch is still in flight, so nothing after it may go either"
    wal.done(first)
    assert wal.retire(keep_from=third) == 2
    assert wal.segments[0] == third
    assert wal.retire(None) == 1 and len(wal.segments) == 1, "the open segment always stays"
    wal.close()


@pytest.mark.slow
def test_kill_9_loses_no_acknowledged_span(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # Long quiet period: at the kill, acknowledged traces are still open, only the WAL holds them.
    collector = start_collector(out, "--quiet-period", "30", "--wal-segment-mb", "0.05")
    acked: dict[str, int] = {}
    lock = threading.Lock()
    killed = threading.Event()
    runs = [
        (f"kill-{i}", encode_protobuf(spans), len(spans))
        for i, spans in enumerate(record_run(f"kill-{i}", tools=1 + i % 3) for i in range(400))
    ]

    def send(run: tuple[str, bytes, int]) -> None:
        task, body, count = run
        if killed.is_set():
            return
        try:
            response = httpx.post(
                collector.http_endpoint,
                content=body,
                headers={"Content-Type": "application/x-protobuf"},
                timeout=10,
            )
        except httpx.HTTPError:
            return
        if response.status_code == 200:
            with lock:
                acked[task] = count
                if len(acked) == 150:
                    collector.kill()
                    killed.set()

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(send, runs))
    assert killed.is_set() and len(acked) >= 150
    assert not list(out.glob("traces-*.jsonl")) or len(validate_trace_dir(out)) < len(acked)

    restarted = start_collector(out, "--quiet-period", "0.2")
    assert restarted.stop() == 0
    assert "replayed" in restarted.log_text()
    written = {t["task_id"]: t["metrics"]["spans"] for t in validate_trace_dir(out).values()}
    missing = {task: count for task, count in acked.items() if written.get(task) != count}
    assert not missing, f"acknowledged but not written after kill -9: {missing}"


def test_segments_are_deleted_once_their_episodes_are_written(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path / "wal", segment_bytes=2000)
    writer = TraceDirWriter(tmp_path)
    assembler = Assembler(writer, quiet_period_s=0, retain_spans=0, wal=wal)
    ingest = Ingest(wal, assembler)
    for index in range(20):
        ingest.submit(encode_spans(record_run(f"seg-{index}")))
    assert len(wal.segments) > 5
    ingest.start()
    ingest.stop()  # assembles what is queued, writes every episode, retires segments
    assert writer.written == 20
    assert len(wal.segments) == 1, "only the open segment is left"
    wal.close()
    # A restart finds only markers: nothing is written twice.
    wal = WriteAheadLog(tmp_path / "wal")
    again = Assembler(writer, wal=wal)
    Ingest(wal, again).replay()
    assert again.open_episodes == 0 and again.flush() == 0
    wal.close()
