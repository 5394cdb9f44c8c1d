"""Growth: time and memory to decode and convert one trace, from 10 to 100,000 spans.

For each size: the median wall time of ``decode`` (OTLP protobuf bytes -> spans) and of ``convert_episode``
(spans -> trace, turns), and the peak memory ``convert_episode`` allocates (tracemalloc, in a separate run so
tracing does not slow the timed ones). Linearity is the slope of log(time) against log(spans) fitted over the
sizes from 1,000 up (1.0 is linear; below 1,000 spans fixed costs dominate); plotted to ``scaling.png``.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.spangen import encoded_requests
from bench.timing import median

SLOPE_FROM = 1_000


@dataclass(frozen=True)
class Sizes:
    spans: tuple[int, ...]
    min_seconds: float  # repeat each size until this much time was spent (at least 3 runs, at most 50)


QUICK = Sizes(spans=(10, 100, 1_000), min_seconds=0.0)
FULL = Sizes(spans=(10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000), min_seconds=3.0)


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) over log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def _repeat(fn: Any, min_seconds: float) -> float:
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (spent < min_seconds and len(times) < 50):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return median(times)


def measure(n: int, min_seconds: float) -> dict[str, float]:
    from orchestrace_collector.convert import convert_episode
    from orchestrace_collector.decode import decode_bytes

    payloads = encoded_requests([0], n)
    spans = [s for p in payloads for s in decode_bytes(p)]
    decode_s = _repeat(lambda: [decode_bytes(p) for p in payloads], min_seconds)
    convert_s = _repeat(lambda: convert_episode(spans), min_seconds)
    tracemalloc.start()
    convert_episode(spans)
    _, convert_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    held = [s for p in payloads for s in decode_bytes(p)]
    spans_bytes, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del held
    return {
        "spans": n,
        "decode_s": decode_s,
        "convert_s": convert_s,
        "convert_us_per_span": convert_s / n * 1e6,
        "convert_peak_mb": convert_peak / 2**20,
        "decoded_spans_mb": spans_bytes / 2**20,
    }


def plot(points: list[dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p["spans"] for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.loglog(xs, [p["convert_s"] for p in points], "o-", label="convert_episode")
    left.loglog(xs, [p["decode_s"] for p in points], "s-", label="decode (OTLP protobuf)")
    ref = points[-1]["convert_s"] / xs[-1]
    left.loglog(xs, [ref * x for x in xs], ":", color="grey", label="linear (through the largest)")
    left.set_xlabel("spans in the trace")
    left.set_ylabel("seconds")
    left.set_title("time per trace")
    left.legend()
    right.loglog(xs, [p["convert_peak_mb"] for p in points], "o-", label="convert_episode peak")
    right.loglog(xs, [p["decoded_spans_mb"] for p in points], "s-", label="decoded spans held")
    right.set_xlabel("spans in the trace")
    right.set_ylabel("MiB")
    right.set_title("memory per trace")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    points = [measure(n, sizes.min_seconds) for n in sizes.spans]
    fitted = [p for p in points if p["spans"] >= SLOPE_FROM] if not quick else points
    plot(points, out / "scaling.png")
    return {
        "sizes": {"spans": list(sizes.spans), "min_seconds": sizes.min_seconds},
        "points": points,
        "slope_from_spans": fitted[0]["spans"],
        "convert_time_loglog_slope": loglog_slope(
            [p["spans"] for p in fitted], [p["convert_s"] for p in fitted]
        ),
        "decode_time_loglog_slope": loglog_slope(
            [p["spans"] for p in fitted], [p["decode_s"] for p in fitted]
        ),
        "convert_memory_loglog_slope": loglog_slope(
            [p["spans"] for p in fitted], [p["convert_peak_mb"] for p in fitted]
        ),
        "plot": "scaling.png",
    }
