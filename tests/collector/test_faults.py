"""The fault suite: a real collector under storage faults, restarts, pressure and hostile clients.

The long ones are marked slow: out of ``make test``, run by ``make test-slow`` (CI runs both).

Each test asserts that no acknowledged span is lost (every run answered 200 is in a written trace with all its
spans after the fault and a restart) and that the collector keeps serving (answers, recovers by itself).
``FAULT_TABLE=path`` collects the fault table (sent, acknowledged, written, peak RSS) of these runs.
"""

from __future__ import annotations

import random
import socket
import subprocess
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import httpx
import pytest
from collector_fixtures import (
    RunningCollector,
    encode_protobuf,
    free_port,
    record_run,
    start_collector,
    validate_trace_dir,
)
from fault_support import (
    PROTOBUF_HEADERS,
    PeakRss,
    Sent,
    assert_acked_written,
    assert_within_memory_limit,
    fill,
    record_fault,
    run_body,
    tmpfs,
    wait_healthy,
    with_new_trace_ids,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from orchestrace_collector.decode import spans_from_export
from orchestrace_collector.output import iter_jsonl, jsonl_files, latest_traces
from orchestrace_collector.spans import resident_bytes
from orchestrace_collector.wal import KIND_BATCH, MAGIC, frame, records_at

from bench.spangen import requests, trace_spans


@pytest.mark.slow
def test_full_disk_keeps_every_acknowledged_span_and_recovers(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "8m") as disk:
        ballast = fill(disk, leave_bytes=160 << 10)
        collector = start_collector(disk, "--quiet-period", "0.2")
        rss = PeakRss(collector.process.pid)
        sent = Sent()
        unhealthy = []
        with httpx.Client() as client:
            for index in range(60):
                task = f"full-{index}"
                body, spans = run_body(task, tools=12)
                sent.post(client, collector.http_endpoint, task, body, spans)
                health = client.get(f"{collector.base_url}/healthz")
                if health.status_code == 503:
                    unhealthy.append(health.text)
            assert sent.refused > 0, "the disk never filled: the test proves nothing"
            assert unhealthy and "No space left" in unhealthy[-1], "/healthz must say why storage fails"
            assert str(disk) not in "".join(unhealthy), "but not where"
            ballast.unlink()  # space returns: the collector recovers without a restart
            for index in range(60, 80):
                task = f"full-{index}"
                body, spans = run_body(task, tools=12)
                for _ in range(50):  # what an exporter does with 503 + Retry-After (shortened)
                    if sent.post(client, collector.http_endpoint, task, body, spans) == 200:
                        break
                    time.sleep(0.2)
                assert task in sent.acked, "not accepted again after space returned"
            wait_healthy(collector)
        assert collector.stop() == 0
        restarted = start_collector(disk, "--quiet-period", "0.2")
        assert restarted.stop() == 0
        written = assert_acked_written(sent, disk)
        record_fault("disk full (8 MiB tmpfs, 160 KiB left), then space freed", sent, written, rss.stop())


def _prlimit(pid: int, soft: int) -> None:
    """Set the process's soft descriptor limit (the hard one stays: raising it back needs no privilege)."""
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={soft}:"], check=True)


@pytest.mark.slow
def test_descriptor_exhaustion_keeps_the_episodes_and_recovers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    collector = start_collector(out, "--quiet-period", "1.0")
    pid = collector.process.pid
    rss = PeakRss(pid)
    sent = Sent()
    with httpx.Client() as client:  # one keep-alive connection, opened before the limit
        for index in range(20):
            task = f"emfile-{index}"
            body, spans = run_body(task)
            assert sent.post(client, collector.http_endpoint, task, body, spans) == 200
        # A soft limit of 3: the descriptors open stay usable, every new one fails (EMFILE), as when other
        # clients' connections took them all; the trace files cannot be opened.
        _prlimit(pid, 3)
        try:
            time.sleep(2.0)  # the quiet period passes; writing fails with EMFILE
            health = client.get(f"{collector.base_url}/healthz")
            assert health.status_code == 503 and "Too many open files" in health.text
            body, spans = run_body("emfile-refused")
            assert sent.post(client, collector.http_endpoint, "emfile-refused", body, spans) == 503
            assert not list(out.glob("traces-*.jsonl")), "nothing could be written"
        finally:
            _prlimit(pid, 1024)
        wait_healthy(collector)
    assert collector.stop() == 0
    written = assert_acked_written(sent, out)
    record_fault("descriptors exhausted (prlimit) at write time", sent, written, rss.stop())


@pytest.mark.slow
def test_failed_wal_rotation_keeps_serving_and_writing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    collector = start_collector(out, "--quiet-period", "0.2", "--wal-segment-mb", "0.001")
    wal = out / "wal"
    current = max(int(p.stem) for p in wal.glob("*.wal"))
    # New segments cannot be created: their names are taken (a read-only directory does not stop root).
    blockers = [wal / f"{current + n:010d}.wal" for n in range(1, 200)]
    for blocker in blockers:
        blocker.mkdir()
    sent = Sent()
    rss = PeakRss(collector.process.pid)
    with httpx.Client() as client:
        for index in range(20):
            task = f"rotate-{index}"
            body, spans = run_body(task)
            response = client.post(collector.http_endpoint, content=body, headers=PROTOBUF_HEADERS)
            assert response.status_code == 200, response.text
            ExportTraceServiceResponse().ParseFromString(response.content)  # a real answer, not WAL bytes
            sent.acked[task] = spans
            sent.sent += 1
        assert client.get(f"{collector.base_url}/healthz").status_code == 200
        for blocker in blockers:
            blocker.rmdir()
        body, spans = run_body("rotate-after")
        assert sent.post(client, collector.http_endpoint, "rotate-after", body, spans) == 200
    assert collector.stop() == 0, "SIGTERM after a failed rotation is a clean stop"
    restarted = start_collector(out, "--quiet-period", "0.2")
    assert restarted.stop() == 0
    written = assert_acked_written(sent, out)
    record_fault(
        "unwritable WAL directory: new segments cannot be created (rotation fails), then can",
        sent, written, rss.stop(),
    )


@pytest.mark.slow
def test_restart_then_late_span_merges_into_the_written_trace(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spans = record_run("late-after-restart", tools=3)
    body = encode_protobuf(spans)
    collector = start_collector(out, "--quiet-period", "0.2")
    assert httpx.post(collector.http_endpoint, content=body, headers=PROTOBUF_HEADERS).status_code == 200
    assert collector.stop() == 0
    (first,) = validate_trace_dir(out).values()
    assert first["metrics"]["revision"] == 0 and first["metrics"]["spans"] == len(spans)

    late = ExportTraceServiceRequest()
    late.ParseFromString(body)
    scope = late.resource_spans[0].scope_spans[0]
    child = next(s for s in scope.spans if s.parent_span_id)
    del scope.spans[:]
    scope.spans.append(child)
    scope.spans[0].span_id = bytes.fromhex("00000000000000ff")  # a new span of the same run
    restarted = start_collector(out, "--quiet-period", "0.2")
    rss = PeakRss(restarted.process.pid)
    response = httpx.post(restarted.http_endpoint, content=late.SerializeToString(), headers=PROTOBUF_HEADERS)
    assert response.status_code == 200
    assert restarted.stop() == 0
    peak = rss.stop()
    (latest,) = validate_trace_dir(out).values()
    assert latest["trace_id"] == first["trace_id"]
    assert latest["metrics"]["spans"] == len(spans) + 1, "the late span merged into the full trace"
    assert latest["metrics"]["revision"] == 1
    lines = (out / "traces-00000.jsonl").read_text().splitlines()
    assert '"revision":1' in lines[-1], "revision is written as an int"
    sent = Sent(sent=2, acked={"late-after-restart": len(spans) + 1})
    record_fault("restart, then a late span of a written trace", sent, latest["metrics"]["spans"], peak)


def _large_never_ending(index: int) -> tuple[bytes, dict[str, int]]:
    """One run without its root (it never ends), 4 x 256 KiB of attribute values: 1 MiB."""
    spans = [s for s in record_run(f"flood-{index}", tools=4) if s.parent is not None]
    for span in spans:
        span._attributes = {**span.attributes, "filler": "x" * (256 << 10)}  # type: ignore[attr-defined]
    return encode_protobuf(spans), {f"{spans[0].context.trace_id:032x}": len(spans)}


_SMALL_TEMPLATE: list[bytes] = []


def _small_never_ending(index: int) -> tuple[bytes, dict[str, int]]:
    """One run without its root: an agent's tool call and 150 small spans of other work (HTTP calls, 4
    attributes and an event each, 40 KiB in all): the most memory per byte received."""
    if not _SMALL_TEMPLATE:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("small")
        with tracer.start_as_current_span("root"):  # left out: the episode never ends
            spans = [s for s in record_run("small", tools=1) if s.parent is not None]
            for index_ in range(150):
                attrs = {"http.method": "GET", "http.url": f"http://svc/{index_}", "http.status_code": 200,
                         "net.peer.name": "svc"}
                with tracer.start_as_current_span("GET", attributes=attrs) as span:
                    span.add_event("sent", {"bytes": index_})
        provider.shutdown()
        spans += [s for s in memory.get_finished_spans() if s.parent is not None]
        _SMALL_TEMPLATE.append(encode_protobuf(spans))
    return with_new_trace_ids(_SMALL_TEMPLATE[0])


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["large", "small"])
def test_flood_of_never_ending_episodes_stays_under_the_memory_limit(tmp_path: Path, shape: str) -> None:
    out = tmp_path / "out"
    limit_mb = 96 if shape == "large" else 48  # the small spans' flood fills 48 MiB with 30,000 spans
    collector = start_collector(
        out, "--quiet-period", "0.2", "--memory-limit-mb", str(limit_mb), "--shutdown-timeout", "25"
    )
    idle_rss = PeakRss(collector.process.pid).after(0.3)
    rss = PeakRss(collector.process.pid)
    sent = Sent()
    stop = time.monotonic() + 6.0
    make = _large_never_ending if shape == "large" else _small_never_ending
    sample, sample_runs = make(0)  # recorded once before the clock matters
    per_run = resident_bytes(spans_from_export(sample), len(sample)) / len(sample_runs)

    def never_ending(worker: int) -> None:
        with httpx.Client() as client:
            index = 0
            while time.monotonic() < stop:
                body, runs = make(worker * 100_000 + index)
                index += 1
                sent.post_runs(client, collector.http_endpoint, body, runs)

    threads = [threading.Thread(target=never_ending, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    small_ok = 0
    with httpx.Client() as client:
        while time.monotonic() < stop:  # a small client is still answered (200, or 503 it can retry)
            task = f"small-{small_ok}"
            body, spans = run_body(task, tools=1)
            status = sent.post(client, collector.http_endpoint, task, body, spans)
            assert status in (200, 503)
            small_ok += status == 200
            time.sleep(0.2)
    for thread in threads:
        thread.join()
    peak = rss.stop()
    # The limit was reached: requests were refused, or the collector acknowledged more than the limit holds
    # (it wrote open episodes as they were to stay under it).
    assert sent.refused > 0 or per_run * len(sent.acked) > (limit_mb << 20), "the test proves nothing"
    assert small_ok > 0, "small requests must get through"
    assert_within_memory_limit(peak, idle_rss, limit_mb)
    assert collector.stop() == 0
    restarted = start_collector(out, "--quiet-period", "0.2")
    assert restarted.stop() == 0
    written = assert_acked_written(sent, out)
    what = "1 MiB runs of 4 large spans" if shape == "large" else "40 KiB runs of 150 small spans"
    record_fault(
        f"never-ending episodes: 4 senders of {what} for 6 s, --memory-limit-mb {limit_mb}",
        sent, written, peak, idle_rss=idle_rss, limit_mb=limit_mb,
    )


@pytest.mark.slow
def test_idle_and_half_sent_connections_are_closed_and_others_served(tmp_path: Path) -> None:
    out = tmp_path / "out"
    collector = start_collector(
        out,
        "--quiet-period",
        "0.2",
        "--header-timeout",
        "1",
        "--max-connections",
        "64",
        "--body-timeout",
        "1",
    )
    rss = PeakRss(collector.process.pid)
    slow_body = socket.create_connection(("127.0.0.1", collector.port))
    slow_body.sendall(
        b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: 1000\r\n\r\n12345"
    )
    hogs = []
    for index in range(100):
        sock = socket.create_connection(("127.0.0.1", collector.port))
        if index % 2:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
        hogs.append(sock)
    sent = Sent()
    deadline = time.monotonic() + 10
    with httpx.Client() as client:
        while not sent.acked and time.monotonic() < deadline:
            body, spans = run_body("served")
            sent.post(client, collector.http_endpoint, "served", body, spans)
            time.sleep(0.2)
    assert sent.acked, "a well-behaved client was not served"
    time.sleep(1.5)
    slow_body.settimeout(3)
    assert b"408" in slow_body.recv(1000), "a body that does not arrive gets 408"
    closed = 0
    for sock in hogs:
        sock.settimeout(3)
        try:
            closed += sock.recv(1) == b""
        except OSError:
            closed += 1
        sock.close()
    slow_body.close()
    assert closed == len(hogs), f"{len(hogs) - closed} idle connections still open"
    assert collector.stop() == 0
    written = assert_acked_written(sent, out)
    record_fault("100 idle / half-sent connections + a stalled body", sent, written, rss.stop())


@pytest.mark.slow
def test_kill_9_at_random_points_loses_no_acknowledged_span(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rng = random.Random(16)
    sent = Sent()
    peak = 0
    runs = iter(range(100_000))
    for _round in range(3):
        collector = start_collector(out, "--quiet-period", "0.3", "--wal-segment-mb", "0.05")
        rss = PeakRss(collector.process.pid)
        stop = threading.Event()

        def send(collector: RunningCollector = collector, stop: threading.Event = stop) -> None:
            with httpx.Client() as client:
                while not stop.is_set():
                    task = f"kill-{next(runs)}"
                    body, spans = run_body(task, tools=1 + len(task) % 3)
                    sent.post(client, collector.http_endpoint, task, body, spans)

        senders = [threading.Thread(target=send) for _ in range(3)]
        for thread in senders:
            thread.start()
        time.sleep(rng.uniform(0.5, 2.0))  # some written, some open, some in flight
        collector.kill()
        stop.set()
        for thread in senders:
            thread.join()
        peak = max(peak, rss.stop())
    final = start_collector(out, "--quiet-period", "0.2")
    assert final.stop() == 0
    assert len(sent.acked) > 30, "too little traffic to prove anything"
    written = assert_acked_written(sent, out)
    record_fault("kill -9 at 3 random points under 3 senders, restart each time", sent, written, peak)


@pytest.mark.slow
def test_many_large_bodies_at_once_are_refused_before_they_add_up(tmp_path: Path) -> None:
    out = tmp_path / "out"
    limit_mb = 64
    collector = start_collector(out, "--quiet-period", "0.2", "--memory-limit-mb", str(limit_mb))
    idle_rss = PeakRss(collector.process.pid).after(0.3)
    rss = PeakRss(collector.process.pid)
    sent = Sent()
    stop = time.monotonic() + 4.0
    filler = "y" * (1 << 20)

    def large(worker: int) -> None:
        with httpx.Client() as client:
            index = 0
            while time.monotonic() < stop:
                task = f"large-{worker}-{index}"
                index += 1
                spans = record_run(task, tools=3)
                for span in spans[1:]:
                    span._attributes = {**span.attributes, "filler": filler}  # type: ignore[attr-defined]
                sent.post(client, collector.http_endpoint, task, encode_protobuf(spans), len(spans))

    threads = [threading.Thread(target=large, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peak = rss.stop()
    assert sent.refused > 0, "the limit was never reached: the test proves nothing"
    assert_within_memory_limit(peak, idle_rss, limit_mb)
    assert collector.stop() == 0
    written = assert_acked_written(sent, out)
    record_fault(
        f"flood of large bodies: 6 senders of 4 MiB for 4 s, --memory-limit-mb {limit_mb}",
        sent, written, peak, idle_rss=idle_rss, limit_mb=limit_mb,
    )


def _stop_line(collector: RunningCollector) -> str:
    return [line for line in collector.log_text().splitlines() if "collector stopped" in line][-1]


@pytest.mark.slow
def test_forward_queue_survives_a_clean_stop_and_a_kill_9_with_the_target_down(tmp_path: Path) -> None:
    target_port = free_port()
    front = start_collector(
        tmp_path / "front", "--quiet-period", "0.2", "--forward", f"http://127.0.0.1:{target_port}"
    )
    sent = Sent()
    peak = 0
    for stop in ("clean", "kill -9"):
        rss = PeakRss(front.process.pid)
        with httpx.Client() as client:
            for index in range(4):
                task = f"fw-{stop}-{index}"
                body, spans = run_body(task)
                assert sent.post(client, front.http_endpoint, task, body, spans) == 200
        if stop == "clean":
            assert front.stop() == 0
            assert list((front.out / "forward").glob("*.fwd")), "the forward queue is kept on disk"
        else:
            front.kill()  # each batch was on disk before its 200
        peak = max(peak, rss.stop())
        front.start()  # the target is still down: the queue waits
    target = RunningCollector(
        out=tmp_path / "target",
        port=target_port,
        grpc_port=free_port(),
        log=tmp_path / "target.log",
        args=("--quiet-period", "0.2"),
    )
    (tmp_path / "target").mkdir()
    target.start()
    try:
        deadline = time.monotonic() + 60
        while len(latest_traces([target.out])) < len(sent.acked) and time.monotonic() < deadline:
            time.sleep(0.2)  # the front sends its kept queue first, once the target is up
        assert front.stop() == 0
    finally:
        assert target.stop() == 0
    # Nothing reached the target before, so each batch went exactly once; in general delivery is at least
    # once (a batch sent just before a kill, whose done marker the kill cut off, goes again).
    assert "forwarded 8, dropped 0, rejected 0" in _stop_line(front)
    written = assert_acked_written(sent, target.out)
    assert_acked_written(sent, front.out)
    record_fault("forward target down across a clean stop and a kill -9, then up", sent, written, peak)


def test_torn_wal_records_are_skipped_and_replay_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sent = Sent()
    collector = start_collector(out, "--quiet-period", "30")  # nothing written before the kill
    rss = PeakRss(collector.process.pid)
    with httpx.Client() as client:
        for index in range(10):
            body, spans = run_body(f"torn-{index}")
            assert sent.post(client, collector.http_endpoint, f"torn-{index}", body, spans) == 200
    collector.kill()
    peak = rss.stop()
    # What a crash (or a full disk whose cut-back failed) leaves: half a record in the middle of the live
    # segment, between acknowledged ones, and another at its end. Neither was acknowledged.
    (segment,) = [p for p in (out / "wal").glob("*.wal") if p.stat().st_size]
    data = segment.read_bytes()
    torn = frame(KIND_BATCH, run_body("never-acknowledged")[0])
    middle = data.index(MAGIC, len(data) // 2)  # a record boundary
    segment.write_bytes(data[:middle] + torn[: len(torn) // 2] + data[middle:] + torn[:-5])
    restarted = start_collector(out, "--quiet-period", "0.2")
    rss = PeakRss(restarted.process.pid)
    with httpx.Client() as client:
        for index in range(10, 15):
            body, spans = run_body(f"torn-{index}")
            assert sent.post(client, restarted.http_endpoint, f"torn-{index}", body, spans) == 200
    assert restarted.stop() == 0
    assert "torn or corrupt record" in restarted.log_text()
    peak = max(peak, rss.stop())
    written = assert_acked_written(sent, out)
    assert "never-acknowledged" not in {t["task_id"] for t in latest_traces([out]).values()}
    record_fault(
        "torn WAL records (half a record mid-segment and at the end) after kill -9", sent, written, peak
    )


def test_shutdown_timeout_leaves_what_is_open_in_the_wal(tmp_path: Path) -> None:
    out = tmp_path / "out"
    collector = start_collector(out, "--quiet-period", "30", "--shutdown-timeout", "0")
    rss = PeakRss(collector.process.pid)
    sent = Sent()
    with httpx.Client() as client:
        for index in range(20):  # complete, but within their quiet period at the stop
            body, spans = run_body(f"open-at-stop-{index}")
            assert sent.post(client, collector.http_endpoint, f"open-at-stop-{index}", body, spans) == 200
    assert collector.stop() == 0
    peak = rss.stop()
    assert "20 episodes left in the write-ahead log for the next start" in _stop_line(collector)
    assert not list(out.glob("traces-*.jsonl")), "nothing written within a 0 s timeout"
    restarted = start_collector(out, "--quiet-period", "0.2")
    assert restarted.stop() == 0
    written = assert_acked_written(sent, out)
    record_fault("SIGTERM with --shutdown-timeout 0 and 20 open episodes, then restart", sent, written, peak)


def _written_lines(out: Path) -> dict[str, int]:
    """How many lines (revisions and fragments) each task has in the written traces."""
    lines: dict[str, int] = {}
    for _, _, trace in iter_jsonl(jsonl_files([out])):
        lines[trace["task_id"]] = lines.get(trace["task_id"], 0) + 1
    return lines


def _killed_once_written(
    collector: RunningCollector, rss: PeakRss, out: Path, episodes: int
) -> tuple[int, Path]:
    """kill -9 the collector once ``episodes`` traces are written (and their WRITTEN markers logged): its peak
    RSS and the one WAL segment holding what it logged."""
    deadline = time.monotonic() + 30
    while len(latest_traces([out])) < episodes and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the last WRITTEN markers follow the writes
    collector.kill()
    peak = rss.stop()
    (segment,) = [p for p in (out / "wal").glob("*.wal") if p.stat().st_size]
    return peak, segment


def _assert_each_written_once(sent: Sent, out: Path, tasks: Collection[str]) -> int:
    """Every acknowledged span written, no episode back as a fragment nor written twice."""
    written = assert_acked_written(sent, out)
    assert not [t for t in latest_traces([out]) if ".late" in t], "a written episode came back as a fragment"
    assert _written_lines(out) == dict.fromkeys(tasks, 1), "an episode written twice"
    return written


def test_a_torn_log_tail_and_identical_resends_write_each_episode_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sent = Sent()
    collector = start_collector(out, "--quiet-period", "0.1")
    rss = PeakRss(collector.process.pid)
    bodies = {f"once-{index}": run_body(f"once-{index}") for index in range(12)}
    with httpx.Client() as client:
        for task, (body, spans) in bodies.items():
            assert sent.post(client, collector.http_endpoint, task, body, spans) == 200
    peak, segment = _killed_once_written(collector, rss, out, len(bodies))
    # A crash that cut the log's tail: the WRITTEN markers of the last writes are gone (written.idx is not).
    segment.write_bytes(segment.read_bytes()[:-300])
    restarted = start_collector(out, "--quiet-period", "0.1")
    rss = PeakRss(restarted.process.pid)
    body, spans = bodies["once-0"]
    with httpx.Client() as client:
        for _ in range(30):  # a client that sends everything again, again and again
            assert sent.post(client, restarted.http_endpoint, "once-0", body, spans) == 200
            time.sleep(0.02)
    assert restarted.stop() == 0
    peak = max(peak, rss.stop())
    written = _assert_each_written_once(sent, out, bodies)
    record_fault("kill -9, 300 bytes cut off the WAL, then 30 identical re-sends", sent, written, peak)


def test_a_wal_segment_cut_in_half_writes_no_episode_again(tmp_path: Path) -> None:
    """Each run sent in two batches (its children, later its root): a crash that cut the log in half keeps
    some runs' children but not their roots nor the WRITTEN markers. ``written.idx`` holds those runs
    complete: replay must not write what is left of them as fragments."""
    out = tmp_path / "out"
    sent = Sent()
    collector = start_collector(out, "--quiet-period", "0.1")
    rss = PeakRss(collector.process.pid)
    runs = {f"half-{index}": record_run(f"half-{index}") for index in range(12)}
    with httpx.Client() as client:
        for spans in runs.values():  # the children first (the root ends last)
            body = encode_protobuf([s for s in spans if s.parent is not None])
            assert sent.post_runs(client, collector.http_endpoint, body, {}) == 200
        for task, spans in runs.items():
            body = encode_protobuf([s for s in spans if s.parent is None])
            assert sent.post(client, collector.http_endpoint, task, body, len(spans)) == 200
    peak, segment = _killed_once_written(collector, rss, out, len(runs))
    data = segment.read_bytes()[: segment.stat().st_size // 2]
    segment.write_bytes(data)
    left: dict[str, int] = {}
    for _, kind, payload in records_at(data):
        if kind == KIND_BATCH:
            for span in spans_from_export(payload):
                left[span.trace_id] = left.get(span.trace_id, 0) + 1
    assert any(0 < n < 4 for n in left.values()), "no run is cut short by the cut: the test proves nothing"
    restarted = start_collector(out, "--quiet-period", "0.1")
    rss = PeakRss(restarted.process.pid)
    assert restarted.stop() == 0
    peak = max(peak, rss.stop())
    written = _assert_each_written_once(sent, out, runs)
    record_fault(
        "kill -9, a WAL segment cut in half (runs in two batches: fewer spans replayed than written)",
        sent, written, peak,
    )

def test_refusals_are_read_by_clients_that_write_first_and_small_senders_are_served(tmp_path: Path) -> None:
    """``requests`` (what the OTel HTTP exporter posts with) writes the whole body before it reads the answer:
    every refusal must reach it, not a reset connection; and senders of large bodies must not starve a
    sender of small ones (the limit keeps a quarter for small requests)."""
    import requests

    out = tmp_path / "out"
    limit_mb = 64
    collector = start_collector(out, "--quiet-period", "0.2", "--memory-limit-mb", str(limit_mb))
    idle_rss = PeakRss(collector.process.pid).after(0.3)
    rss = PeakRss(collector.process.pid)
    sent = Sent()
    stop = time.monotonic() + 4.0
    filler = "z" * (1 << 20)
    outcomes: dict[str, list[int]] = {"large": [], "small": []}  # status codes; 0: the connection failed

    def post(kind: str, task: str, body: bytes, spans: int) -> None:
        with sent.lock:
            sent.sent += 1
        try:
            response = requests.post(collector.http_endpoint, data=body, headers=PROTOBUF_HEADERS, timeout=30)
        except requests.ConnectionError:
            outcomes[kind].append(0)
            return
        outcomes[kind].append(response.status_code)
        with sent.lock:
            if response.status_code == 200:
                sent.acked[task] = spans
            elif response.status_code == 503:
                assert response.headers.get("Retry-After"), "503 without Retry-After"
                sent.refused += 1

    def large(worker: int) -> None:
        index = 0
        while time.monotonic() < stop:
            task = f"big-{worker}-{index}"
            index += 1
            spans = record_run(task, tools=3)
            for span in spans[1:]:
                span._attributes = {**span.attributes, "filler": filler}  # type: ignore[attr-defined]
            post("large", task, encode_protobuf(spans), len(spans))

    def small() -> None:
        index = 0
        while time.monotonic() < stop:
            task = f"small-{index}"
            index += 1
            body, spans = run_body(task)
            post("small", task, body, spans)
            time.sleep(0.02)

    threads = [threading.Thread(target=large, args=(w,)) for w in range(5)] + [threading.Thread(target=small)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peak = rss.stop()
    assert outcomes["large"].count(503) > 0, "the limit was never reached: the test proves nothing"
    assert 0 not in outcomes["large"] + outcomes["small"], "a refusal the client never read (reset)"
    served = outcomes["small"].count(200) / len(outcomes["small"])
    assert served >= 0.9, f"the small sender was starved: {outcomes['small'].count(503)} refusals"
    assert_within_memory_limit(peak, idle_rss, limit_mb)
    assert collector.stop() == 0
    written = assert_acked_written(sent, out)
    record_fault(
        f"5 senders of 4 MiB bodies (requests: body first) and a small one, --memory-limit-mb {limit_mb}",
        sent, written, peak, idle_rss=idle_rss, limit_mb=limit_mb,
    )


def test_a_body_refused_for_its_size_is_read_before_the_answer(tmp_path: Path) -> None:
    """A client that writes a whole body larger than the socket buffers before reading (what ``requests``
    and the OTel HTTP exporter do) gets the 413, not a reset: the server reads and discards the refused
    body (uvicorn's HTTP/1.1 protocol does, without holding it) before it answers and reuses the
    connection."""
    collector = start_collector(tmp_path / "out", "--max-body-mb", "1")
    size = 24 << 20  # far above loopback's socket buffers: a server that stopped reading would block us
    head = (
        f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", collector.port), timeout=30) as sock:
        for _ in range(2):  # the second on the same connection: it was kept, the body fully consumed
            sock.sendall(head)
            sock.sendall(bytes(size))
            answer = sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 413"), answer[:80]
    assert collector.stop() == 0


@pytest.mark.slow
def test_a_flood_of_large_grpc_requests_stays_under_the_memory_limit(tmp_path: Path) -> None:
    import grpc

    out = tmp_path / "out"
    limit_mb = 100
    collector = start_collector(out, "--quiet-period", "0.2", "--memory-limit-mb", str(limit_mb))
    idle_rss = PeakRss(collector.process.pid).after(0.3)
    rss = PeakRss(collector.process.pid)
    sent = Sent()
    stop = time.monotonic() + 5.0
    filler = "g" * (3 << 20)
    codes: list[grpc.StatusCode] = []

    def sender(worker: int) -> None:
        channel = grpc.insecure_channel(
            collector.grpc_endpoint, options=[("grpc.max_send_message_length", 64 << 20)]
        )
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        index = 0
        while time.monotonic() < stop:
            task = f"grpc-{worker}-{index}"
            index += 1
            spans = record_run(task, tools=3)
            for span in spans[1:]:
                span._attributes = {**span.attributes, "filler": filler}  # type: ignore[attr-defined]
            with sent.lock:
                sent.sent += 1
            try:
                export(encode_protobuf(spans), timeout=30)
            except grpc.RpcError as error:
                codes.append(error.code())
                continue
            with sent.lock:
                sent.acked[task] = len(spans)
        channel.close()

    threads = [threading.Thread(target=sender, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peak = rss.stop()
    sent.refused = len(codes)
    assert codes, "the limit was never reached: the test proves nothing"
    assert set(codes) == {grpc.StatusCode.RESOURCE_EXHAUSTED}, "a memory refusal is RESOURCE_EXHAUSTED"
    assert_within_memory_limit(peak, idle_rss, limit_mb)
    assert collector.stop() == 0
    written = assert_acked_written(sent, out)
    record_fault(
        f"gRPC flood: 6 senders of 12 MiB requests for 5 s, --memory-limit-mb {limit_mb}",
        sent, written, peak, idle_rss=idle_rss, limit_mb=limit_mb,
    )


def test_a_wal_cap_below_the_segment_size_is_honoured(tmp_path: Path) -> None:
    out = tmp_path / "out"
    collector = start_collector(out, "--quiet-period", "30", "--wal-max-mb", "1")  # segments of 64 MiB
    sent = Sent()
    with httpx.Client() as client:
        for index in range(30):  # ~4 MiB logged by episodes kept open: the log compacts within its cap
            body, spans = run_body(f"capped-{index}", tools=40)
            assert sent.post(client, collector.http_endpoint, f"capped-{index}", body, spans) == 200
            time.sleep(0.12)  # ticks: compaction runs one segment a tick
    segments = sorted((out / "wal").glob("*.wal"))
    assert len(segments) > 1 and max(p.stat().st_size for p in segments) <= (1 << 20) // 4 + (64 << 10)
    assert sum(p.stat().st_size for p in segments) <= 2 << 20, "the log stays near its 1 MiB cap"
    assert collector.stop() == 0
    assert_acked_written(sent, out)


def _parts_of(out: Path, trace_id: str) -> dict[str, dict[str, Any]]:
    """The written lines (last revisions) of ``trace_id`` and of its ``.late<n>`` fragments, by id."""
    return {
        key: trace
        for key, trace in latest_traces([out]).items()
        if key == trace_id or key.startswith(f"{trace_id}.late")
    }


@pytest.mark.slow
def test_one_trace_of_100000_spans_is_written_within_the_memory_limit(tmp_path: Path) -> None:
    """One trace too large to convert whole within the limit (about 5 KiB a span while it is converted): it
    is written in parts as its spans arrive, each within the limit and ``--max-trace-mb``, every span in
    one part."""
    out = tmp_path / "out"
    limit_mb, spans_total, batch = 200, 100_000, 5_000
    spans = trace_spans(0, spans_total, content=400)  # model calls carry their messages; root last
    trace_id = spans[-1].trace_id.hex()
    bodies = [r.SerializeToString() for r in requests([spans], batch=batch)]
    del spans
    collector = start_collector(out, "--quiet-period", "0.5", "--memory-limit-mb", str(limit_mb))
    idle_rss = PeakRss(collector.process.pid).after(0.3)
    rss = PeakRss(collector.process.pid)
    sent = Sent()
    with httpx.Client() as client:
        for body in bodies:
            while (status := sent.post_runs(client, collector.http_endpoint, body, {})) != 200:
                assert status == 503
                time.sleep(0.2)
    deadline = time.monotonic() + 120
    while sum(t["metrics"]["spans"] for t in _parts_of(out, trace_id).values()) < spans_total:
        assert time.monotonic() < deadline, "the trace was not written within 2 minutes of its last span"
        time.sleep(1)
    peak = rss.stop()
    assert collector.stop() == 0
    sent.acked[trace_id] = spans_total
    parts = _parts_of(out, trace_id)
    validate_trace_dir(out)
    assert len(parts) > 1, "converted whole: over the limit"
    assert sum(t["metrics"]["spans"] for t in parts.values()) == spans_total, "a span written twice"
    assert sum(1 for _, _, t in iter_jsonl(jsonl_files([out]))) == len(parts), "a part written twice"
    largest = max(len(line) for p in out.glob("*.jsonl") for line in p.read_bytes().splitlines())
    assert largest <= 64 << 20, "--max-trace-mb (64) holds"
    growth = (peak - idle_rss) / (limit_mb << 20)
    assert growth <= 1.5, f"RSS grew {growth:.2f} x the limit over idle"
    record_fault(
        f"one trace of {spans_total:,} spans ({sum(map(len, bodies)) >> 20} MiB) in requests of {batch:,} "
        f"spans, --memory-limit-mb {limit_mb}: written in {len(parts)} parts (the trace and its fragments), "
        f"{largest >> 20} MiB largest line",
        sent, spans_total, peak, idle_rss=idle_rss, limit_mb=limit_mb,
    )
