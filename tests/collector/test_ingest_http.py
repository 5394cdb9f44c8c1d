"""OTLP/HTTP against a real ``orchestrace collect`` subprocess: the SDK's exporter, JSON, gzip, and bad
input."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import httpx
import pytest
from collector_fixtures import (
    RunningCollector,
    encode_otlp_json,
    encode_protobuf,
    record_run,
    start_collector,
    validate_trace_dir,
)
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace.export import SpanExportResult
from orchestrace_collector.http_server import HttpLimits, make_server
from starlette.applications import Starlette
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


def by_task(out: Path) -> dict[str, dict]:
    return {t["task_id"]: t for t in validate_trace_dir(out).values()}


def test_sdk_http_exporter_protobuf_and_gzip(collector: RunningCollector) -> None:
    plain, gzipped = record_run("http-plain", tools=2), record_run("http-gzip", tools=3)
    assert OTLPSpanExporter(endpoint=collector.http_endpoint).export(plain) == SpanExportResult.SUCCESS
    exporter = OTLPSpanExporter(endpoint=collector.http_endpoint, compression=Compression.Gzip)
    assert exporter.export(gzipped) == SpanExportResult.SUCCESS
    assert collector.stop() == 0
    traces = by_task(collector.out)
    assert traces["http-plain"]["metrics"]["spans"] == len(plain)
    assert traces["http-gzip"]["metrics"]["spans"] == len(gzipped)
    assert sum(e["type"] == "tool_call" for e in traces["http-gzip"]["events"]) == 3


def test_otlp_json_with_hex_ids(collector: RunningCollector) -> None:
    spans = record_run("http-json")
    response = httpx.post(collector.http_endpoint, content=json.dumps(encode_otlp_json(spans)), headers=JSON)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    assert response.json() == {}
    assert collector.stop() == 0
    assert by_task(collector.out)["http-json"]["metrics"]["spans"] == len(spans)


def test_invalid_spans_are_a_partial_success(collector: RunningCollector) -> None:
    spans = record_run("http-partial", tools=2)
    obj = encode_otlp_json(spans)
    tool = next(
        s for s in obj["resourceSpans"][0]["scopeSpans"][0]["spans"] if s["name"].startswith("execute_tool")
    )
    tool["spanId"] = "abcdef"  # 3 bytes: invalid
    response = httpx.post(collector.http_endpoint, content=json.dumps(obj), headers=JSON)
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "span_id" in partial["errorMessage"]

    protobuf_spans = record_run("http-partial-pb")
    request_obj = encode_otlp_json(protobuf_spans)
    request_obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "ab" * 8  # 8 bytes: invalid
    from orchestrace_collector.decode import parse_otlp_json

    body = parse_otlp_json(request_obj).SerializeToString()
    response = httpx.post(collector.http_endpoint, content=body, headers=PROTOBUF)
    answer = ExportTraceServiceResponse.FromString(response.content)
    assert response.status_code == 200 and answer.partial_success.rejected_spans == 1
    assert collector.stop() == 0
    assert by_task(collector.out)["http-partial"]["metrics"]["spans"] == len(spans) - 1


def _deep_json() -> bytes:
    value = '{"stringValue": "x"}'
    for _ in range(5000):
        value = '{"kvlistValue": {"values": [{"key": "k", "value": ' + value + "}]}}"
    span = (
        '{"traceId": "' + "ab" * 16 + '", "spanId": "' + "cd" * 8 + '", "name": "deep", '
        '"attributes": [{"key": "a", "value": ' + value + "}]}"
    )
    return ('{"resourceSpans": [{"scopeSpans": [{"spans": [' + span + "]}]}]}").encode()


def _deep_protobuf() -> bytes:
    """Attributes nested 300 kvlists deep, encoded by hand: protobuf refuses to build (or parse) it."""

    def field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    value = field(1, b"x")  # AnyValue.string_value
    for _ in range(300):
        key_value = field(1, b"k") + field(2, value)  # KeyValue.key, KeyValue.value
        value = field(6, field(1, key_value))  # AnyValue.kvlist_value.values
    span = Span(trace_id=b"\1" * 16, span_id=b"\2" * 8, name="deep").SerializeToString()
    span += field(9, field(1, b"a") + field(2, value))  # Span.attributes
    return field(1, field(2, field(2, span)))  # request.resource_spans.scope_spans.spans


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


BAD_REQUESTS = {
    "malformed protobuf": (b"\x0a\xff\xff\xff\xff\x0f", PROTOBUF, 400),
    "malformed json": (b'{"resourceSpans": [', JSON, 400),
    "json of the wrong shape": (b'{"resourceSpans": 7}', JSON, 400),
    "brackets nested 100000 deep": (b"[" * 100_000 + b"]" * 100_000, JSON, 400),
    "attributes nested 5000 deep": (_deep_json(), JSON, 400),
    "protobuf attributes nested 300 deep": (_deep_protobuf(), PROTOBUF, 400),
    "wrong content type": (b"hello", {"Content-Type": "text/plain"}, 415),
    "no content type": (b"hello", {}, 415),
    "unknown encoding": (b"hello", {**PROTOBUF, "Content-Encoding": "br"}, 415),
    "corrupt gzip": (b"\x1f\x8bnot really gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, 400),
    "oversized body": (b"\0" * (2 << 20), PROTOBUF, 413),
    "gzip bomb": (
        gzip.compress(b"\0" * (64 << 20), compresslevel=9),
        {**PROTOBUF, "Content-Encoding": "gzip"},
        413,
    ),
}


@pytest.fixture(scope="module")
def small_limit_collector(tmp_path_factory: pytest.TempPathFactory) -> RunningCollector:
    running = start_collector(tmp_path_factory.mktemp("limits") / "out", "--max-body-mb", "1")
    yield running  # type: ignore[misc]
    running.stop()


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_input_is_4xx_and_the_collector_keeps_serving(
    small_limit_collector: RunningCollector, case: str
) -> None:
    body, headers, status = BAD_REQUESTS[case]
    response = httpx.post(small_limit_collector.http_endpoint, content=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text
    if status == 400 and headers.get("Content-Type") == PROTOBUF["Content-Type"]:
        assert Status.FromString(response.content).message
    elif status == 400:
        assert response.json()["message"]
    good = httpx.post(
        small_limit_collector.http_endpoint,
        content=encode_protobuf(record_run(f"after-{case}")),
        headers=PROTOBUF,
    )
    assert good.status_code == 200


def test_overload_answers_503_with_retry_after(tmp_path: Path) -> None:
    running = start_collector(tmp_path / "out", "--max-queued-batches", "0")
    try:
        response = httpx.post(
            running.http_endpoint, content=encode_protobuf(record_run("busy")), headers=PROTOBUF
        )
        assert response.status_code == 503
        assert int(response.headers["Retry-After"]) >= 1
    finally:
        assert running.stop() == 0


def test_healthz_says_what_fails_and_where_only_to_a_sender_with_the_token(tmp_path: Path) -> None:
    import time

    out = tmp_path / "out"
    (out / "traces-00000.jsonl").mkdir(parents=True)  # the traces file cannot be opened: a real OSError
    token = tmp_path / "token"
    token.write_text("health-token\n")
    running = start_collector(out, "--quiet-period", "0.1", "--token-file", str(token))
    bearer = {"Authorization": "Bearer health-token"}
    try:
        body = encode_protobuf(record_run("unwritable"))
        posted = httpx.post(running.http_endpoint, content=body, headers={**PROTOBUF, **bearer})
        assert posted.status_code == 200
        deadline = time.monotonic() + 20
        while (anyone := httpx.get(f"{running.base_url}/healthz")).status_code == 200:
            assert time.monotonic() < deadline, "the failing write never showed on /healthz"
            time.sleep(0.05)
        told = httpx.get(f"{running.base_url}/healthz", headers=bearer)
        assert anyone.status_code == told.status_code == 503
        assert "Is a directory" in anyone.text and str(out) not in anyone.text and "<path>" in anyone.text
        assert str(out / "traces-00000.jsonl") in told.text, "a sender with the token is told where"
    finally:
        (out / "traces-00000.jsonl").rmdir()  # the write works again: the episode is kept and written
        assert running.stop() == 0


def test_the_server_parses_http_in_c_on_uvloop() -> None:
    """httptools and uvloop halve the event loop's CPU per request against h11 and asyncio's loop (the
    guards the other tests check run on them)."""
    config = make_server(Starlette(), HttpLimits()).config
    assert isinstance(config.http, type) and issubclass(config.http, HttpToolsProtocol)
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.split(".")[0] == ("asyncio" if sys.platform == "win32" else "uvloop")
    finally:
        loop.close()
