"""``--forward``: a second collector receives every batch, byte for byte."""

from __future__ import annotations

import gzip
import json
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
