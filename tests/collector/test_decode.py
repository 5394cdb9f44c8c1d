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
