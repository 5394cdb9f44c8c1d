"""Helpers behind the shared fixtures in ``conftest.py``: a real ``orchestrace collect`` subprocess, and
validation of a written output directory."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from orchestrace_collector.output import iter_jsonl, jsonl_files, latest_traces
from orchestrace_collector.validate import content_problems, validate_trace


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningCollector:
    """An ``orchestrace collect`` subprocess on free loopback ports."""

    out: Path
    port: int
    grpc_port: int
    log: Path
    args: tuple[str, ...] = ()
    tls_ca: Path | None = None  # the collector serves TLS with a certificate this file verifies
    process: subprocess.Popen[bytes] = field(init=False)

    @property
    def http_endpoint(self) -> str:
        """The OTLP/HTTP traces URL (what ``OTLPSpanExporter(endpoint=...)`` of the http exporter takes)."""
        return f"{self.base_url}/v1/traces"

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls_ca else 'http'}://127.0.0.1:{self.port}"

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """httpx's ``verify`` for this collector."""
        return ssl.create_default_context(cafile=str(self.tls_ca)) if self.tls_ca else True

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout_s: float = 60.0) -> RunningCollector:
        command = [
            sys.executable,
            "-m",
            "orchestrace_collector.cli",
            "collect",
            "--out",
            str(self.out),
            "--port",
            str(self.port),
            "--grpc-port",
            str(self.grpc_port),
            *self.args,
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"collector exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=0.5, verify=self.verify).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.process.kill()
        raise RuntimeError(f"collector not ready after {timeout_s} s:\n{self.log_text()}")

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (the collector writes every open trace first) and wait. Returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL: no flush, no cleanup (the crash the write-ahead log is for)."""
        self.process.kill()
        self.process.wait()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def run_into_collector(collector: RunningCollector, exporter: str, program: str, *args: str) -> None:
    """Run ``program`` (``python -c``) with an ``otlp`` / ``otlp-grpc`` exporter name and the collector's
    endpoint as its first arguments, then stop the collector so that everything is written."""
    endpoint = collector.base_url if exporter == "otlp" else f"http://{collector.grpc_endpoint}"
    done = subprocess.run([sys.executable, "-c", program, exporter, endpoint, *args], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert collector.stop() == 0


def start_collector(out: Path, *args: str, tls_ca: Path | None = None) -> RunningCollector:
    out.mkdir(parents=True, exist_ok=True)
    attempts = 3
    while True:
        collector = RunningCollector(
            out=out,
            port=free_port(),
            grpc_port=free_port(),
            log=out.parent / f"{out.name}-collector.log",
            args=args,
            tls_ca=tls_ca,
        )
        try:
            return collector.start()
        except RuntimeError as error:
            # A port free_port() found can be taken before the collector binds it (by a test on another
            # pytest-xdist worker, or any outgoing connection's ephemeral port): new ports, not a failure.
            attempts -= 1
            if attempts == 0 or "cannot bind" not in str(error):
                raise


def validate_trace_dir(path: Path) -> dict[str, dict[str, Any]]:
    """Assert that every trace line (every revision) under ``path`` validates and every content file hashes
    to its name; return the last revisions."""
    files = jsonl_files([path])
    assert files, f"no traces*.jsonl in {path}"
    problems: list[str] = list(content_problems(path)) if path.is_dir() else []
    for file, number, obj in iter_jsonl(files):
        errors = [f"not JSON: {obj}"] if isinstance(obj, Exception) else validate_trace(obj)
        problems.extend(f"{file.name}:{number}: {error}" for error in errors)
    assert not problems, "invalid traces:\n" + "\n".join(problems[:20])
    return latest_traces([path])


# --- spans from the real OpenTelemetry SDK ------------------------------------------------------------------


def record_run(task_id: str, *, tools: int = 2, episode_id: str | None = None) -> list[Any]:
    """One small orchestration run (workflow > agent > tools) recorded by the real SDK: ReadableSpans."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from orchestrace import semconv as sc

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "fixture-app"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("fixture")
    root_attrs: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.ORCH_TASK_ID: task_id}
    if episode_id:
        root_attrs[sc.ORCH_EPISODE_ID] = episode_id
    with (
        tracer.start_as_current_span("invoke_workflow fixture", attributes=root_attrs),
        tracer.start_as_current_span(
            "invoke_agent worker",
            attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "worker"},
        ),
    ):
        for index in range(tools):
            with tracer.start_as_current_span(
                f"execute_tool lookup{index}",
                attributes={
                    sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                    sc.GEN_AI_TOOL_NAME: f"lookup{index}",
                },
            ) as span:
                span.add_event("progress", {"step": index, "tags": ("a", "b")})
    provider.shutdown()
    return list(memory.get_finished_spans())


def record_handover(links: int = 1, typed: bool = False) -> list[Any]:
    """A message-passing runtime's run, recorded by the real SDK: the ``lead`` agent publishes a message (a
    producer span) and the runtime processes it in a trace of its own whose root links to that span, where
    the ``worker`` agent runs; ``links`` 2: the root also links into a third trace (a batch's); ``typed``:
    its link is typed as orchestrace's own (``orchestrace.link.type``). ReadableSpans, in the order they
    ended (the worker's before the lead's: it ran while the lead waited)."""
    from opentelemetry import context as otel_context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, SpanKind
    from orchestrace import semconv as sc

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("runtime")

    def agent(name: str) -> Any:
        attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: name}
        return tracer.start_as_current_span(f"invoke_agent {name}", attributes=attrs)

    with tracer.start_as_current_span("batch") as other:
        pass
    with agent("lead"), tracer.start_as_current_span("publish worker", kind=SpanKind.PRODUCER) as sent:
        attrs = {sc.ORCH_LINK_TYPE: sc.LINK_RESUME_OF} if typed else None
        to = [Link(sent.get_span_context(), attrs)] + [Link(other.get_span_context())] * (links - 1)
        with tracer.start_as_current_span("process worker", context=otel_context.Context(), links=to,
                                          kind=SpanKind.CONSUMER), agent("worker"):
            pass
    return list(memory.get_finished_spans())[1:]  # the batch's trace itself is not part of the run


def encode_protobuf(spans: list[Any]) -> bytes:
    """The exact bytes the SDK's OTLP exporters send."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return bytes(encode_spans(spans).SerializeToString())


def encode_otlp_json(spans: list[Any]) -> dict[str, Any]:
    """OTLP-JSON as the spec (and the OpenTelemetry Collector's file exporter) writes it: hex ids."""
    import base64

    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    obj: dict[str, Any] = json_format.MessageToDict(encode_spans(spans))
    for resource_spans in obj["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for item in (span, *span.get("links", [])):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in item:
                            item[key] = base64.b64decode(item[key]).hex()
    return obj


#: A Jaeger UI / query API export (``{"data": [trace]}``) of a two-span run.
JAEGER_EXPORT = {
    "data": [
        {
            "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
            "spans": [
                {
                    "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
                    "spanID": "00f067aa0ba902b7",
                    "operationName": "invoke_workflow demo",
                    "references": [],
                    "startTime": 1700000000000000,
                    "duration": 5000,
                    "tags": [
                        {"key": "gen_ai.operation.name", "type": "string", "value": "invoke_workflow"},
                        {"key": "span.kind", "type": "string", "value": "internal"},
                        {"key": "otel.scope.name", "type": "string", "value": "demo"},
                    ],
                    "logs": [],
                    "processID": "p1",
                },
                {
                    "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
                    "spanID": "b7ad6b7169203331",
                    "operationName": "execute_tool search",
                    "references": [
                        {
                            "refType": "CHILD_OF",
                            "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
                            "spanID": "00f067aa0ba902b7",
                        }
                    ],
                    "startTime": 1700000000001000,
                    "duration": 2000,
                    "tags": [
                        {"key": "gen_ai.tool.name", "type": "string", "value": "search"},
                        {"key": "gen_ai.usage.input_tokens", "type": "int64", "value": 12},
                        {"key": "otel.status_code", "type": "string", "value": "ERROR"},
                    ],
                    "logs": [
                        {
                            "timestamp": 1700000000002000,
                            "fields": [
                                {"key": "event", "type": "string", "value": "orchestrace.stop"},
                                {"key": "orchestrace.reason", "type": "string", "value": "done"},
                            ],
                        }
                    ],
                    "processID": "p1",
                },
            ],
            "processes": {
                "p1": {
                    "serviceName": "jaeger-app",
                    "tags": [{"key": "host.name", "type": "string", "value": "box"}],
                }
            },
        }
    ]
}
