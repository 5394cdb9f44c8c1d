"""Every input format the collector reads, decoded to :class:`~orchestrace_collector.spans.Span`.

* OTLP protobuf: an ``ExportTraceServiceRequest`` (the same wire format as ``TracesData``), as sent on
  ``/v1/traces`` and over gRPC, or dumped to a file.
* OTLP-JSON: the same message in the OTLP JSON mapping, whose ids are hex strings (not protobuf-JSON base64),
  one object per request, or one per line as the OpenTelemetry Collector's file exporter and
  ``ot.configure(exporter="file:PATH")`` write them.
* Jaeger JSON: the ``{"data": [trace, ...]}`` export of the Jaeger UI and query API, or a single trace object;
  Jaeger v2's ``/api/v3`` answers (``{"result": <OTLP-JSON>}``) too.
* Several protobuf messages in one file, each prefixed with its length as a 4-byte big-endian integer.
* A collector's write-ahead log segment (``wal/*.wal``; the spool of ``collect --spool-only``).

Payloads are parsed with ``opentelemetry-proto`` and ``google.protobuf.json_format``; the only hand-written
part is the hex-id rewrite the OTLP JSON mapping requires. Any malformed input raises :class:`PayloadError`.

Protobuf spans are decoded from a second reading of the same wire format (``_RawTracesData``) in which a
span's, span event's and link's attributes stay the bytes of their ``KeyValue`` messages: each distinct
attribute is parsed once (with ``opentelemetry-proto``'s own ``KeyValue``) and remembered, so the attributes
that repeat from span to span (operation names, models, agent names, token counts) cost one dict lookup
instead of a Python object per field. It is the decoder's hot loop.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from orchestrace_collector.spans import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    Attributes,
    Span,
    SpanEvent,
    SpanLink,
)
from orchestrace_collector.wal import batches_as_request, is_wal

_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
_HEX = frozenset("0123456789abcdefABCDEF")
_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)


class PayloadError(ValueError):
    """The payload is not a trace export this collector can read (the message says why)."""


# --- OTLP protobuf / OTLP-JSON ------------------------------------------------------------------------------


_M = TypeVar("_M", bound=Message)


def _parsed(message_class: type[_M], data: bytes, error: type[PayloadError] = PayloadError) -> _M:
    try:
        return message_class.FromString(data)
    except (DecodeError, RecursionError) as exc:
        raise error(f"malformed OTLP protobuf: {exc}") from None


def parse_otlp_protobuf(data: bytes) -> ExportTraceServiceRequest:
    return _parsed(ExportTraceServiceRequest, data)


def parse_otlp_json(data: bytes | str | dict[str, Any]) -> ExportTraceServiceRequest:
    """Parse OTLP-JSON (hex ids, camelCase or snake_case keys, enums as numbers or names)."""
    obj = _load_json(data) if isinstance(data, bytes | str) else data
    if not isinstance(obj, dict):
        raise PayloadError("OTLP-JSON payload must be a JSON object")
    try:
        _hex_ids_to_base64(obj)
        return json_format.ParseDict(obj, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, TypeError, AttributeError) as exc:
        raise PayloadError(f"malformed OTLP-JSON: {str(exc)[:300]}") from None


def _load_json(data: bytes | str) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        raise PayloadError("JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError(f"malformed JSON: {exc}") from None


def _hex_ids_to_base64(request: dict[str, Any]) -> None:
    """OTLP-JSON writes ids as hex; protobuf's JSON mapping of ``bytes`` expects base64. Rewrite in place."""
    for resource_spans in _dicts(request.get("resourceSpans", request.get("resource_spans"))):
        for key in ("instrumentationLibrarySpans", "instrumentation_library_spans"):  # pre-1.0 OTLP name
            if key in resource_spans:
                resource_spans.setdefault("scopeSpans", resource_spans.pop(key))
        for scope_spans in _dicts(resource_spans.get("scopeSpans", resource_spans.get("scope_spans"))):
            if "instrumentationLibrary" in scope_spans:
                scope_spans.setdefault("scope", scope_spans.pop("instrumentationLibrary"))
            for span in _dicts(scope_spans.get("spans")):
                _rewrite_ids(span)
                for link in _dicts(span.get("links")):
                    _rewrite_ids(link)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _rewrite_ids(obj: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        value = obj.get(key)
        # Hex of even length is read as hex; anything else is left for json_format (base64, or a ParseError).
        if isinstance(value, str) and len(value) % 2 == 0 and _HEX.issuperset(value):
            obj[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")


def drop_invalid_spans(request: Message) -> tuple[int, str]:
    """Remove spans whose ids are not valid OTLP ids, in place. Returns (rejected count, reason for the
    first)."""
    rejected = 0
    reason = ""
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            bad = [i for i, span in enumerate(scope_spans.spans) if _invalid_reason(span)]
            if not bad:
                continue
            if not reason:
                reason = _invalid_reason(scope_spans.spans[bad[0]])
            rejected += len(bad)
            for index in reversed(bad):
                del scope_spans.spans[index]
    return rejected, reason


def _invalid_reason(span: Message) -> str:
    # Runs on every received span: comparisons with the all-zero ids, not a Python loop over the bytes.
    trace_id = span.trace_id
    if len(trace_id) != 16 or trace_id == _ZERO_TRACE_ID:
        return f"invalid trace_id ({len(trace_id)} bytes, must be 16 and not all zero)"
    span_id = span.span_id
    if len(span_id) != 8 or span_id == _ZERO_SPAN_ID:
        return f"invalid span_id ({len(span_id)} bytes, must be 8 and not all zero)"
    if len(span.parent_span_id) not in (0, 8):
        return f"invalid parent_span_id ({len(span.parent_span_id)} bytes, must be 0 or 8)"
    return ""


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def _raw_attributes_class() -> type[Message]:
    """``TracesData`` (the wire format of ``ExportTraceServiceRequest`` too) whose span, span event and
    link ``attributes`` are ``repeated bytes``: each item a serialized ``KeyValue``, read by
    ``_raw_attributes``. Made from the installed ``opentelemetry-proto`` descriptors, in a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    files = []
    for module in (common_pb2, resource_pb2, trace_pb2):
        file = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(file)
        files.append(file)
    for message in files[-1].message_type:
        if message.name == "Span":
            for owner in (message, *message.nested_type):  # the span, its Event and its Link
                for field in owner.field:
                    if field.name == "attributes":
                        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                        field.ClearField("type_name")
    for file in files:
        pool.Add(file)
    traces_data = pool.FindMessageTypeByName(trace_pb2.TracesData.DESCRIPTOR.full_name)
    return message_factory.GetMessageClass(traces_data)


_RawTracesData = _raw_attributes_class()
#: Serialized ``KeyValue`` -> (key, value), for attributes whose value cannot change (no ``kvlist``), up to
#: ``_CACHED_BYTES`` long; emptied when it holds ``_CACHE_SIZE`` (ids and refs, unique, fill it over time).
_decoded: dict[bytes, tuple[str, Any]] = {}
_CACHED_BYTES = 256
_CACHE_SIZE = 16_384


class _Malformed(PayloadError):
    """Not an OTLP trace export (``decode_bytes`` then tries the bytes as length-prefixed messages)."""


def _parse_raw(data: bytes) -> Message:
    return _parsed(_RawTracesData, data, _Malformed)


def raw_span_attributes(span: Message) -> Attributes:
    """The attributes of one span of a :func:`read_export` request, decoded."""
    return _raw_attributes(span.attributes)


def _raw_attributes(raws: Sequence[bytes]) -> Attributes:
    out: Attributes = {}
    # Over a slice (a list, made in one call): iterating protobuf's container takes an item call each and
    # ends in a formatted IndexError, which cost more than the attributes.
    for raw in raws[:]:
        item = _decoded.get(raw)
        if item is None:
            item = _key_value(raw)
        out[item[0]] = item[1]
    return out


def _key_value(raw: bytes) -> tuple[str, Any]:
    kv = _parsed(KeyValue, raw, _Malformed)
    value = kv.value
    item = (kv.key, _any_value(value, value.WhichOneof("value")))
    if len(raw) <= _CACHED_BYTES and _immutable(item[1]):
        if len(_decoded) >= _CACHE_SIZE:
            _decoded.clear()
        _decoded[raw] = item
    return item


def _immutable(value: Any) -> bool:
    return not isinstance(value, dict) and (not isinstance(value, tuple) or all(map(_immutable, value)))


def spans_from_export(data: bytes) -> list[Span]:
    """The spans of a serialized export already checked: a part of one :func:`read_export` read
    (re-serialized), or a batch the collector logged."""
    return _spans(_parse_raw(data))


def received_spans(data: bytes) -> tuple[list[Span], int, str]:
    """The spans with valid OTLP ids of a serialized export (what a receiver got), how many were left out
    for their ids, and why the first one was (:func:`drop_invalid_spans`' count and reason): the ids are
    checked in the pass that decodes. Malformed bytes raise :class:`PayloadError` as parsing them whole does
    (``parse_otlp_protobuf``)."""
    invalid: list[Message] = []
    try:
        spans = _spans(_parse_raw(data), invalid)
    except _Malformed as malformed:
        raise _refusal(data) or malformed from None  # the error of parsing it whole, as the receivers did
    return spans, len(invalid), _invalid_reason(invalid[0]) if invalid else ""


def spans_from_request(request: Message) -> list[Span]:
    """The spans of a parsed export (``ExportTraceServiceRequest``, as the receivers parse it), decoded."""
    if not isinstance(request, _RawTracesData):
        request = _parse_raw(request.SerializeToString())  # C both ways; see the module docstring
    return _spans(request)


def _spans(request: Message, invalid: list[Message] | None = None) -> list[Span]:
    """The hot loop of decoding: each protobuf field is read once, fields are passed by position, the hex of
    a trace id (shared by the spans of a trace) is computed once per request. ``invalid``: None trusts the
    ids; else a span with an invalid id is left out and added to it."""
    out: list[Span] = []
    append = out.append
    trace_hex: dict[bytes, str] = {}
    attributes = _raw_attributes
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for pb in scope_spans.spans:
                tid = pb.trace_id
                trace_id = trace_hex.get(tid)
                if trace_id is None:
                    if invalid is not None and (len(tid) != 16 or tid == _ZERO_TRACE_ID):
                        invalid.append(pb)
                        continue
                    trace_id = trace_hex[tid] = tid.hex()
                span_id = pb.span_id
                parent = pb.parent_span_id
                if invalid is not None and (
                    len(span_id) != 8 or span_id == _ZERO_SPAN_ID or len(parent) not in (0, 8)
                ):
                    invalid.append(pb)
                    continue
                events = pb.events
                links = pb.links
                status = pb.status
                append(
                    Span(
                        trace_id,
                        span_id.hex(),
                        parent.hex() if parent and parent != _ZERO_SPAN_ID else None,
                        pb.name,
                        pb.start_time_unix_nano,
                        pb.end_time_unix_nano,
                        pb.kind,
                        attributes(pb.attributes),
                        tuple([SpanEvent(e.name, e.time_unix_nano, attributes(e.attributes)) for e in events])
                        if events
                        else (),
                        tuple(
                            [
                                SpanLink(lk.trace_id.hex(), lk.span_id.hex(), attributes(lk.attributes))
                                for lk in links
                            ]
                        )
                        if links
                        else (),
                        status.code,
                        status.message,
                        resource,
                        scope,
                    )
                )
    return out


def _reject_ids(request: Message) -> NoReturn:
    """Refuse an export holding a span with an invalid id; one that is also malformed is refused as malformed
    (what parsing it whole finds first)."""
    malformed = _refusal(request.SerializeToString())
    if malformed is not None:
        raise malformed
    rejected, reason = drop_invalid_spans(request)
    raise PayloadError(f"{rejected} span(s) with bad ids, e.g. {reason}")


def _refusal(data: bytes) -> _Malformed | None:
    """Why parsing ``data`` whole as an ``ExportTraceServiceRequest`` fails, if it does: the error users see,
    whichever part of the export the decoder met first."""
    try:
        _parsed(ExportTraceServiceRequest, data, _Malformed)
    except _Malformed as exc:
        return exc
    return None


def _attributes(kvs: Iterable[KeyValue]) -> Attributes:
    # Strings (most attributes) are read inline, without a call.
    out: Attributes = {}
    for kv in kvs:
        value = kv.value
        which = value.WhichOneof("value")
        out[kv.key] = value.string_value if which == "string_value" else _any_value(value, which)
    return out


def _any_value(value: AnyValue, which: str | None) -> Any:
    if which is None:
        return None
    if which == "array_value":
        return tuple(_any_value(v, v.WhichOneof("value")) for v in value.array_value.values)
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which)


# --- Jaeger JSON --------------------------------------------------------------------------------------------

_JAEGER_KIND = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_JAEGER_STATUS = {"OK": STATUS_OK, "ERROR": STATUS_ERROR, "UNSET": STATUS_UNSET}
# Tags the OTel-to-Jaeger translation adds for OTLP fields; they go back to those fields, not to attributes.
_JAEGER_RESERVED = frozenset(
    {
        "span.kind",
        "otel.status_code",
        "otel.status_description",
        "otel.scope.name",
        "otel.library.name",
        "otel.scope.version",
        "otel.library.version",
        "internal.span.format",
    }
)


def is_jaeger(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    data = obj.get("data")
    if isinstance(data, list):
        return all(isinstance(t, dict) and "spans" in t for t in data)
    return "traceID" in obj and "spans" in obj


def spans_from_jaeger(obj: dict[str, Any]) -> list[Span]:
    traces = obj["data"] if isinstance(obj.get("data"), list) else [obj]
    try:
        return [span for trace in traces for span in _jaeger_trace(trace)]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PayloadError(f"malformed Jaeger JSON: {type(exc).__name__}: {exc}") from None


def _jaeger_trace(trace: dict[str, Any]) -> Iterator[Span]:
    processes = trace.get("processes") or {}
    for js in trace["spans"]:
        tags = _jaeger_tags(js.get("tags"))
        trace_id = _jaeger_id(js["traceID"], 32)
        parent: str | None = None
        links: list[SpanLink] = []
        for ref in js.get("references") or []:
            ref_trace, ref_span = _jaeger_id(ref["traceID"], 32), _jaeger_id(ref["spanID"], 16)
            if parent is None and ref.get("refType") == "CHILD_OF" and ref_trace == trace_id:
                parent = ref_span
            else:
                links.append(SpanLink(trace_id=ref_trace, span_id=ref_span))
        process = processes.get(js.get("processID"), js.get("process")) or {}
        resource = _jaeger_tags(process.get("tags"))
        if "serviceName" in process:
            resource["service.name"] = process["serviceName"]
        start_ns = int(js["startTime"]) * 1000  # Jaeger times are microseconds
        status = str(tags.get("otel.status_code", "UNSET")).upper()
        yield Span(
            trace_id=trace_id,
            span_id=_jaeger_id(js["spanID"], 16),
            parent_span_id=parent,
            name=js["operationName"],
            start_ns=start_ns,
            end_ns=start_ns + int(js.get("duration", 0)) * 1000,
            kind=_JAEGER_KIND.get(str(tags.get("span.kind", "internal")).lower(), 1),
            attributes={k: v for k, v in tags.items() if k not in _JAEGER_RESERVED},
            events=tuple(_jaeger_log(log) for log in js.get("logs") or ()),
            links=tuple(links),
            status_code=STATUS_ERROR
            if tags.get("error") is True
            else _JAEGER_STATUS.get(status, STATUS_UNSET),
            status_message=str(tags.get("otel.status_description", "")),
            resource=resource,
            scope=str(tags.get("otel.scope.name", tags.get("otel.library.name", ""))),
        )


def _jaeger_id(value: str, width: int) -> str:
    hex_id = value.lower().rjust(width, "0")  # Jaeger drops leading zeros and allows 64-bit trace ids
    if len(hex_id) != width or not _HEX.issuperset(hex_id):
        raise ValueError(f"bad Jaeger id {value!r}")
    return hex_id


def _jaeger_tags(tags: Any) -> Attributes:
    out: Attributes = {}
    for tag in tags or []:
        value = tag.get("value")
        kind = tag.get("type", "string")
        if kind == "int64":
            value = int(value)
        elif kind == "float64":
            value = float(value)
        elif kind == "bool" and isinstance(value, str):
            value = value.lower() == "true"
        out[tag["key"]] = value
    return out


def _jaeger_log(log: dict[str, Any]) -> SpanEvent:
    fields = _jaeger_tags(log.get("fields"))
    name = str(fields.pop("event", "log"))
    return SpanEvent(name=name, time_ns=int(log["timestamp"]) * 1000, attributes=fields)


# --- files --------------------------------------------------------------------------------------------------


def decode_json_document(obj: Any) -> list[Span]:
    """One parsed JSON document: an OTLP-JSON request, a Jaeger export, or a list of either."""
    if isinstance(obj, list):
        return [span for item in obj for span in decode_json_document(item)]
    if is_jaeger(obj):
        return spans_from_jaeger(obj)
    if isinstance(obj, dict) and isinstance(obj.get("result"), dict):  # Jaeger v2 query API: OTLP-JSON inside
        return decode_json_document(obj["result"])
    if isinstance(obj, dict) and ("resourceSpans" in obj or "resource_spans" in obj):
        return _valid_spans(parse_otlp_json(obj))
    raise PayloadError("JSON is neither OTLP-JSON (resourceSpans) nor a Jaeger export (data[].spans)")


def decode_bytes(data: bytes) -> list[Span]:
    """Auto-detect the format of a dump: OTLP protobuf, OTLP-JSON, JSON lines of either, Jaeger JSON, or a
    WAL segment."""
    if is_wal(data):
        data = batches_as_request(data)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise PayloadError(f"corrupt gzip: {exc}") from None
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            return decode_json_document(_load_json(data))
        except PayloadError as whole_error:
            lines = [line for line in data.splitlines() if line.strip()]
            if len(lines) < 2:
                raise whole_error from None
        spans: list[Span] = []
        for number, line in enumerate(lines, 1):
            try:
                spans.extend(decode_json_document(_load_json(line)))
            except PayloadError as exc:
                raise PayloadError(f"line {number}: {exc}") from None
        return spans
    if not data.strip():
        return []
    try:
        return _export_spans(data, whole=True)
    except _Malformed:
        delimited = _length_prefixed(data)
        if delimited is None:
            raise
    return [span for chunk in delimited for span in _export_spans(chunk)]


def _export_spans(data: bytes, *, whole: bool = False) -> list[Span]:
    """The spans of one serialized export (``whole``: a file's only one, which must hold spans)."""
    try:
        request = _parse_raw(data)
        if whole and not request.resource_spans:
            raise PayloadError("not an OTLP trace export (no resource_spans; neither JSON nor OTLP protobuf)")
        return _checked(request)
    except _Malformed as malformed:
        raise _refusal(data) or malformed from None


def read_export(data: bytes) -> Message | list[Span]:
    """A dump as :func:`decode_bytes` reads it (the same errors), except that a plain OTLP protobuf export is
    returned parsed and checked but not decoded, for its spans to be decoded where they are needed
    (``ray_engine``): a ``TracesData`` whose attributes are still bytes, for :func:`spans_from_request`."""
    if is_wal(data):  # a collector's spool: its batches are one request
        data = batches_as_request(data)
    protobuf = data[:2] != b"\x1f\x8b" and data.lstrip()[:1] not in (b"{", b"[") and bool(data.strip())
    if protobuf and _refusal(data) is None:  # parsed whole, every attribute included, as decode_bytes does
        request = _parse_raw(data)
        if request.resource_spans and drop_invalid_spans(request)[0] == 0:
            return request
    return decode_bytes(data)  # every other case, errors included


def _length_prefixed(data: bytes) -> list[bytes] | None:
    """Split a stream of ``[u32 big-endian length][message]`` records; None when ``data`` is not one."""
    chunks: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 4 > len(data):
            return None
        length = int.from_bytes(data[offset : offset + 4], "big")
        offset += 4
        if offset + length > len(data):
            return None
        chunks.append(data[offset : offset + length])
        offset += length
    return chunks


def _valid_spans(request: ExportTraceServiceRequest) -> list[Span]:
    """A dump is read whole or not at all: a span with a bad id is an error, not a silent drop."""
    return _checked(_parse_raw(request.SerializeToString()))


def _checked(request: Message) -> list[Span]:
    """The spans of an export that must be read whole: a span with an invalid id fails it."""
    invalid: list[Message] = []
    spans = _spans(request, invalid)
    if invalid:
        _reject_ids(request)
    return spans


def decode_file(path: Path) -> list[Span]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PayloadError(f"cannot read: {exc.strerror or exc}") from None
    return decode_bytes(data)
