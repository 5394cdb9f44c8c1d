"""orchestrace's OTLP encoder writes the very bytes of OTel's (``encode_spans(...).SerializeToString()``)."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)
from orchestrace.trace_encoder import encode_request

_TEXTS = ["", "a", "chat", "é", "日本語のテキスト", "x" * 127, "y" * 128, "z" * 20_000, "mixed ü " * 3000]
_INTS = [0, 1, -1, 127, 128, 300, -(1 << 63), (1 << 63) - 1, 1 << 40]
_FLOATS = [0.0, -0.0, 1.5, -2.25e300, float("inf"), 1e-310]


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(6 if depth == 0 else 4)
    if kind == 0:
        return rng.choice(_TEXTS)
    if kind == 1:
        return rng.choice(_INTS)
    if kind == 2:
        return rng.choice(_FLOATS)
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:  # homogeneous sequences, as OTel's attribute rules keep them
        pick = rng.choice([_TEXTS, _INTS, _FLOATS, [True, False]])
        return tuple(rng.choice(pick) for _ in range(rng.randrange(4)))
    return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randrange(3))}


def _attributes(rng: random.Random) -> dict[str, Any]:
    keys = ["gen_ai.operation.name", "k", "ключ", f"key.{rng.randrange(50)}"]
    return {rng.choice(keys) + str(i): _value(rng) for i in range(rng.randrange(9))}


def _providers() -> tuple[list[TracerProvider], InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    resources = [Resource.create({"service.name": "a"}), Resource({"service.name": "b", "n": 3}, "https://s/1"),
                 Resource.create({"service.name": "a"})]  # equal to the first: grouped with it
    providers = [TracerProvider(resource=resource, span_limits=SpanLimits(max_span_attributes=6, max_events=3,
                                                                         max_links=2, max_event_attributes=2))
                 for resource in resources]
    for provider in providers:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return providers, exporter


def _random_spans(seed: int) -> Sequence[ReadableSpan]:
    rng = random.Random(seed)
    providers, exporter = _providers()
    remote = SpanContext(rng.getrandbits(128) or 1, rng.getrandbits(64) or 1, is_remote=True,
                         trace_flags=TraceFlags(1), trace_state=TraceState([("vendor", "v1"), ("x", "y")]))
    parents: list[Any] = [None, set_span_in_context(NonRecordingSpan(remote))]
    for index in range(rng.randrange(1, 40)):
        provider = rng.choice(providers)
        tracer = provider.get_tracer(rng.choice(["scope.one", "scope.two", ""]), rng.choice([None, "1.2.3"]),
                                     rng.choice([None, "https://schema/1"]),
                                     rng.choice([None, {"scope.attr": "v"}]))
        links = [Link(remote, rng.choice([None, _attributes(rng)])) for _ in range(rng.randrange(4))]
        span = tracer.start_span(rng.choice(["chat model", "", "invoke_agent 日本", f"node {index}"]),
                                 context=rng.choice(parents), kind=rng.choice(list(SpanKind)),
                                 attributes=_attributes(rng), links=links)
        for _ in range(rng.randrange(5)):
            span.add_event(rng.choice(["orchestrace.spawn", "", "e"]), _attributes(rng))
        span.set_status(rng.choice([Status(StatusCode.UNSET), Status(StatusCode.OK),
                                    Status(StatusCode.ERROR, rng.choice(["boom", "", "ü" * 300]))]))
        span.end()
        parents.append(set_span_in_context(span))
    return exporter.get_finished_spans()


@pytest.mark.parametrize("seed", range(60))
def test_same_bytes_as_otel_on_random_spans(seed: int) -> None:
    spans = _random_spans(seed)
    assert encode_request(spans) == encode_spans(spans).SerializeToString()


def test_empty_batch() -> None:
    assert encode_request([]) == encode_spans([]).SerializeToString() == b""


def test_an_attribute_that_cannot_be_encoded_is_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    providers, exporter = _providers()
    span = providers[0].get_tracer("t").start_span("s")
    span.end()
    finished = exporter.get_finished_spans()[0]
    bad: dict[str, Any] = {"ok": "kept", "too.big": 1 << 70, "surrogate": "\ud800", "also.ok": 3}
    # OTel's attribute rules would not store these; a span built directly (as exporters' wrappers do) can.
    built = ReadableSpan(finished.name, finished.context, attributes=bad, resource=finished.resource,
                         instrumentation_scope=finished.instrumentation_scope, start_time=1, end_time=2)
    with caplog.at_level(logging.ERROR):
        ours = encode_request([built])
    assert ours == encode_spans([built]).SerializeToString()
    assert b"kept" in ours and b"also.ok" in ours and b"too.big" not in ours and b"surrogate" not in ours
    assert sum("Failed to encode key" in record.getMessage() for record in caplog.records) >= 2
