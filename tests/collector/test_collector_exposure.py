"""Exposing the collector: bearer token (HTTP and gRPC, from ``ot.configure(headers=...)`` and from
``OTEL_EXPORTER_OTLP_HEADERS``), TLS with the real OTLP exporters, the loopback ``Host`` check, and clear
errors for an unauthenticated non-loopback bind or a busy port."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import psutil
import pytest
from collector_fixtures import (
    RunningCollector,
    encode_protobuf,
    free_port,
    record_run,
    start_collector,
    validate_trace_dir,
)
from fault_support import PeakRss, Sent, record_fault
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace import semconv as sc
from orchestrace.exporters import create_exporter
from orchestrace_collector.forward import Forwarder
from orchestrace_collector.output import latest_traces

TOKEN = "s3cret-token-for-tests"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrace_collector.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_non_loopback_without_token_is_refused(tmp_path: Path) -> None:
    # Refused before anything is bound (this test never listens beyond loopback).
    result = _cli("collect", "--out", str(tmp_path / "out"), "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 1
    assert "not loopback" in result.stderr and "--insecure-no-auth" in result.stderr
    assert "Traceback" not in result.stderr


def test_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _cli(
            "collect", "--out", str(tmp_path / "out"), "--port", str(port), "--grpc-port", str(free_port())
        )
    assert result.returncode == 1
    assert "cannot bind HTTP port" in result.stderr and "collector ready" not in result.stderr
    assert "Traceback" not in result.stderr
    invalid = _cli("collect", "--out", str(tmp_path / "out"), "--port", "70000")
    assert invalid.returncode == 2 and "65535" in invalid.stderr


def test_token_required_on_http_and_grpc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    collector = start_collector(tmp_path / "out", "--quiet-period", "0.2", "--token-file", str(token_file))
    runs = {name: record_run(name) for name in ("tok-http", "tok-grpc", "tok-env", "tok-none")}
    try:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        # What ot.configure(exporter=..., endpoint=..., headers=...) installs.
        http = create_exporter("otlp-http", collector.base_url, bearer)
        assert http is not None and http.export(runs["tok-http"]) == SpanExportResult.SUCCESS
        grpc_exporter = create_exporter("otlp-grpc", f"http://{collector.grpc_endpoint}", bearer)
        assert grpc_exporter is not None
        assert grpc_exporter.export(runs["tok-grpc"]) == SpanExportResult.SUCCESS
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer {TOKEN}")
        from_env = create_exporter("otlp-http", collector.base_url)
        assert from_env is not None and from_env.export(runs["tok-env"]) == SpanExportResult.SUCCESS
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_HEADERS")

        body = encode_protobuf(runs["tok-none"])
        assert httpx.post(collector.http_endpoint, content=body, headers=PROTOBUF).status_code == 401
        wrong = {**PROTOBUF, "Authorization": "Bearer nope"}
        assert httpx.post(collector.http_endpoint, content=body, headers=wrong).status_code == 401
        channel = grpc.insecure_channel(collector.grpc_endpoint)
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.RpcError) as refused:
            export(body, timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        channel.close()
    finally:
        assert collector.stop() == 0
    tasks = {t["task_id"] for t in validate_trace_dir(collector.out).values()}
    assert tasks == {"tok-http", "tok-grpc", "tok-env"}, "only authenticated spans are written"


def test_loopback_host_header_check(collector: object) -> None:
    from collector_fixtures import RunningCollector

    assert isinstance(collector, RunningCollector)
    body = encode_protobuf(record_run("host-check"))
    rebound = {**PROTOBUF, "Host": f"attacker.example:{collector.port}"}
    assert httpx.post(collector.http_endpoint, content=body, headers=rebound).status_code == 403
    for host in ("localhost", "LOCALHOST", "127.0.0.1", "[::1]"):  # host names compare case-insensitively
        named = {**PROTOBUF, "Host": f"{host}:{collector.port}"}
        assert httpx.post(collector.http_endpoint, content=body, headers=named).status_code == 200


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_on_both_receivers_with_the_real_exporters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets these variables override the exporter's own certificate_file.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert, key = _self_signed(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    collector = start_collector(
        tmp_path / "out",
        "--quiet-period",
        "0.2",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--token-file",
        str(token_file),
        tls_ca=cert,
    )
    headers = {"authorization": f"Bearer {TOKEN}"}
    try:
        http = HttpExporter(endpoint=collector.http_endpoint, certificate_file=str(cert), headers=headers)
        assert http.export(record_run("tls-http")) == SpanExportResult.SUCCESS
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        over_grpc = GrpcExporter(endpoint=collector.grpc_endpoint, credentials=credentials, headers=headers)
        assert over_grpc.export(record_run("tls-grpc")) == SpanExportResult.SUCCESS
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not served on the TLS port
            httpx.post(
                f"http://127.0.0.1:{collector.port}/v1/traces", content=b"", headers=PROTOBUF, timeout=5
            )
    finally:
        assert collector.stop() == 0
    tasks = {t["task_id"] for t in validate_trace_dir(collector.out).values()}
    assert tasks == {"tls-http", "tls-grpc"}
    record_fault(
        "auth + TLS: the real OTLP exporters (HTTP, gRPC) with a token over TLS; plain HTTP refused",
        Sent(sent=3, acked={"tls-http": 4, "tls-grpc": 4}),
        8,
        0,
    )


def test_forward_to_a_collector_that_requires_a_token_over_tls(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    target = start_collector(
        tmp_path / "target", "--quiet-period", "0.2", "--tls-cert", str(cert), "--tls-key", str(key),
        "--token-file", str(token_file), tls_ca=cert,
    )
    front = start_collector(
        tmp_path / "front", "--quiet-period", "0.2", "--forward", target.base_url,
        "--forward-token-file", str(token_file), "--forward-ca-file", str(cert),
        "--forward-headers", "x-tenant=rollouts%20a",
    )
    runs = {f"fw-auth-{i}": record_run(f"fw-auth-{i}") for i in range(3)}
    rss = PeakRss(front.process.pid)
    try:
        for spans in runs.values():
            body = encode_protobuf(spans)
            assert httpx.post(front.http_endpoint, content=body, headers=PROTOBUF).status_code == 200
        assert front.stop() == 0
        peak = rss.stop()
        # Without the token the same target refuses the batch (401: counted, never retried).
        without = Forwarder(target.base_url, verify=ssl.create_default_context(cafile=str(cert)))
        without.submit(encode_protobuf(record_run("fw-no-token")), PROTOBUF["Content-Type"])
        without.close(timeout_s=30)
        assert without.rejected == 1 and without.sent == 0
    finally:
        front.stop()
        assert target.stop() == 0
    assert "forwarded 3, dropped 0, rejected 0" in front.log_text()
    written = {t["task_id"]: t["metrics"]["spans"] for t in validate_trace_dir(target.out).values()}
    assert written == {task: len(spans) for task, spans in runs.items()}
    record_fault(
        "forward to a collector requiring a token over TLS (--forward-token-file, --forward-ca-file); "
        "a forwarder without the token refused (401)",
        Sent(sent=4, acked={task: len(spans) for task, spans in runs.items()}),
        sum(written.values()),
        peak,
    )


def _same_trace(body: bytes, trace_id: bytes) -> bytes:
    """``body`` (an OTLP request) with every span moved into the trace ``trace_id`` under new span ids."""
    import os

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                span.trace_id = trace_id
                span.span_id = os.urandom(8)
    return request.SerializeToString()


def test_named_senders_cannot_write_into_each_others_episodes(tmp_path: Path) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text("alice:alice-token-1\nmallory:mallory-token-2\ngrader:grader-token-3\n")
    args = ("--quiet-period", "0.2", "--token-file", str(token_file), "--annotator", "grader")
    collector = start_collector(tmp_path / "out", *args)
    as_ = {
        name: {**PROTOBUF, "Authorization": f"Bearer {name}-token-{n}"}
        for n, name in enumerate(("alice", "mallory", "grader"), 1)
    }
    victim = record_run("victim", episode_id="victim-episode")
    trace_id = bytes.fromhex(format(victim[0].context.trace_id, "032x"))
    forged_late = _same_trace(encode_protobuf(record_run("forged-late")), trace_id)
    forged_episode = encode_protobuf(record_run("forged-episode", episode_id="victim-episode"))
    try:
        url = collector.http_endpoint
        assert httpx.post(url, content=encode_protobuf(victim), headers=as_["alice"]).status_code == 200
        for body in (forged_late, forged_episode):  # the same trace id; another trace naming the episode
            refused = httpx.post(url, content=body, headers=as_["mallory"])
            assert refused.status_code == 403 and b"another sender" in refused.content
        channel = grpc.insecure_channel(collector.grpc_endpoint)
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        mallory = (("authorization", "Bearer mallory-token-2"),)
        with pytest.raises(grpc.RpcError) as denied:
            export(forged_late, metadata=mallory, timeout=10)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert export(encode_protobuf(record_run("own")), metadata=mallory, timeout=10) is not None
        channel.close()
    finally:
        assert collector.stop() == 0
    assert "12 spans refused as another sender's episode" in collector.log_text()  # 4 + 4 + 4
    restarted = start_collector(tmp_path / "out", *args)  # owners are kept across a restart
    try:
        url = restarted.http_endpoint
        assert httpx.post(url, content=forged_late, headers=as_["mallory"]).status_code == 403
        graded = _same_trace(encode_protobuf(record_run("grade")[:1]), trace_id)
        assert httpx.post(url, content=graded, headers=as_["grader"]).status_code == 200
    finally:
        assert restarted.stop() == 0
    traces = validate_trace_dir(restarted.out)
    assert {t["task_id"] for t in traces.values()} == {"victim", "own"}
    written = next(t for t in traces.values() if t["task_id"] == "victim")
    assert written["metrics"]["spans"] == len(victim) + 1, "alice's spans and the grader's, no one else's"


def _rewarded_run(task: str, team: float, episode_id: str | None = None) -> list[Any]:
    """A run whose workflow records a team reward (the SDK's ``gen_ai.evaluation.result`` event)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("rewarded")
    root: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.ORCH_TASK_ID: task}
    if episode_id is not None:
        root[sc.ORCH_EPISODE_ID] = episode_id
    agent = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "worker"}
    with tracer.start_as_current_span("workflow", attributes=root) as span:
        with tracer.start_as_current_span("agent", attributes=agent):
            pass
        reward = {sc.GEN_AI_EVALUATION_NAME: "team", sc.GEN_AI_EVALUATION_SCORE_VALUE: team}
        span.add_event(sc.EVENT_EVALUATION_RESULT, reward)
    provider.shutdown()
    return list(memory.get_finished_spans())


def _with_reward(body: bytes, team: float) -> bytes:
    """``body`` with every recorded reward changed to ``team``: the same span ids, other content."""
    request = ExportTraceServiceRequest.FromString(body)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                for event in span.events:
                    for attribute in event.attributes:
                        if attribute.key == sc.GEN_AI_EVALUATION_SCORE_VALUE:
                            attribute.value.double_value = team
    return request.SerializeToString()


def test_a_second_named_sender_cannot_poison_a_written_episodes_reward(tmp_path: Path) -> None:
    """The victim's episode is written with its reward; another named sender then forges late spans for it
    carrying another reward: in its trace, naming its episode id, and as its own span ids with other
    content, over HTTP and gRPC. All refused and counted; the victim's trace keeps its reward and revision."""
    token_file = tmp_path / "tokens"
    token_file.write_text("alice:alice-token-1\nmallory:mallory-token-2\n")
    collector = start_collector(tmp_path / "out", "--quiet-period", "0.2", "--token-file", str(token_file))
    rss = PeakRss(collector.process.pid)
    alice = {**PROTOBUF, "Authorization": "Bearer alice-token-1"}
    mallory = {**PROTOBUF, "Authorization": "Bearer mallory-token-2"}
    victim = _rewarded_run("victim", 1.0, episode_id="victim-episode")
    victim_body = encode_protobuf(victim)
    trace_id = bytes.fromhex(format(victim[0].context.trace_id, "032x"))
    forgeries = [
        _same_trace(encode_protobuf(_rewarded_run("forged-late", -5.0)), trace_id),
        encode_protobuf(_rewarded_run("forged-episode", -5.0, episode_id="victim-episode")),
        _with_reward(victim_body, -5.0),
    ]
    sent = Sent()
    forbidden = 0
    try:
        with httpx.Client() as client:
            sent.sent += 1
            assert client.post(collector.http_endpoint, content=victim_body, headers=alice).status_code == 200
            sent.acked["victim"] = len(victim)
            deadline = time.monotonic() + 20
            while not latest_traces([collector.out]) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert latest_traces([collector.out]), "the victim's episode was not written"
            for body in forgeries:
                refused = client.post(collector.http_endpoint, content=body, headers=mallory)
                sent.sent += 1
                assert refused.status_code == 403 and b"another sender" in refused.content
                forbidden += 1
        channel = grpc.insecure_channel(collector.grpc_endpoint)
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        for body in forgeries:
            sent.sent += 1
            with pytest.raises(grpc.RpcError) as denied:
                export(body, metadata=(("authorization", "Bearer mallory-token-2"),), timeout=10)
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
            forbidden += 1
        channel.close()
        time.sleep(0.5)  # a quiet period: anything accepted would be written now
    finally:
        assert collector.stop() == 0
    peak = rss.stop()
    forged_spans = 2 * sum(len(ExportTraceServiceRequest.FromString(b).resource_spans[0].scope_spans[0].spans)
                           for b in forgeries)
    assert f"{forged_spans} spans refused as another sender's episode" in collector.log_text()
    traces = validate_trace_dir(collector.out)
    (written,) = traces.values()
    assert written["task_id"] == "victim" and written["rewards"]["team"] == 1.0
    assert written["metrics"]["revision"] == 0 and written["metrics"]["spans"] == len(victim)
    record_fault(
        f"named-sender poisoning: a second sender forges late spans with reward -5 for a written episode "
        f"(its trace id, its episode id, its span ids; HTTP and gRPC): {forbidden} requests refused "
        f"(403 / PERMISSION_DENIED, {forged_spans} spans counted), the victim's team reward still 1.0",
        sent, written["metrics"]["spans"], peak,
    )

def test_token_file_forms_and_their_errors(tmp_path: Path) -> None:
    from orchestrace_collector.senders import ANY_SENDER, TokenFileError, parse_tokens

    assert parse_tokens("  one-token-alone \n") == {ANY_SENDER: "one-token-alone"}
    assert parse_tokens("# ops\nalice:a1\n\nbob:b2\n") == {"alice": "a1", "bob": "b2"}
    for text, error in (
        ("", "no token"),
        ("alice:a1\njust-a-token\n", "line 2: expected name:token"),
        ("alice:a1\nalice:a2\n", "named twice"),
        ("alice:a1\nbob:a1\n", "the same token"),
    ):
        with pytest.raises(TokenFileError, match=error):
            parse_tokens(text)
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:a1\nbob:b2\n")
    out = str(tmp_path / "out")
    result = _cli("collect", "--out", out, "--token-file", str(tokens), "--annotator", "zed")
    assert result.returncode != 0 and "--annotator 'zed' is no sender of --token-file" in result.stderr
    assert not (tmp_path / "out").exists()


def _open_connections(collector: RunningCollector) -> int:
    """The collector's connections on its HTTP port (as the collector's own process sees them)."""
    return sum(1 for conn in psutil.Process(collector.process.pid).net_connections()
               if conn.laddr and conn.laddr.port == collector.port and conn.status != psutil.CONN_LISTEN)


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_stalled_body_or_header_is_closed_at_its_timeout(tmp_path: Path, tls: bool) -> None:
    """A client that stops half way through its request body gets 408 and the collector drops the
    connection at ``--body-timeout`` (over TLS too, where a close used to wait 30 s for the client's
    close_notify); one that stops half way through its headers is dropped at ``--header-timeout``."""
    cert, key = _self_signed(tmp_path)
    tls_args = ("--tls-cert", str(cert), "--tls-key", str(key)) if tls else ()
    collector = start_collector(tmp_path / "out", "--body-timeout", "1", "--header-timeout", "2", *tls_args,
                                tls_ca=cert if tls else None)
    context = ssl.create_default_context(cafile=str(cert))

    def connect() -> socket.socket:
        raw = socket.create_connection(("127.0.0.1", collector.port))
        return context.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw

    try:
        stalled_body, stalled_header = connect(), connect()
        stalled_body.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n12345")
        stalled_header.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        time.sleep(0.5)
        assert _open_connections(collector) == 2
        stalled_body.settimeout(5)
        assert stalled_body.recv(1000).startswith(b"HTTP/1.1 408 ")
        while _open_connections(collector) == 2 and time.monotonic() - started < 10:
            time.sleep(0.05)
        body_closed = time.monotonic() - started
        while _open_connections(collector) == 1 and time.monotonic() - started < 10:
            time.sleep(0.05)
        header_closed = time.monotonic() - started
        assert _open_connections(collector) == 0
        assert 0.9 < body_closed < 1.8, f"stalled body closed after {body_closed:.1f} s"
        assert 1.9 < header_closed < 3.0, f"stalled header closed after {header_closed:.1f} s"
        stalled_body.close()
        stalled_header.close()
    finally:
        assert collector.stop() == 0


def test_grpc_authority_is_checked_on_loopback(collector: object) -> None:
    from collector_fixtures import RunningCollector

    assert isinstance(collector, RunningCollector)
    body = encode_protobuf(record_run("authority-check"))
    for authority, allowed in (("attacker.example:4317", False), ("LOCALHOST:4317", True), (None, True)):
        options = [("grpc.default_authority", authority)] if authority else []
        channel = grpc.insecure_channel(collector.grpc_endpoint, options=options)
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            if allowed:
                export(body, timeout=10)
            else:
                with pytest.raises(grpc.RpcError) as refused:
                    export(body, timeout=10)
                assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        finally:
            channel.close()
