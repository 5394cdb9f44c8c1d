"""Timing and memory primitives for the benchmarks: medians of repeated runs, peak RSS, a fast exporter."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence

import psutil
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class CountingExporter(SpanExporter):
    """Keeps the spans of the current run and nothing else, so the exporter costs a list append.

    Real exporters (OTLP over HTTP, files) cost the same for every instrumentation per byte; leaving them out
    measures what the instrumentation itself adds in the application thread.
    """

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def clear(self) -> None:
        self.spans.clear()


def time_calls(fn: Callable[[], object], calls: int) -> float:
    """Microseconds per call of ``fn`` over one batch of ``calls`` back-to-back calls."""
    gc.collect()
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls / 1000


def alternate(variants: dict[str, Callable[[], object]], rounds: int, calls: int) -> dict[str, list[float]]:
    """Batches of every variant, interleaved round by round (order rotated) so drift hits them all alike."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(time_calls(variants[name], calls))
    return samples


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def rss_mb(pid: int | None = None) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def peak_rss_mb(pid: int | None = None) -> float:
    """High-water mark of the process's resident set (Linux VmHWM), in MiB."""
    with open(f"/proc/{pid or 'self'}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return rss_mb(pid)
