"""OTLP/gRPC against a real ``orchestrace collect`` subprocess."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from collector_fixtures import (
    RunningCollector,
    encode_otlp_json,
    record_run,
    start_collector,
    validate_trace_dir,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.sdk.trace.export import SpanExportResult
from orchestrace_collector.decode import parse_otlp_json


def test_sdk_grpc_exporter_with_and_without_gzip(collector: RunningCollector) -> None:
    plain, gzipped = record_run("grpc-plain"), record_run("grpc-gzip", tools=1)
    assert (
        OTLPSpanExporter(endpoint=collector.grpc_endpoint, insecure=True).export(plain)
        == SpanExportResult.SUCCESS
    )
    exporter = OTLPSpanExporter(
        endpoint=collector.grpc_endpoint, insecure=True, compression=grpc.Compression.Gzip
    )
    assert exporter.export(gzipped) == SpanExportResult.SUCCESS
    assert collector.stop() == 0
    traces = {t["task_id"]: t for t in validate_trace_dir(collector.out).values()}
    assert traces["grpc-plain"]["metrics"]["spans"] == len(plain)
    assert traces["grpc-gzip"]["metrics"]["spans"] == len(gzipped)


def test_partial_success_and_malformed_message(collector: RunningCollector) -> None:
    obj = encode_otlp_json(record_run("grpc-partial"))
    obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "abcd"
    with grpc.insecure_channel(collector.grpc_endpoint) as channel:
        stub = TraceServiceStub(channel)
        answer = stub.Export(parse_otlp_json(obj), timeout=10)
        assert answer.partial_success.rejected_spans == 1
        malformed = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=None,
            response_deserializer=None,
        )
        with pytest.raises(grpc.RpcError) as info:
            malformed(b"\x0a\xff\xff\xff\xff\x0f", timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # as OTLP asks (never INTERNAL)
        assert "ExportTraceServiceRequest" in str(info.value.details())
        again = stub.Export(encode_spans(record_run("grpc-after")), timeout=10)
        assert not again.HasField("partial_success")


def test_overload_is_unavailable(tmp_path: Path) -> None:
    running = start_collector(tmp_path / "out", "--max-queued-batches", "0")
    try:
        with grpc.insecure_channel(running.grpc_endpoint) as channel, pytest.raises(grpc.RpcError) as info:
            TraceServiceStub(channel).Export(encode_spans(record_run("busy")), timeout=10)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        assert running.stop() == 0


def test_pressure_is_unavailable_with_retry_info_on_grpc_and_503_on_http(tmp_path: Path) -> None:
    import httpx
    from google.rpc.error_details_pb2 import RetryInfo

    # A queue bound of 0: every batch finds the collector "busy", the answer a loaded collector gives.
    collector = start_collector(tmp_path / "out", "--max-queued-batches", "0")
    try:
        stub = TraceServiceStub(grpc.insecure_channel(collector.grpc_endpoint))
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(encode_spans(record_run("busy-grpc")), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        trailers = dict(refused.value.trailing_metadata())
        retry = RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert retry.retry_delay.seconds >= 1
        response = httpx.post(
            collector.http_endpoint,
            content=encode_spans(record_run("busy-http")).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
        )
        assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
        assert httpx.get(f"{collector.base_url}/healthz").status_code == 200, "busy is not unhealthy"
    finally:
        assert collector.stop() == 0
