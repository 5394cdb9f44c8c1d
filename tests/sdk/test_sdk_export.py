"""``ot.configure``: exporters, environment variables, idempotency, the app's own provider, trace_dir, and
spans sent with the real OTLP/HTTP exporter to ``orchestrace collect`` on loopback."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orchestrace as ot
import pytest
from collector_fixtures import RunningCollector
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from orchestrace import semconv as sc
from orchestrace.config import set_config
from orchestrace_collector.decode import parse_otlp_json
from sdk_spans import new_provider


@pytest.fixture(autouse=True)
def _no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED",
                 "OTEL_EXPORTER_OTLP_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)


def _team(task_id: str) -> None:
    @ot.tool
    def lookup(topic: str) -> str:
        return f"facts about {topic}"

    @ot.agent(role="researcher")
    def researcher(topic: str) -> str:
        return lookup(topic)

    @ot.agent(role="orchestrator")
    def orchestrator() -> str:
        notes = [researcher(topic) for topic in ("a", "b")]
        with ot.aggregate(notes) as merge:
            merge.set_result(" / ".join(notes))
        ot.stop("enough")
        return "done"

    with ot.task(task_id, topology="star"):
        orchestrator()
        ot.reward(1.0, family="team")


def test_file_exporter_writes_otlp_json_lines(tmp_path: Path) -> None:
    out = tmp_path / "spans" / "trace.jsonl"
    handle = ot.configure(exporter=f"file:{out}", tracer_provider=new_provider(), batch=False)
    try:
        _team("file-task")
    finally:
        handle.shutdown()
    lines = out.read_text().splitlines()
    assert len(lines) == 7  # one request per span with batch=False
    spans = []
    for line in lines:
        request = json.loads(line)
        parse_otlp_json(line)  # the collector reads it
        spans.extend(request["resourceSpans"][0]["scopeSpans"][0]["spans"])
    by_name = {span["name"]: span for span in spans}
    aggregate = by_name["aggregate orchestrator"]
    assert len(aggregate["traceId"]) == 32 and int(aggregate["traceId"], 16)
    assert len(aggregate["spanId"]) == 16
    assert aggregate["parentSpanId"] == by_name["invoke_agent orchestrator"]["spanId"]
    linked = {link["spanId"] for link in aggregate["links"]}
    assert linked == {s["spanId"] for s in spans if s["name"] == "invoke_agent researcher"}
    assert by_name["invoke_agent orchestrator"]["kind"] == 1  # integer enums, as OTLP-JSON wants


def test_console_exporter_prints_spans(capsys: pytest.CaptureFixture[str]) -> None:
    handle = ot.configure(exporter="console", tracer_provider=new_provider(), batch=False)
    try:
        _team("console-task")
    finally:
        handle.shutdown()
    printed = capsys.readouterr().out
    assert '"name": "invoke_agent researcher"' in printed
    assert '"orchestrace.task.id": "console-task"' in printed


def test_exporters_from_env_and_none_and_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", f"memory,file:{tmp_path / 'x.jsonl'}")
    handle = ot.configure(tracer_provider=new_provider(), batch=False)
    try:
        _team("env-task")
        assert len(handle.get_finished_spans()) == 7
        assert (tmp_path / "x.jsonl").exists()
    finally:
        handle.shutdown()

    handle = ot.configure(exporter="none", tracer_provider=new_provider())
    _team("none-task")
    assert handle.get_finished_spans() == ()
    handle.shutdown()

    with caplog.at_level(logging.ERROR, logger="orchestrace"):
        handle = ot.configure(exporter=["bogus", "memory"], tracer_provider=new_provider())
    assert "unknown exporter 'bogus'" in caplog.text
    _team("bogus-task")
    assert len(handle.get_finished_spans()) == 7
    handle.shutdown()


def test_an_exporter_otel_cannot_create_is_left_out_and_the_others_get_the_spans(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        trace_dir_validator: Any) -> None:
    """A typo in an OTEL_EXPORTER_OTLP_* variable makes OTel's gRPC exporter raise as it is made (the HTTP
    one warns and goes on): that exporter is left out, logged; tracing, the other exporters and trace_dir
    work (before: no tracing at all)."""
    exporter = "otlp-grpc"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "five seconds")
    with caplog.at_level(logging.ERROR, logger="orchestrace"):
        handle = ot.configure(exporter=[exporter, "memory"], trace_dir=tmp_path / "traces",
                              tracer_provider=new_provider())
    try:
        assert f"cannot create the exporter '{exporter}'" in caplog.text and "five seconds" in caplog.text
        _team("typo-task")
        assert len(handle.get_finished_spans()) == 7
        assert handle.force_flush()
        (trace,) = trace_dir_validator(tmp_path / "traces").values()
        assert trace["task_id"] == "typo-task"
    finally:
        handle.shutdown()


def test_configure_is_idempotent_and_adds_new_exporters(tmp_path: Path) -> None:
    provider = new_provider()
    first = ot.configure(exporter="memory", tracer_provider=provider, batch=False)
    try:
        again = ot.configure(exporter=["memory", f"file:{tmp_path / 'more.jsonl'}"], batch=False)
        assert again is first
        _team("idem-task")
        assert len(first.get_finished_spans()) == 7  # memory was not installed twice
        assert len((tmp_path / "more.jsonl").read_text().splitlines()) == 7
        fresh = ot.configure(exporter="memory", tracer_provider=new_provider(), batch=False)
        assert fresh is not first
        fresh.shutdown()
    finally:
        first.shutdown()


def test_trace_dir_writes_orchestration_traces(tmp_path: Path, trace_dir_validator: Any) -> None:
    handle = ot.configure(exporter="none", trace_dir=tmp_path / "traces", tracer_provider=new_provider())
    _team("dir-task")
    try:
        assert handle.force_flush()  # writes the finished episode now, not only at shutdown
        traces = trace_dir_validator(tmp_path / "traces")
    finally:
        handle.shutdown()
    (trace,) = traces.values()
    assert trace["task_id"] == "dir-task"
    agents = {event["agent"].split("#")[0] for event in trace["events"]}  # "researcher#2": a 2nd instance
    assert {"orchestrator", "researcher"} <= agents


def test_trace_dir_without_the_collector_logs_and_continues(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "orchestrace_collector.inprocess", None)  # import fails
    with caplog.at_level(logging.ERROR, logger="orchestrace"):
        handle = ot.configure(exporter="memory", trace_dir=tmp_path, tracer_provider=new_provider(),
                              batch=False)
    assert "trace_dir needs the collector" in caplog.text
    _team("no-collector")
    assert len(handle.get_finished_spans()) == 7
    handle.shutdown()


def test_otlp_http_to_the_collector(collector: RunningCollector, trace_dir_validator: Any) -> None:
    handle = ot.configure(exporter="otlp", endpoint=collector.base_url, tracer_provider=new_provider())
    try:
        _team("otlp-task")
        assert handle.force_flush()
    finally:
        handle.shutdown()
    assert collector.stop() == 0
    traces = trace_dir_validator(collector.out)
    (trace,) = [t for t in traces.values() if t["task_id"] == "otlp-task"]
    types = [event["type"] for event in trace["events"]]
    assert "tool_call" in types
    assert {"orchestrator", "researcher"} <= {event["agent"].split("#")[0] for event in trace["events"]}
    assert trace["rewards"].get("team") == 1.0


GLOBAL_PROVIDER_SCRIPT = """
import os
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import orchestrace as ot

app_exporter = InMemorySpanExporter()
app_provider = TracerProvider()
app_provider.add_span_processor(SimpleSpanProcessor(app_exporter))
trace.set_tracer_provider(app_provider)

handle = ot.configure("svc", exporter="memory")
assert handle.tracer_provider is app_provider, "replaced the app's provider"
assert trace.get_tracer_provider() is app_provider
assert ot.configure() is handle, "not idempotent"

@ot.agent
def a() -> int:
    return 1

assert a() == 1
assert [s.name for s in app_exporter.get_finished_spans()] == ["invoke_agent a"], "app exporter missed it"
assert [s.name for s in handle.get_finished_spans()] == ["invoke_agent a"], "our exporter missed it"
print("OK")
"""

NEW_PROVIDER_SCRIPT = """
from opentelemetry import trace
import orchestrace as ot
handle = ot.configure(exporter="memory")
assert trace.get_tracer_provider() is handle.tracer_provider, "not installed globally"

@ot.agent
def a() -> int:
    return 1

a()
(span,) = handle.get_finished_spans()
print(span.resource.attributes["service.name"])
"""

DISABLED_SCRIPT = """
import orchestrace as ot
handle = ot.configure(exporter="memory")

@ot.agent
def a() -> int:
    ot.reward(1.0)
    return 1

assert a() == 1
assert handle.tracer_provider is None and handle.get_finished_spans() == ()
handle.force_flush()
handle.shutdown()
print("OK")
"""


EXIT_FLUSH_SCRIPT = """
import sys
import orchestrace as ot
ot.configure(exporter="file:" + sys.argv[1])  # batch processing, never flushed explicitly

@ot.agent
def a() -> int:
    return 1

a()
print("OK")
"""


def _run(script: str, *args: str, **env: str) -> str:
    import os

    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | env
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_adds_to_the_provider_the_app_already_set() -> None:
    assert _run(GLOBAL_PROVIDER_SCRIPT) == "OK"


def test_new_global_provider_uses_otel_service_name() -> None:
    assert _run(NEW_PROVIDER_SCRIPT, OTEL_SERVICE_NAME="from-env") == "from-env"


def test_otel_sdk_disabled_turns_everything_into_no_ops() -> None:
    assert _run(DISABLED_SCRIPT, OTEL_SDK_DISABLED="true") == "OK"


def test_batched_spans_are_flushed_at_exit(tmp_path: Path) -> None:
    out = tmp_path / "exit.jsonl"
    assert _run(EXIT_FLUSH_SCRIPT, str(out)) == "OK"
    (line,) = out.read_text().splitlines()
    assert '"name":"invoke_agent a"' in line


def test_memory_handle_without_tracing_setup_is_empty() -> None:
    set_config(None)
    assert ot.TracingHandle(None).get_finished_spans() == ()
    assert sc.ORCH_CONTENT == "orchestrace.content.text"


class CountingExporter(SpanExporter):
    def __init__(self) -> None:
        self.exported = 0
        self.shutdowns = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_shutdown_happens_once_and_silences_the_handle() -> None:
    exporter = CountingExporter()
    provider = new_provider()
    handle = ot.configure(exporter=exporter, tracer_provider=provider, batch=False)
    _team("before")
    handle.shutdown()
    provider.shutdown()  # what the provider does at interpreter exit
    assert exporter.shutdowns == 1
    exported = exporter.exported
    assert exported == 7
    with provider.get_tracer("app").start_as_current_span("app span after shutdown"):
        pass
    assert exporter.exported == exported
