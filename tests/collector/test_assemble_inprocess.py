"""``TraceDirExporter``: the same output directory, written in-process by the OpenTelemetry SDK."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import orchestrace as ot
import pytest
from collector_fixtures import validate_trace_dir
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from orchestrace import semconv as sc
from orchestrace_collector.inprocess import TraceDirExporter
from orchestrace_collector.output import latest_turns


def run_task(provider: TracerProvider, task_id: str) -> None:
    tracer = provider.get_tracer("inprocess-test")
    with (
        tracer.start_as_current_span(
            "invoke_workflow team",
            attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.ORCH_TASK_ID: task_id},
        ),
        tracer.start_as_current_span(
            "invoke_agent writer",
            attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "writer"},
        ),
        tracer.start_as_current_span(
            "chat fake-model",
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                sc.GEN_AI_REQUEST_MODEL: "fake-model",
                sc.GEN_AI_USAGE_INPUT_TOKENS: 11,
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: 7,
            },
        ),
    ):
        pass


def test_force_flush_writes_finished_episodes_and_shutdown_the_rest(tmp_path: Path) -> None:
    exporter = TraceDirExporter(tmp_path, quiet_period_s=60)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    run_task(provider, "inproc-1")
    # SDK span processors do not pass force_flush on to their exporter: the spans reach it, then this writes.
    assert provider.force_flush() and exporter.force_flush()
    traces = validate_trace_dir(tmp_path)
    (trace,) = traces.values()
    assert trace["task_id"] == "inproc-1" and trace["metrics"]["spans"] == 3
    assert trace["costs"]["tokens"] == 18
    (turn,) = latest_turns(tmp_path, traces)[trace["trace_id"]]
    assert turn["model"] == "fake-model" and turn["agent"] == "writer"

    # An unfinished episode (its root never ends) is written at shutdown, marked incomplete.
    tracer = provider.get_tracer("inprocess-test")
    root = tracer.start_span("invoke_workflow team", attributes={sc.ORCH_TASK_ID: "inproc-2"})
    with (
        otel_trace.use_span(root),
        tracer.start_as_current_span(
            "execute_tool search",
            attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "search"},
        ),
    ):
        pass
    assert provider.force_flush() and exporter.force_flush()
    assert len(validate_trace_dir(tmp_path)) == 1, "the root has not ended: nothing new on force_flush"
    provider.shutdown()
    by_trace = validate_trace_dir(tmp_path)
    assert len(by_trace) == 2
    exporter.shutdown()  # idempotent


def test_quiet_period_completes_without_flush(tmp_path: Path) -> None:
    exporter = TraceDirExporter(tmp_path, quiet_period_s=0.05)
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=10))
    run_task(provider, "inproc-quiet")
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob("traces-*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [t["task_id"] for t in validate_trace_dir(tmp_path).values()] == ["inproc-quiet"]
    provider.shutdown()
    assert len(validate_trace_dir(tmp_path)) == 1, "shutdown writes nothing twice"


def test_a_trace_dir_whose_directory_another_writer_holds_writes_as_if_it_were_new(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two processes writing one directory at once: the first holds ``OUT/wal`` (what was written there),
    the second writes its episodes all the same, without it (logged), never failing the application."""
    first = TraceDirExporter(tmp_path, quiet_period_s=60)
    with caplog.at_level(logging.INFO):
        second = TraceDirExporter(tmp_path, quiet_period_s=60)
    assert "without what earlier runs wrote there" in caplog.text and "in use" in caplog.text
    for exporter, task_id in ((second, "second"), (first, "first")):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        run_task(provider, task_id)
        provider.shutdown()
    traces = validate_trace_dir(tmp_path)
    assert sorted(t["task_id"] for t in traces.values()) == ["first", "second"]


@pytest.mark.parametrize("where", ["under a file", "read-only"])
def test_a_trace_dir_that_cannot_be_written_is_logged_once_and_tracing_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str) -> None:
    """``configure(trace_dir=...)`` on a path it cannot write: one error naming it, no exception into the
    program, and every span still reaches the other exporters (here ``memory``); the trace_dir exporter
    drops what it is given. Before, the writer raised inside ``configure``, whose guard then gave back a
    disabled handle: no span went anywhere."""
    if where == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory")
        out = tmp_path / "read-only"
        out.mkdir()
        out.chmod(0o500)
    else:
        (tmp_path / "a-file").write_text("")
        out = tmp_path / "a-file" / "traces"

    @ot.agent
    def worker(x: int) -> int:
        if x < 0:
            raise KeyError(x)
        return x + 1

    with caplog.at_level(logging.INFO):
        handle = ot.configure("unwritable", exporter="memory", trace_dir=out, batch=False,
                              tracer_provider=TracerProvider(shutdown_on_exit=False))
        try:
            assert ot.configure(trace_dir=out) is handle  # named again: nothing more installed or logged
            assert worker(1) == 2
            with pytest.raises(KeyError):
                worker(-1)
            assert handle.force_flush()
            assert [s.name for s in handle.get_finished_spans()] == ["invoke_agent worker"] * 2
        finally:
            handle.shutdown()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and str(out) in errors[0] and "cannot be written" in errors[0], errors
    assert not out.exists() or not any(out.iterdir())
