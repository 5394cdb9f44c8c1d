"""OTLP ``ExportTraceServiceRequest`` bytes written straight from finished spans.

The same bytes as OTel's ``encode_spans(spans).SerializeToString()`` (OTLP's common exporter package;
tests/sdk/test_sdk_trace_encoder.py compares them on random spans, tests/langgraph/test_otlp_bytes.py on
LangGraph runs), without first building a protobuf object per attribute, event and span and copying each into
its parent: OTel's encoder costs about 127 k instructions a span and 26 k an attribute, paid by the exporter's
thread inside the traced program, under its GIL; this one about half. Fields are written in field-number
order, zero and empty ones left out, as protobuf does. An attribute whose value cannot be encoded is left out,
as OTel's encoder does, and logged once per key (OTel's logs it in every export).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from orchestrace.failsafe import log_once

_SMALL = [bytes((n,)) for n in range(0x80)]  # the varints of one byte
_FIXED64 = struct.Struct("<Q").pack
_DOUBLE = struct.Struct("<d").pack
_INT64_MASK = (1 << 64) - 1


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5  # wire types
# Field numbers of opentelemetry/proto/{collector/trace,trace,common,resource}/v1/*.proto.
_REQUEST_RESOURCE_SPANS = _tag(1, _LEN)
_RESOURCE_SPANS_RESOURCE, _RESOURCE_SPANS_SCOPE_SPANS, _RESOURCE_SPANS_SCHEMA = (
    _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN))
_RESOURCE_ATTRIBUTE = _tag(1, _LEN)
_SCOPE_SPANS_SCOPE, _SCOPE_SPANS_SPAN, _SCOPE_SPANS_SCHEMA = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)
_SCOPE_NAME, _SCOPE_VERSION, _SCOPE_ATTRIBUTE = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)
_SPAN_TRACE_ID = _tag(1, _LEN) + _varint(16)
_SPAN_SPAN_ID, _SPAN_PARENT_ID = _tag(2, _LEN) + _varint(8), _tag(4, _LEN) + _varint(8)
_SPAN_TRACE_STATE, _SPAN_NAME, _SPAN_KIND = _tag(3, _LEN), _tag(5, _LEN), _tag(6, _VARINT)
_SPAN_START, _SPAN_END, _SPAN_ATTRIBUTE = _tag(7, _I64), _tag(8, _I64), _tag(9, _LEN)
_SPAN_DROPPED_ATTRIBUTES, _SPAN_EVENT, _SPAN_DROPPED_EVENTS = (
    _tag(10, _VARINT), _tag(11, _LEN), _tag(12, _VARINT))
_SPAN_LINK, _SPAN_DROPPED_LINKS, _SPAN_STATUS, _SPAN_FLAGS = (
    _tag(13, _LEN), _tag(14, _VARINT), _tag(15, _LEN), _tag(16, _I32))
_EVENT_TIME, _EVENT_NAME, _EVENT_ATTRIBUTE = _tag(1, _I64), _tag(2, _LEN), _tag(3, _LEN)
_EVENT_DROPPED_ATTRIBUTES = _tag(4, _VARINT)
_LINK_TRACE_ID, _LINK_SPAN_ID = _tag(1, _LEN) + _varint(16), _tag(2, _LEN) + _varint(8)
_LINK_ATTRIBUTE, _LINK_DROPPED_ATTRIBUTES, _LINK_FLAGS = _tag(4, _LEN), _tag(5, _VARINT), _tag(6, _I32)
_STATUS_MESSAGE, _STATUS_CODE = _tag(2, _LEN), _tag(3, _VARINT)
_KEY_VALUE_KEY, _KEY_VALUE_VALUE = _tag(1, _LEN), _tag(2, _LEN)
_ANY_STRING, _ANY_BOOL, _ANY_INT, _ANY_DOUBLE = (
    _tag(1, _LEN), _tag(2, _VARINT), _tag(3, _VARINT), _tag(4, _I64))
_ANY_ARRAY, _ANY_KVLIST, _ANY_BYTES = _tag(5, _LEN), _tag(6, _LEN), _tag(7, _LEN)
_VALUES = _tag(1, _LEN)  # ArrayValue.values and KeyValueList.values

_KIND = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4,
         SpanKind.CONSUMER: 5}
# SpanFlags: whether the parent is remote is known (always), and it is remote.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_LOCAL_FLAGS = struct.pack("<I", _HAS_IS_REMOTE)
_REMOTE_FLAGS = struct.pack("<I", _HAS_IS_REMOTE | _IS_REMOTE)

# An attribute key's encoded ``KeyValue.key``: keys repeat on every span. Bounded, so that keys made up at
# run time cannot grow it without end.
_KEYS: dict[str, bytes] = {}
_KEYS_MAX = 4096


def _field(tag: bytes, body: bytes) -> bytes:
    """A length-delimited field."""
    return tag + _varint(len(body)) + body


def _string(tag: bytes, text: str | None) -> list[bytes]:
    return [_field(tag, text.encode())] if text else []


def _count(tag: bytes, count: int) -> list[bytes]:
    return [tag + _varint(count)] if count else []


def _key(key: str) -> bytes:
    encoded = _KEYS.get(key)
    if encoded is None:
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        encoded = _KEYS[key] = _field(_KEY_VALUE_KEY, key.encode())
    return encoded


def _value(value: Any) -> bytes:
    """An ``AnyValue``'s body, checking types in the order of OTel's ``_encode_value`` (``None``: empty)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return _ANY_BOOL + _SMALL[value]
    if isinstance(value, str):
        return _field(_ANY_STRING, value.encode())
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"Value out of range: {value}")
        return _ANY_INT + _varint(value & _INT64_MASK)  # two's complement, as int64 is written
    if isinstance(value, float):
        return _ANY_DOUBLE + _DOUBLE(value)
    if isinstance(value, bytes):
        return _field(_ANY_BYTES, value)
    if isinstance(value, Sequence):
        return _field(_ANY_ARRAY, b"".join([_field(_VALUES, _value(item)) for item in value]))
    if isinstance(value, Mapping):
        return _field(_ANY_KVLIST, b"".join([_field(_VALUES, _key_value(str(key), item))
                                             for key, item in value.items()]))
    raise TypeError(f"Invalid type {type(value)} of value {value}")


def _key_value(key: str, value: Any) -> bytes:
    if type(value) is str:  # most attributes: no isinstance chain
        encoded = value.encode()
        body = _ANY_STRING + _varint(len(encoded)) + encoded
    else:
        body = _value(value)
    return _key(key) + _KEY_VALUE_VALUE + _varint(len(body)) + body


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> list[bytes]:
    if not attributes:
        return []
    out = []
    for key, value in attributes.items():
        try:
            body = _key_value(key, value)
        except Exception as error:  # once per key and error: every export would repeat it
            log_once(f"trace_encoder (Failed to encode key {key!r})", error)
            continue
        out.append(tag + _varint(len(body)) + body)
    return out


def _flags(parent: Any) -> bytes:
    return _REMOTE_FLAGS if parent is not None and parent.is_remote else _LOCAL_FLAGS


def _span(span: ReadableSpan) -> bytes:
    context, parent, status = span.context, span.parent, span.status
    parts = [_SPAN_TRACE_ID, context.trace_id.to_bytes(16, "big"),
             _SPAN_SPAN_ID, context.span_id.to_bytes(8, "big")]
    if context.trace_state:
        parts += _string(_SPAN_TRACE_STATE, ",".join([f"{k}={v}" for k, v in context.trace_state.items()]))
    if parent is not None:
        parts += (_SPAN_PARENT_ID, parent.span_id.to_bytes(8, "big"))
    parts += _string(_SPAN_NAME, span.name)
    parts += (_SPAN_KIND, _SMALL[_KIND[span.kind]])
    if span.start_time:
        parts += (_SPAN_START, _FIXED64(span.start_time))
    if span.end_time:
        parts += (_SPAN_END, _FIXED64(span.end_time))
    parts += _attributes(_SPAN_ATTRIBUTE, span.attributes)
    parts += _count(_SPAN_DROPPED_ATTRIBUTES, span.dropped_attributes)
    for event in span.events:
        time = [_EVENT_TIME + _FIXED64(event.timestamp)] if event.timestamp else []
        parts.append(_field(_SPAN_EVENT, b"".join([
            *time, *_string(_EVENT_NAME, event.name), *_attributes(_EVENT_ATTRIBUTE, event.attributes),
            *_count(_EVENT_DROPPED_ATTRIBUTES, event.dropped_attributes)])))
    parts += _count(_SPAN_DROPPED_EVENTS, span.dropped_events)
    for link in span.links:
        parts.append(_field(_SPAN_LINK, b"".join([
            _LINK_TRACE_ID, link.context.trace_id.to_bytes(16, "big"),
            _LINK_SPAN_ID, link.context.span_id.to_bytes(8, "big"),
            *_attributes(_LINK_ATTRIBUTE, link.attributes),
            *_count(_LINK_DROPPED_ATTRIBUTES, link.dropped_attributes), _LINK_FLAGS, _flags(link.context)])))
    parts += _count(_SPAN_DROPPED_LINKS, span.dropped_links)
    if status is not None:  # written even when empty (unset), as OTel's encoder sets it
        parts.append(_field(_SPAN_STATUS, b"".join([*_string(_STATUS_MESSAGE, status.description),
                                                    *_count(_STATUS_CODE, status.status_code.value)])))
    parts += (_SPAN_FLAGS, _flags(parent))
    return b"".join(parts)


def _scope(scope: Any) -> bytes:
    if scope is None:
        return b""
    return b"".join([*_string(_SCOPE_NAME, scope.name), *_string(_SCOPE_VERSION, scope.version),
                     *_attributes(_SCOPE_ATTRIBUTE, scope.attributes)])


def _first_equal(seen: list[Any], item: Any) -> Any:
    """The first of ``seen`` equal to ``item``, else ``item`` (added to ``seen``). OTel groups spans by equal
    resource and scope, hashing a resource's attributes as JSON for each span; here each distinct object is
    compared once."""
    for first in seen:
        if first is item or first == item:
            return first
    seen.append(item)
    return item


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` of ``spans``: grouped by resource, then by instrumentation
    scope, each in the order first seen, as OTel's ``encode_spans`` does."""
    resources: list[Any] = []
    scopes: list[Any] = []
    canonical: dict[int, Any] = {}  # id of a span's resource or scope -> the first equal one
    grouped: dict[int, dict[int, tuple[Any, list[bytes]]]] = {}  # resource -> scope -> (scope, its spans)
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope or None
        if id(resource) not in canonical:
            canonical[id(resource)] = _first_equal(resources, resource)
        if id(scope) not in canonical:
            canonical[id(scope)] = _first_equal(scopes, scope)
        scope = canonical[id(scope)]
        by_scope = grouped.setdefault(id(canonical[id(resource)]), {})
        by_scope.setdefault(id(scope), (scope, []))[1].append(_field(_SCOPE_SPANS_SPAN, _span(span)))
    out = []
    for resource in resources:
        attributes = b"".join(_attributes(_RESOURCE_ATTRIBUTE, resource.attributes))
        body = [_field(_RESOURCE_SPANS_RESOURCE, attributes)]
        for scope, encoded in grouped[id(resource)].values():
            schema = scope.schema_url if scope is not None else None
            body.append(_field(_RESOURCE_SPANS_SCOPE_SPANS, b"".join([
                _field(_SCOPE_SPANS_SCOPE, _scope(scope)), *encoded, *_string(_SCOPE_SPANS_SCHEMA, schema)])))
        body += _string(_RESOURCE_SPANS_SCHEMA, resource.schema_url)
        out.append(_field(_REQUEST_RESOURCE_SPANS, b"".join(body)))
    return b"".join(out)
