"""LangGraph changed: a patch target it no longer has is skipped with a warning at ``instrument()``, an
internal object of another shape is read without raising, and the graph runs as it would uninstrumented.
Plus the instrumentor's explicit telemetry (what ``ot.configure`` returns)."""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import langgraph.graph._branch
import orchestrace as ot
import pytest
from fakes import ScriptedChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace import semconv as sc
from orchestrace.instrumentation import CaptureConfig, Telemetry
from orchestrace_langgraph import LangGraphInstrumentor, compat


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def chain(conditional: bool) -> Any:
    """plan -> work -> END, the last hop through a conditional edge when ``conditional``."""
    g = StateGraph(State)
    g.add_node("plan", lambda state: {"steps": ["plan"]})
    g.add_node("work", lambda state: {"steps": ["work"]})
    g.add_edge(START, "plan")
    if conditional:
        g.add_conditional_edges("plan", lambda state: "work", ["work"])
    else:
        g.add_edge("plan", "work")
    g.add_edge("work", END)
    return g.compile(name="chain")


@pytest.fixture
def recorder() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider


def test_a_patch_target_langgraph_no_longer_has_is_skipped_with_a_warning(
        recorder: tuple[InMemorySpanExporter, TracerProvider], monkeypatch: pytest.MonkeyPatch) -> None:
    exporter, provider = recorder
    monkeypatch.delattr(langgraph.graph._branch.BranchSpec, "_finish")  # as if LangGraph renamed it
    instrumentor = LangGraphInstrumentor()
    with pytest.warns(RuntimeWarning, match=r"BranchSpec\._finish .*conditional edges' choices"):
        instrumentor.instrument(tracer_provider=provider)
    try:
        assert chain(conditional=False).invoke({"steps": []}) == {"steps": ["plan", "work"]}
    finally:
        instrumentor.uninstrument()
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["invoke_workflow chain", "plan", "work"]  # everything else is still recorded
    assert not hasattr(langgraph.graph._branch.BranchSpec, "_finish")  # nothing was put in its place


def test_every_patch_target_is_found_in_the_installed_langgraph() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for patch in (compat.STREAM, compat.ASTREAM, compat.RUN_WITH_RETRY, compat.ARUN_WITH_RETRY,
                      compat.BRANCH_FINISH, compat.ASSEMBLE_WRITES, compat.TICK, compat.AFTER_TICK,
                      compat.TOOL_RUN, compat.TOOL_ARUN):
            assert compat.resolve(patch) is not None, patch.path


def test_internal_objects_of_another_shape_never_raise_into_the_graph(
        recorder: tuple[InMemorySpanExporter, TracerProvider], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of LangGraph's internals meets an object of another shape: the graph still runs and its
    spans are still recorded, with less."""
    exporter, provider = recorder

    class Reshaped:  # a task, branch or graph builder whose fields were renamed
        def __getattr__(self, name: str) -> Any:
            raise AttributeError(name)

    graph = chain(conditional=True)
    monkeypatch.setattr(graph, "builder", Reshaped())  # read at every run's start (its fixed edges)
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        assert graph.invoke({"steps": []}) == {"steps": ["plan", "work"]}
        assert compat.read_task(Reshaped()) is None
        assert compat.graph_wiring(Reshaped()) == compat.NO_WIRING
        assert compat.written(Reshaped(), True) == ([], frozenset())
        assert compat.returned_commands([Reshaped()]) == []
        assert compat.breakpoint_nodes(Reshaped(), {}, "interrupt_before", "interrupt_after") is None
        assert compat.branch_ends(Reshaped()) == {}
        assert compat.handoff_command(ValueError()) is None
        assert compat.configurable(Reshaped()) == {}
    finally:
        instrumentor.uninstrument()
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["invoke_workflow chain", "plan", "work"]
    plan = next(s for s in exporter.get_finished_spans() if s.name == "plan")
    assert [dict(e.attributes or {})[sc.ORCH_TARGET_AGENT] for e in plan.events
            if e.name == sc.EVENT_DECISION] == ["work"]


def test_instrument_with_an_explicit_telemetry(recorder: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    """``instrument(telemetry=...)``: its provider gets every span, its capture settings decide the content
    (here on, while the configured settings say off)."""
    exporter, provider = recorder
    telemetry = Telemetry(provider, CaptureConfig(capture_content=True))
    model = ScriptedChatModel(respond=lambda messages: AIMessage("pong"))

    @ot.tool
    def note(text: str) -> str:
        return text.upper()

    def talk(state: MessagesState) -> dict[str, Any]:
        note("kept")
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("talk", talk, metadata={"orchestrace.agent": True})
    g.add_edge(START, "talk")
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(telemetry=telemetry)
    try:
        g.compile(name="chat").invoke({"messages": [HumanMessage("ping")]})
    finally:
        instrumentor.uninstrument()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_workflow chat", "invoke_agent talk", "chat scripted-model",
                          "execute_tool note"}
    assert "ping" in str(spans["invoke_agent talk"].attributes[sc.GEN_AI_INPUT_MESSAGES])
    assert "pong" in str(spans["chat scripted-model"].attributes[sc.GEN_AI_OUTPUT_MESSAGES])
    assert spans["execute_tool note"].attributes[sc.GEN_AI_TOOL_CALL_RESULT] == "KEPT"
    scopes = {name: s.instrumentation_scope.name for name, s in spans.items() if s.instrumentation_scope}
    ours = "orchestrace_langgraph"
    assert scopes == {"invoke_workflow chat": ours, "invoke_agent talk": ours, "chat scripted-model": ours,
                      "execute_tool note": "orchestrace"}
