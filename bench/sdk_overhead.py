"""SDK: ``@ot.agent`` / ``@ot.tool`` against the bare function and against a raw OTel span with the same
attributes.

All spanned variants share one TracerProvider whose only processor is a SimpleSpanProcessor into an in-memory
list (``CountingExporter``), so the exporter costs the same small amount for each and is not what is measured.
The raw baseline copies the name and attributes of a span the decorator produced, so both spans carry the same
data.
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from bench.instructions import available, count, counted
from bench.profiling import profile
from bench.timing import CountingExporter, alternate, median

#: Decorator cost allowed, as a multiple of the raw span's.
TARGET_RATIO = 1.25


@dataclass(frozen=True)
class Sizes:
    rounds: int
    calls: int
    profile_calls: int
    #: Calls of each variant counted under callgrind (the count per call does not vary between runs).
    counted_calls: int


QUICK = Sizes(rounds=3, calls=200, profile_calls=500, counted_calls=20)
FULL = Sizes(rounds=101, calls=1000, profile_calls=50_000, counted_calls=2000)
KINDS = ("agent", "tool")
#: Calls of each variant before its instructions are counted.
_WARMUP = 300
_EMPTY = "empty"


def find_flights(city: str) -> str:
    """The user's function: trivial, so the per-call figures are the instrumentation's own cost."""
    return city.upper()


def _setup() -> tuple[CountingExporter, trace.Tracer]:
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    import orchestrace as ot

    # The app's provider is already set: configure adds orchestrace to it and exports nothing more.
    ot.configure(service_name="bench", exporter="none")
    return exporter, provider.get_tracer("bench.raw")


def _raw_twin(
    decorated: Callable[[str], str], exporter: CountingExporter, tracer: trace.Tracer
) -> Callable[[], Any]:
    """A raw ``start_as_current_span`` call with the name and attributes the decorator put on its span."""
    exporter.clear()
    decorated("paris")
    span = exporter.spans[-1]
    name, attributes = span.name, dict(span.attributes or {})
    exporter.clear()

    def raw() -> str:
        with tracer.start_as_current_span(name, attributes=attributes):
            return find_flights("paris")

    return raw


def _variants(exporter: CountingExporter, tracer: trace.Tracer) -> dict[str, Callable[[], object]]:
    """The calls compared, by name: the function bare, decorated, and in a raw span like the decorator's."""
    import orchestrace as ot

    agent = ot.agent(name="planner")(find_flights)
    tool = ot.tool(name="find_flights")(find_flights)

    def cleared(fn: Callable[[], object]) -> Callable[[], object]:
        # Keep memory flat across batches without putting the clearing inside the timed call.
        def call() -> object:
            result = fn()
            if len(exporter.spans) > 10_000:
                exporter.clear()
            return result

        return call

    return {
        "undecorated": cleared(lambda: find_flights("paris")),
        "raw_span_agent": cleared(_raw_twin(agent, exporter, tracer)),
        "ot_agent": cleared(lambda: agent("paris")),
        "raw_span_tool": cleared(_raw_twin(tool, exporter, tracer)),
        "ot_tool": cleared(lambda: tool("paris")),
    }


def counted_worker(calls: int) -> None:
    """Under callgrind: the instructions of ``calls`` calls of each variant, a part named after it."""
    exporter, tracer = _setup()
    variants = _variants(exporter, tracer)
    with counted(_EMPTY):  # what counting itself costs, taken off the others
        pass
    for name, fn in variants.items():
        for _ in range(_WARMUP):
            fn()
        # Each variant starts from the same heap: the spans kept by the exporter (and garbage left by the
        # previous variant) would otherwise make the collector's passes longer for the later ones.
        exporter.clear()
        gc.collect()
        with counted(name):
            for _ in range(calls):
                fn()


def _instructions(sizes: Sizes) -> dict[str, Any]:
    """Instructions per call of each variant, and the decorators' ratios to the raw span in instructions."""
    if not available():
        return {"skipped": "valgrind is not installed"}
    totals = count(["bench.sdk_overhead", "--callgrind", str(sizes.counted_calls)])
    empty = totals.pop(_EMPTY)
    per_call = {name: (total - empty) / sizes.counted_calls for name, total in totals.items()}
    return {
        "calls": sizes.counted_calls,
        "per_call": per_call,
        "ratio_to_raw_span": {kind: per_call[f"ot_{kind}"] / per_call[f"raw_span_{kind}"] for kind in KINDS},
    }


def _attribute_counts(
    variants: dict[str, Callable[[], object]], exporter: CountingExporter
) -> dict[str, int]:
    counts = {}
    for kind in KINDS:
        exporter.clear()
        variants[f"ot_{kind}"]()
        counts[kind] = len(exporter.spans[-1].attributes or {})
    exporter.clear()
    return counts


def _paired_ratio(samples: dict[str, list[float]], kind: str, net: bool = False) -> float:
    """The median over rounds of the decorator's time over the raw span's in the same round: the machine's
    speed drifts (shared, throttled), and a round's batches run back to back, so each round's ratio is
    steadier than the ratio of medians taken over the whole run."""
    base = samples["undecorated"] if net else [0.0] * len(samples["undecorated"])
    rounds = zip(samples[f"ot_{kind}"], samples[f"raw_span_{kind}"], base, strict=True)
    return median([(decorated - b) / (raw - b) for decorated, raw, b in rounds])


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    exporter, tracer = _setup()
    variants = _variants(exporter, tracer)
    samples = alternate(variants, sizes.rounds, sizes.calls)
    us = {name: median(values) for name, values in samples.items()}
    attributes = _attribute_counts(variants, exporter)

    def many(fn: Callable[[], object]) -> Callable[[], None]:
        def loop() -> None:
            for _ in range(sizes.profile_calls):
                fn()

        return loop

    result: dict[str, Any] = {
        "sizes": sizes.__dict__,
        "exporter": "SimpleSpanProcessor -> in-memory list, cleared every 10,000 spans",
        "us_per_call": us,
        "attributes_per_span": attributes,
        "ratio_to_raw_span": {kind: _paired_ratio(samples, kind) for kind in KINDS},
        # The same ratios net of the function itself: what each adds to a call.
        "added_ratio_to_raw_span": {kind: _paired_ratio(samples, kind, net=True) for kind in KINDS},
        "instructions": _instructions(sizes),
        "target_ratio": TARGET_RATIO,
        "profile": {
            "ot_agent": profile("sdk_agent", many(variants["ot_agent"]), out),
            "raw_span_agent": profile("sdk_raw_span", many(variants["raw_span_agent"]), out),
        },
    }
    result["target_met"] = all(r <= TARGET_RATIO for r in result["ratio_to_raw_span"].values())
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Count the instructions per call (run under callgrind).")
    parser.add_argument("--callgrind", type=int, required=True, metavar="CALLS")
    counted_worker(parser.parse_args().callgrind)
