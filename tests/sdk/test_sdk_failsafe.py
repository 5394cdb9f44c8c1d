"""Forced faults: nothing inside orchestrace ever raises into the user's program."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import orchestrace as ot
import pytest
from collector_fixtures import free_port
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from orchestrace import semconv as sc
from orchestrace.config import set_config
from sdk_spans import Spans, configure_memory, new_provider


class RaisingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise RuntimeError("exporter is broken")

    def shutdown(self) -> None:
        raise RuntimeError("shutdown is broken too")


@ot.tool
def double(x: int) -> int:
    return 2 * x


@ot.agent
def worker(x: int) -> int:
    ot.message("peer", "hi")
    return double(x)


@pytest.mark.parametrize("batch", [False, True])
def test_exporter_that_raises(batch: bool) -> None:
    exporter = RaisingExporter()
    handle = ot.configure(exporter=exporter, tracer_provider=new_provider(), batch=batch)
    assert [worker(i) for i in range(3)] == [0, 2, 4]
    handle.force_flush()
    handle.shutdown()
    assert exporter.calls >= 1


@pytest.mark.parametrize("exporter", ["otlp", "otlp-grpc"])
def test_endpoint_that_is_down(exporter: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # keep the exporter's retries short
    port = free_port()  # nothing listens there
    endpoint = f"http://127.0.0.1:{port}"
    handle = ot.configure(exporter=exporter, endpoint=endpoint, tracer_provider=new_provider())
    assert [worker(i) for i in range(5)] == [0, 2, 4, 6, 8]
    assert handle.force_flush(timeout_millis=3000) in (True, False)
    handle.shutdown()


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparisons either")

    __hash__ = object.__hash__


@pytest.mark.parametrize("capture", [False, True])
def test_unserializable_arguments_and_results(capture: bool) -> None:
    handle = configure_memory(capture_content=capture)
    try:
        lock = threading.Lock()
        weird = Unprintable()

        @ot.agent
        def takes_anything(*args: Any, **kwargs: Any) -> Any:
            return weird

        circular: dict[str, Any] = {}
        circular["self"] = circular
        assert takes_anything(lock, weird, circular, (x for x in ()), key={1, "a"}) is weird
        with ot.task("t"):
            ot.message("x", weird)
            with ot.aggregate([weird, lock]) as merge:
                merge.set_result(weird)
        span = next(s for s in handle.get_finished_spans() if s.name == "invoke_agent takes_anything")
        assert str(span.attributes[sc.ORCH_INPUT_REF]).startswith("sha256:")
        assert str(span.attributes[sc.ORCH_OUTPUT_REF]).startswith("sha256:")
    finally:
        handle.shutdown()
        set_config(None)


@pytest.mark.parametrize("capture", [False, True])
def test_huge_arguments(capture: bool) -> None:
    handle = configure_memory(capture_content=capture, max_content_bytes=1024)
    try:
        huge = "x" * (50 * 1024 * 1024)
        nested = {"pages": ["y" * (1024 * 1024)] * 20}

        @ot.tool
        def read(document: str, extra: dict[str, Any]) -> str:
            return document

        @ot.llm("m")
        def summarize(text: str) -> str:
            return text

        assert read(huge, nested) is huge
        assert summarize(huge) is huge
        for span in handle.get_finished_spans():
            for value in span.attributes.values():
                assert len(str(value)) < 4096  # nothing big went onto a span
        tool = next(s for s in handle.get_finished_spans() if s.name == "execute_tool read")
        assert tool.attributes[sc.ORCH_OUTPUT_REF] == ot.content_ref(huge)
        if capture:
            assert tool.attributes[sc.ORCH_CONTENT_TRUNCATED] is True
    finally:
        handle.shutdown()
        set_config(None)


def test_internal_failure_leaves_the_call_untraced_and_logs_once(
        spans: Spans, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from orchestrace.telemetry import Telemetry

    def broken_tracer(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer exploded")

    monkeypatch.setattr(Telemetry, "start_span", broken_tracer)
    with caplog.at_level(logging.ERROR, logger="orchestrace"):
        assert worker(2) == 4
        assert worker(3) == 6
    assert spans.all == []
    assert len([r for r in caplog.records if "Spec.start" in r.getMessage()]) == 1  # once per site


@pytest.mark.parametrize("broken", ["attach", "Invocation"])
def test_a_failure_after_the_span_started_still_runs_the_call_and_ends_the_span(
        spans: Spans, monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    """``attach``: the call runs outside its span; ``Invocation`` (in ``Spec.open``, after the span started):
    it runs untraced."""
    import orchestrace.invocation as invocation
    from opentelemetry import context as otel_context

    def explode(*args: Any) -> Any:
        raise RuntimeError(f"{broken} exploded")

    monkeypatch.setattr(otel_context if broken == "attach" else invocation, broken, explode)
    assert worker(2) == 4
    monkeypatch.undo()
    # Both spans were started before the failure; each is ended (a span only reaches the exporter ended).
    agent, tool = spans.one("invoke_agent worker"), spans.one("execute_tool double")
    assert agent.end_time is not None and tool.end_time is not None
    assert tool.parent is None  # the agent's span was never current


def test_internal_failure_while_recording_still_ends_the_span(
        spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    import orchestrace.invocation as invocation

    def broken_ref(value: Any) -> str:
        raise RuntimeError("hashing exploded")

    monkeypatch.setattr(invocation, "content_ref", broken_ref)
    assert double(5) == 10
    (span,) = spans.named("execute_tool double")
    assert sc.ORCH_INPUT_REF not in span.attributes


def test_everything_works_outside_any_agent_or_configuration(spans: Spans) -> None:
    assert double(4) == 8  # a tool alone is a root span
    assert spans.one("execute_tool double").parent is None
    assert ot.current_agent() is None
    spans.handle.shutdown()  # back to the global (no-op) provider
    assert worker(1) == 2
    ot.set_usage(input_tokens=1, output_tokens=2)
    assert ot.inject() == {}
