"""Held spans back to OTLP protobuf: how WAL compaction logs an open episode again (``Assembler._compact``).

The inverse of ``decode.spans_from_request``: decoding what :func:`request_from_spans` returns gives spans
equal to the ones encoded (what decoding drops, such as trace state and dropped counts, was never held).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from orchestrace_collector.spans import Span


def request_from_spans(spans: Iterable[Span]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    # Spans decoded from one request share its resource dict: one ResourceSpans per resource held.
    resources: dict[int, ResourceSpans] = {}
    scopes: dict[tuple[int, str], ScopeSpans] = {}
    for span in spans:
        resource_spans = resources.get(id(span.resource))
        if resource_spans is None:
            resource_spans = resources[id(span.resource)] = request.resource_spans.add()
            _set_attributes(resource_spans.resource.attributes, span.resource)
        scope_spans = scopes.get((id(span.resource), span.scope))
        if scope_spans is None:
            scope_spans = scopes[(id(span.resource), span.scope)] = resource_spans.scope_spans.add()
            scope_spans.scope.name = span.scope
        _set_span(scope_spans.spans.add(), span)
    return request


def _set_span(pb: PbSpan, span: Span) -> None:
    pb.trace_id = bytes.fromhex(span.trace_id)
    pb.span_id = bytes.fromhex(span.span_id)
    if span.parent_span_id is not None:
        pb.parent_span_id = bytes.fromhex(span.parent_span_id)
    pb.name = span.name
    pb.start_time_unix_nano = span.start_ns
    pb.end_time_unix_nano = span.end_ns
    pb.kind = span.kind  # type: ignore[assignment]
    _set_attributes(pb.attributes, span.attributes)
    for event in span.events:
        pb_event = pb.events.add(name=event.name, time_unix_nano=event.time_ns)
        _set_attributes(pb_event.attributes, event.attributes)
    for link in span.links:
        pb_link = pb.links.add(trace_id=bytes.fromhex(link.trace_id), span_id=bytes.fromhex(link.span_id))
        _set_attributes(pb_link.attributes, link.attributes)
    pb.status.code = span.status_code  # type: ignore[assignment]
    pb.status.message = span.status_message


def _set_attributes(target: Any, attributes: Mapping[str, Any]) -> None:
    for key, value in attributes.items():
        kv: KeyValue = target.add(key=key)
        _set_value(kv.value, value)


def _set_value(target: AnyValue, value: Any) -> None:
    if value is None:
        return  # an empty AnyValue decodes to None
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):  # before int: a bool is an int to Python
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, tuple | list):
        target.array_value.SetInParent()  # an empty array stays an array
        for item in value:
            _set_value(target.array_value.values.add(), item)
    elif isinstance(value, Mapping):
        target.kvlist_value.SetInParent()
        _set_attributes(target.kvlist_value.values, value)
    else:
        target.string_value = str(value)
