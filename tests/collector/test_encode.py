"""Held spans back to OTLP protobuf (what WAL compaction logs again) decode to equal spans."""

from __future__ import annotations

from collector_fixtures import record_run
from orchestrace_collector.decode import spans_from_request
from orchestrace_collector.encode import request_from_spans
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.spans import STATUS_ERROR, Span, SpanEvent, SpanLink


def test_every_attribute_type_and_field_survives_a_round_trip() -> None:
    resource = {"service.name": "app", "host.cores": 8}
    every_type = {
        "s": "text", "b": True, "i": -7, "f": 0.25, "raw": b"\x00\xff", "none": None,
        "array": ("a", 1, 2.5, False), "empty": (), "nested": {"k": ("x",), "inner": {"z": 1}}, "kv": {},
    }
    spans = [
        Span("ab" * 16, "01" * 8, None, "root", 1, 9, 2, every_type,
             (SpanEvent("ev", 5, {"n": 1}),), (SpanLink("cd" * 16, "02" * 8, {"why": "input"}),),
             STATUS_ERROR, "boom", resource, "scope-a"),
        Span("ab" * 16, "03" * 8, "01" * 8, "child", 2, 3, resource=resource, scope="scope-b"),
        Span("ef" * 16, "04" * 8, None, "other", 4, 0, resource={"service.name": "other"}, scope=""),
    ]
    spans += [span_from_readable(s) for s in record_run("round-trip", tools=2)]  # type: ignore[arg-type]
    assert spans_from_request(request_from_spans(spans)) == spans
