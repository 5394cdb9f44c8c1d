"""``--forward``: a second collector receives every batch, byte for byte."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import httpx
from collector_fixtures import (
    RunningCollector,
    encode_otlp_json,
    encode_protobuf,
    free_port,
    record_run,
    start_collector,
    validate_trace_dir,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from orchestrace_collector.forward import Forwarder


def test_forward_to_a_second_collector(tmp_path: Path) -> None:
    target = start_collector(tmp_path / "target", "--quiet-period", "0.2")
    front = start_collector(tmp_path / "front", "--quiet-period", "0.2", "--forward", target.base_url)
    try:
        runs = {
            "fw-protobuf": record_run("fw-protobuf"),
            "fw-json": record_run("fw-json", tools=3),
            "fw-grpc": record_run("fw-grpc", tools=1),
        }
        assert (
            httpx.post(
                front.http_endpoint,
                content=gzip.compress(encode_protobuf(runs["fw-protobuf"])),
                headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
            ).status_code
            == 200
        )
        assert (
            httpx.post(
                front.http_endpoint,
                content=json.dumps(encode_otlp_json(runs["fw-json"])),
                headers={"Content-Type": "application/json"},
            ).status_code
            == 200
        )
        exporter = OTLPSpanExporter(endpoint=front.grpc_endpoint, insecure=True)
        assert exporter.export(runs["fw-grpc"]) == SpanExportResult.SUCCESS
        assert front.stop() == 0  # flushes the forward queue before exiting
    finally:
        front.stop()
        assert target.stop() == 0
    front_traces = {t["task_id"]: t for t in validate_trace_dir(front.out).values()}
    target_traces = {t["task_id"]: t for t in validate_trace_dir(target.out).values()}
    for task, spans in runs.items():
        assert front_traces[task]["metrics"]["spans"] == target_traces[task]["metrics"]["spans"] == len(spans)
        assert front_traces[task]["events"] == target_traces[task]["events"]


def test_target_down_drops_oldest_and_never_blocks() -> None:
    forwarder = Forwarder("http://127.0.0.1:9", max_queued=3, backoff_s=0.05)  # port 9: nothing listens
    for index in range(10):
        forwarder.submit(f"batch-{index}".encode(), "application/x-protobuf")
    assert forwarder.dropped == 7 and forwarder.queued <= 3 and forwarder.sent == 0
    forwarder.close(timeout_s=0.2)


def test_batches_wait_for_a_target_that_comes_up_later(tmp_path: Path) -> None:
    port = free_port()
    forwarder = Forwarder(f"http://127.0.0.1:{port}", backoff_s=0.05, max_backoff_s=0.5)
    spans = record_run("fw-late-target")
    forwarder.submit(encode_protobuf(spans), "application/x-protobuf")
    target = RunningCollector(
        out=tmp_path / "late", port=port, grpc_port=free_port(), log=tmp_path / "late.log"
    )
    (tmp_path / "late").mkdir()
    target.start()
    try:
        forwarder.close(timeout_s=60)  # waits until the queue is sent (or 60 s)
        assert forwarder.sent == 1 and forwarder.dropped == 0
    finally:
        assert target.stop() == 0
    (trace,) = validate_trace_dir(target.out).values()
    assert trace["task_id"] == "fw-late-target" and trace["metrics"]["spans"] == len(spans)


def test_retry_after_is_honoured_while_batches_keep_coming() -> None:
    import http.server
    import threading
    import time

    attempts: list[float] = []

    class Busy(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            attempts.append(time.monotonic())
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(503)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    forwarder = Forwarder(
        f"http://127.0.0.1:{server.server_address[1]}", backoff_s=0.01, max_queued_bytes=100
    )
    try:
        started = time.monotonic()
        while time.monotonic() - started < 2.5:
            forwarder.submit(b"0123456789" * 3, "application/x-protobuf")  # traffic keeps flowing
            time.sleep(0.01)
        assert 2 <= len(attempts) <= 4, f"{len(attempts)} attempts in 2.5 s against Retry-After: 1"
        assert forwarder.dropped > 0 and forwarder.queued * 30 <= 100, "bounded in bytes, drops counted"
    finally:
        forwarder.close(timeout_s=0)
        server.shutdown()


def _target(answer: Callable[[], tuple[int, dict[str, str], bytes]]) -> tuple[object, str, list[float]]:
    """A real HTTP target on loopback whose every POST gets ``answer()``; returns it, its URL and the
    times of the posts."""
    import http.server
    import threading
    import time

    posts: list[float] = []

    class Target(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posts.append(time.monotonic())
            self.rfile.read(int(self.headers["Content-Length"]))
            status, headers, body = answer()
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Target)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}", posts


def test_a_retry_after_date_is_honoured() -> None:
    import time
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    answers = iter([503, 200])

    def answer() -> tuple[int, dict[str, str], bytes]:
        status = next(answers, 200)
        later = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
        return status, {"Retry-After": later} if status == 503 else {}, b""

    server, url, posts = _target(answer)
    forwarder = Forwarder(url, backoff_s=0.01)
    try:
        forwarder.submit(b"batch", "application/x-protobuf")
        deadline = time.monotonic() + 10
        while forwarder.sent < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert forwarder.sent == 1 and len(posts) == 2
        assert posts[1] - posts[0] >= 1.0, "waited for the date (to the second), not its own 10 ms backoff"
    finally:
        forwarder.close(timeout_s=0)
        server.shutdown()  # type: ignore[attr-defined]


def test_partial_success_drops_and_the_counts_survive_a_restart(tmp_path: Path) -> None:
    import time

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTracePartialSuccess,
        ExportTraceServiceResponse,
    )

    partial = ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(rejected_spans=3, error_message="invalid span ids")
    ).SerializeToString()
    server, url, _ = _target(lambda: (200, {"Content-Type": "application/x-protobuf"}, partial))
    forwarder = Forwarder(url, state_dir=tmp_path / "fwd")
    try:
        forwarder.submit(b"batch", "application/x-protobuf")
        deadline = time.monotonic() + 10
        while forwarder.sent < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert forwarder.rejected_spans == 3
    finally:
        forwarder.close(timeout_s=1)
        server.shutdown()  # type: ignore[attr-defined]
    down = Forwarder("http://127.0.0.1:9", max_queued=2, backoff_s=0.05, state_dir=tmp_path / "fwd")
    for index in range(5):
        down.submit(f"batch-{index}".encode(), "application/x-protobuf")
    assert down.dropped == 3 and down.rejected_spans == 3
    # What a kill -9 leaves: no close; the markers already on disk hold the counts.
    restarted = Forwarder("http://127.0.0.1:9", max_queued=2, backoff_s=0.05, state_dir=tmp_path / "fwd")
    try:
        assert (restarted.dropped, restarted.rejected_spans, restarted.queued) == (3, 3, 2)
    finally:
        restarted.close(timeout_s=0)
        down.close(timeout_s=0)


def test_the_queue_on_disk_keeps_to_its_cap(tmp_path: Path) -> None:
    cap = 256 << 10
    queue = tmp_path / "q"
    forwarder = Forwarder("http://127.0.0.1:9", max_queued_bytes=cap, backoff_s=0.05, state_dir=queue)
    try:
        for index in range(100):  # 5 MiB while the target is down
            forwarder.submit(bytes([index]) * (50 << 10), "application/x-protobuf")
        on_disk = sum(p.stat().st_size for p in queue.iterdir())
        assert forwarder.dropped > 90 and on_disk <= 2 * cap, f"{on_disk} bytes on disk for a {cap} cap"
    finally:
        forwarder.close(timeout_s=0)
