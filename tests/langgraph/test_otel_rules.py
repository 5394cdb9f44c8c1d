"""OTel's rules: the tracer provider given to the instrumentor gets every orchestrace span of a run (the SDK's
decorated functions inside nodes too), and ``suppress_instrumentation()`` records nothing."""

from __future__ import annotations

from typing import Any, TypedDict

import orchestrace as ot
import pytest
from episodes import MODES, run_graph
from langgraph.graph import END, START, StateGraph
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace import semconv as sc
from span_checks import Spans


@ot.tool
def square(x: int) -> int:
    return x * x


@ot.agent(name="checker")
def check(x: int) -> bool:
    return x > 0


class Num(TypedDict):
    x: int
    ok: bool


def calculator() -> Any:
    def calc(state: Num) -> dict[str, Any]:
        return {"x": square(state["x"]), "ok": check(state["x"])}

    g = StateGraph(Num)
    g.add_node("calc", calc)
    g.add_edge(START, "calc")
    g.add_edge("calc", END)
    return g.compile(name="calculator")


@pytest.mark.parametrize("mode", MODES)
async def test_the_given_provider_gets_the_sdk_spans_inside_nodes(spans: Spans, mode: str) -> None:
    """No ``ot.configure``: the SDK's spans inside the run go to the instrumentor's provider, nested."""
    global_memory = InMemorySpanExporter()
    global_provider = trace.get_tracer_provider()
    if isinstance(global_provider, TracerProvider):  # another test set one: it must get nothing of ours
        global_provider.add_span_processor(SimpleSpanProcessor(global_memory))
    await run_graph(calculator(), {"x": 3, "ok": False}, None, mode)
    tool_span = spans.one("execute_tool square")
    agent_span = spans.one("invoke_agent checker")
    assert spans.parent_name(tool_span) == spans.parent_name(agent_span) == "calc"
    scope = tool_span.instrumentation_scope
    assert scope is not None and scope.name == "orchestrace"
    assert global_memory.get_finished_spans() == ()


@pytest.mark.parametrize("mode", MODES)
async def test_suppress_instrumentation_records_nothing(spans: Spans, mode: str) -> None:
    with suppress_instrumentation():
        await run_graph(calculator(), {"x": 3, "ok": False}, None, mode)
    assert spans.all == []
    await run_graph(calculator(), {"x": 3, "ok": False}, None, mode)  # and afterwards, all again
    assert {s.name for s in spans.all} == {"invoke_workflow calculator", "calc", "execute_tool square",
                                           "invoke_agent checker"}
    assert spans.one("calc").attributes[sc.ORCH_OPERATION] == sc.OPERATION_NODE


def test_suppressed_sdk_calls_outside_graphs_record_nothing(spans: Spans) -> None:
    memory = InMemorySpanExporter()
    handle = ot.configure(exporter=memory)
    try:
        with suppress_instrumentation():
            assert square(4) == 16
        assert memory.get_finished_spans() == ()
        square(5)
        handle.force_flush()
        assert [s.name for s in memory.get_finished_spans()] == ["execute_tool square"]
    finally:
        handle.shutdown()
