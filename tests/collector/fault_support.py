"""Helpers of the fault suite: senders that remember what was acknowledged, a peak-RSS sampler, a small tmpfs,
and the fault table (``FAULT_TABLE=path`` appends one JSON row per fault test)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest
from collector_fixtures import RunningCollector, encode_protobuf, record_run, validate_trace_dir
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROTOBUF_HEADERS = {"Content-Type": "application/x-protobuf"}


@dataclass
class Sent:
    """Runs sent, by task id, and the span counts of those acknowledged with 200."""

    sent: int = 0
    acked: dict[str, int] = field(default_factory=dict)
    refused: int = 0  # 503 (with Retry-After)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def acked_spans(self) -> int:
        return sum(self.acked.values())

    def post(self, client: httpx.Client, url: str, task: str, body: bytes, spans: int) -> int:
        return self.post_runs(client, url, body, {task: spans})

    def post_runs(self, client: httpx.Client, url: str, body: bytes, runs: dict[str, int]) -> int:
        """Post a body holding several runs (their span counts by task id, or trace id without a root)."""
        with self.lock:
            self.sent += 1
        try:
            response = client.post(url, content=body, headers=PROTOBUF_HEADERS, timeout=30)
        except httpx.HTTPError:
            return 0
        with self.lock:
            if response.status_code == 200:
                self.acked.update(runs)
            elif response.status_code == 503:
                assert response.headers.get("Retry-After"), "503 without Retry-After"
                self.refused += 1
        return response.status_code


def run_body(task: str, tools: int = 2) -> tuple[bytes, int]:
    spans = record_run(task, tools=tools)
    return encode_protobuf(spans), len(spans)


def with_new_trace_ids(body: bytes) -> tuple[bytes, dict[str, int]]:
    """``body`` (an OTLP request) with every trace given a new random id: new episodes of the same shape,
    without recording them again. Returns the body and its span count by new trace id."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    new_ids: dict[bytes, bytes] = {}
    runs: dict[str, int] = {}
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                span.trace_id = new_ids.setdefault(span.trace_id, os.urandom(16))
                runs[span.trace_id.hex()] = runs.get(span.trace_id.hex(), 0) + 1
    return request.SerializeToString(), runs


def assert_acked_written(sent: Sent, out: Path) -> int:
    """Every acknowledged run (keyed by task id, or by trace id for runs without their root span) is in a
    written (valid) trace with all its spans. Returns the spans written."""
    written: dict[str, int] = {}
    for trace in validate_trace_dir(out).values():
        for key in (trace["task_id"], trace["trace_id"]):
            written[key] = max(written.get(key, 0), int(trace["metrics"]["spans"]))
    missing = {task: n for task, n in sent.acked.items() if written.get(task, 0) < n}
    assert not missing, f"{len(missing)} acknowledged runs lost: {sorted(missing)[:10]}"
    return sum(written.get(task, 0) for task in sent.acked)


class PeakRss:
    """Samples a process's resident set every 20 ms (the collector's peak memory under a fault)."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except psutil.Error:
                return

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak

    def after(self, seconds: float) -> int:
        """The peak over the next ``seconds`` (an idle baseline)."""
        time.sleep(seconds)
        return self.stop()


#: What the README states: the collector's resident set grows at most this many times ``--memory-limit-mb``
#: over its idle size. Tests allow a margin on top (peaks vary with the allocator and the machine's load).
RSS_PER_LIMIT = 1.5
RSS_MARGIN = 1.5


def assert_within_memory_limit(peak: int, idle: int, limit_mb: int) -> None:
    growth = peak - idle
    assert growth < RSS_PER_LIMIT * RSS_MARGIN * (limit_mb << 20), (
        f"RSS grew {growth >> 20} MiB over idle: {growth / (limit_mb << 20):.2f} x the limit ({limit_mb} MiB)"
    )


def record_fault(
    fault: str, sent: Sent, written_spans: int, peak_rss: int, *, idle_rss: int = 0, limit_mb: int = 0
) -> None:
    """One row of the fault table (only when ``FAULT_TABLE`` names a file)."""
    path = os.environ.get("FAULT_TABLE")
    if not path:
        return
    row = {
        "fault": fault,
        "sent": sent.sent,
        "acknowledged": len(sent.acked),
        "acknowledged_spans": sent.acked_spans,
        "refused_503": sent.refused,
        "written_spans_of_acknowledged": written_spans,
        "peak_rss_mib": round(peak_rss / (1 << 20), 1),
        "idle_rss_mib": round(idle_rss / (1 << 20), 1),
        "memory_limit_mb": limit_mb,
    }
    with open(path, "a", encoding="utf-8") as table:
        table.write(json.dumps(row) + "\n")


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (skips the test when mounting is refused)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, leave_bytes: int) -> Path:
    """Fill the filesystem of ``path`` with a ballast file, leaving about ``leave_bytes`` free."""
    ballast = path / "ballast"
    free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
    with ballast.open("wb") as handle:
        handle.truncate(0)
        handle.write(b"\0" * max(0, free - leave_bytes))
    return ballast


def wait_healthy(collector: RunningCollector, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if httpx.get(f"{collector.base_url}/healthz", timeout=2).status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError("the collector did not recover by itself")
