"""Every input format decodes to the same spans the in-process exporter sees."""

from __future__ import annotations

import gzip
import json

import pytest
from collector_fixtures import JAEGER_EXPORT, encode_otlp_json, encode_protobuf, record_run
from orchestrace_collector.decode import (
    PayloadError,
    decode_bytes,
    drop_invalid_spans,
    parse_otlp_json,
    parse_otlp_protobuf,
    received_spans,
    spans_from_request,
)
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.spans import Span


def _by_id(spans: list[Span]) -> dict[str, Span]:
    return {s.span_id: s for s in spans}


@pytest.fixture(scope="module")
def run() -> list:
    return record_run("decode-task", tools=2)


def test_protobuf_json_and_readable_spans_agree(run: list) -> None:
    direct = _by_id([span_from_readable(s) for s in run])
    from_protobuf = _by_id(spans_from_request(parse_otlp_protobuf(encode_protobuf(run))))
    from_json = _by_id(spans_from_request(parse_otlp_json(json.dumps(encode_otlp_json(run)))))
    assert direct.keys() == from_protobuf.keys() == from_json.keys()
    for span_id, span in direct.items():
        assert from_protobuf[span_id] == span
        assert from_json[span_id] == span
    roots = [s for s in direct.values() if s.parent_span_id is None]
    assert len(roots) == 1 and roots[0].attributes["orchestrace.task.id"] == "decode-task"
    tool = next(s for s in direct.values() if s.name == "execute_tool lookup1")
    assert tool.events[0].attributes == {"step": 1, "tags": ("a", "b")}
    assert tool.resource["service.name"] == "fixture-app"


def test_json_lines_and_gzip_dumps(run: list) -> None:
    line = json.dumps(encode_otlp_json(run))
    half = len(run) // 2
    two_lines = (
        json.dumps(encode_otlp_json(run[:half])) + "\n" + json.dumps(encode_otlp_json(run[half:])) + "\n"
    )
    assert len(decode_bytes(line.encode())) == len(run)
    assert {s.span_id for s in decode_bytes(two_lines.encode())} == {
        format(s.context.span_id, "016x") for s in run
    }
    assert len(decode_bytes(gzip.compress(encode_protobuf(run)))) == len(run)
    first, second = encode_protobuf(run[:half]), encode_protobuf(run[half:])
    delimited = b"".join(len(m).to_bytes(4, "big") + m for m in (first, second))
    assert len(decode_bytes(delimited)) == len(run)
    assert len(decode_bytes(json.dumps({"result": encode_otlp_json(run)}).encode())) == len(run)


def test_jaeger_export() -> None:
    spans = _by_id(decode_bytes(json.dumps(JAEGER_EXPORT).encode()))
    root, tool = spans["00f067aa0ba902b7"], spans["b7ad6b7169203331"]
    assert root.parent_span_id is None and tool.parent_span_id == root.span_id
    assert tool.start_ns == 1700000000001000 * 1000 and tool.end_ns == tool.start_ns + 2_000_000
    assert tool.attributes == {"gen_ai.tool.name": "search", "gen_ai.usage.input_tokens": 12}
    assert tool.status_code == 2
    assert tool.events[0].name == "orchestrace.stop" and tool.events[0].attributes == {
        "orchestrace.reason": "done"
    }
    assert tool.resource == {"host.name": "box", "service.name": "jaeger-app"}
    assert root.scope == "demo"


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff\xff\xff\xff garbage",
        b"{not json",
        b'{"hello": "world"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
        b'{"data": [{"spans": [{"traceID": "xyz"}]}]}',
    ],
)
def test_bad_dumps_raise_payload_error(payload: bytes) -> None:
    with pytest.raises(PayloadError):
        decode_bytes(payload)


def test_invalid_ids_are_dropped_and_counted(run: list) -> None:
    obj = encode_otlp_json(run)
    spans = obj["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = "abcdef"  # 3 bytes
    spans[1]["traceId"] = "00" * 16  # the invalid all-zero id
    request = parse_otlp_json(obj)
    rejected, reason = drop_invalid_spans(request)
    assert rejected == 2 and "span_id" in reason
    assert len(spans_from_request(request)) == len(run) - 2


def test_remembered_attributes_decode_alike_and_mutable_values_are_never_shared() -> None:
    """Attributes are parsed once per distinct encoding and remembered (``decode._decoded``): a span decoded
    from that memory equals one decoded fresh, and a map value (a dict) is a new one for every span."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from orchestrace_collector import decode

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for index in range(3):
        span = scope.spans.add(trace_id=b"\x01" * 16, span_id=bytes([index + 1]) * 8, name="s")
        values = (("text", "same"), ("count", 7), ("ratio", 0.5), ("flag", True), ("blob", b"\x00\x01"))
        for key, value in values:
            item = span.attributes.add(key=key)
            if isinstance(value, bool):
                item.value.bool_value = value
            elif isinstance(value, int):
                item.value.int_value = value
            elif isinstance(value, float):
                item.value.double_value = value
            elif isinstance(value, bytes):
                item.value.bytes_value = value
            else:
                item.value.string_value = value
        nested = span.attributes.add(key="map").value.kvlist_value.values.add(key="k")
        nested.value.string_value = "v"
        listed = span.attributes.add(key="list").value.array_value.values
        listed.add().string_value = "a"
        listed.add().int_value = 2
    data = request.SerializeToString()
    decode._decoded.clear()
    fresh = decode_bytes(data)
    remembered = decode_bytes(data)
    assert fresh == remembered
    first, second, _ = remembered
    assert first.attributes == {"text": "same", "count": 7, "ratio": 0.5, "flag": True, "blob": b"\x00\x01",
                                "map": {"k": "v"}, "list": ("a", 2)}
    assert list(first.attributes) == ["text", "count", "ratio", "flag", "blob", "map", "list"]
    first.attributes["map"]["k"] = "changed"
    assert second.attributes["map"] == {"k": "v"}


def test_an_attribute_that_is_not_a_key_value_fails_the_dump() -> None:
    """Attributes are parsed apart from their span: a malformed one is still a malformed export."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    span = scope.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    span.attributes.add(key="bad").value.string_value = "\u00e9"
    data = request.SerializeToString().replace("\u00e9".encode(), b"\xff\xfe")  # not UTF-8
    with pytest.raises(PayloadError, match="malformed OTLP protobuf"):
        decode_bytes(data)
    with pytest.raises(PayloadError, match="malformed OTLP protobuf"):
        parse_otlp_protobuf(data)


@pytest.mark.parametrize("where", ["request", "attribute"])
def test_the_receivers_decoder_refuses_bytes_as_parsing_them_whole_does(where: str) -> None:
    """A protobuf request is parsed once, by the decoder (``received_spans``): what it refuses, and the
    error the sender reads (400), are those of parsing the request whole."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    span = scope.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    span.attributes.add(key="k").value.string_value = "\u00e9"
    data = request.SerializeToString()
    data = data[:-3] if where == "request" else data.replace("\u00e9".encode(), b"\xff\xfe")
    with pytest.raises(PayloadError) as whole:
        parse_otlp_protobuf(data)
    with pytest.raises(PayloadError) as decoded:
        received_spans(data)
    assert str(decoded.value) == str(whole.value)
