"""SDK: ``@ot.agent`` / ``@ot.tool`` against the bare function and against a raw OTel span with the same
attributes.

All spanned variants share one TracerProvider whose only processor is a SimpleSpanProcessor into an in-memory
list (``CountingExporter``), so the exporter costs the same small amount for each and is not what is measured.
The raw baseline copies the name and attributes of a span the decorator produced, so both spans carry the same
data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from bench.profiling import profile
from bench.timing import CountingExporter, alternate, median

#: Decorator cost allowed, as a multiple of the raw span's.
TARGET_RATIO = 1.25


@dataclass(frozen=True)
class Sizes:
    rounds: int
    calls: int
    profile_calls: int


QUICK = Sizes(rounds=3, calls=200, profile_calls=500)
FULL = Sizes(rounds=21, calls=5000, profile_calls=50_000)


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


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    exporter, tracer = _setup()
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

    variants: dict[str, Callable[[], object]] = {
        "undecorated": cleared(lambda: find_flights("paris")),
        "raw_span_agent": cleared(_raw_twin(agent, exporter, tracer)),
        "ot_agent": cleared(lambda: agent("paris")),
        "raw_span_tool": cleared(_raw_twin(tool, exporter, tracer)),
        "ot_tool": cleared(lambda: tool("paris")),
    }
    samples = alternate(variants, sizes.rounds, sizes.calls)
    us = {name: median(values) for name, values in samples.items()}
    exporter.clear()
    agent("paris")
    attributes = {"agent": len(exporter.spans[-1].attributes or {})}
    exporter.clear()
    tool("paris")
    attributes["tool"] = len(exporter.spans[-1].attributes or {})

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
        "ratio_to_raw_span": {
            "agent": us["ot_agent"] / us["raw_span_agent"],
            "tool": us["ot_tool"] / us["raw_span_tool"],
        },
        # The same ratios net of the function itself: what each adds to a call.
        "added_ratio_to_raw_span": {
            "agent": (us["ot_agent"] - us["undecorated"]) / (us["raw_span_agent"] - us["undecorated"]),
            "tool": (us["ot_tool"] - us["undecorated"]) / (us["raw_span_tool"] - us["undecorated"]),
        },
        "target_ratio": TARGET_RATIO,
        "profile": {
            "ot_agent": profile("sdk_agent", many(variants["ot_agent"]), out),
            "raw_span_agent": profile("sdk_raw_span", many(variants["raw_span_agent"]), out),
        },
    }
    result["target_met"] = all(r <= TARGET_RATIO for r in result["ratio_to_raw_span"].values())
    return result
