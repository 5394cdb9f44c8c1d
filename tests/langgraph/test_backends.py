"""What standard OTel backends show: status OK / ERROR on every span, inputs and outputs of workflow, agent
and tool spans in the GenAI conventions when capture is on, an aggregate that is no model call, and one
conversation id per episode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orchestrace as ot
import pytest
from episodes import MODES, run_graph
from fakes import ScriptedChatModel
from heldout_graphs import Case, Chat, desk, handoff_team, tool_loop
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from opentelemetry.trace import StatusCode
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config
from orchestrace_langgraph import AGENT_METADATA_KEY
from span_checks import Spans


@pytest.fixture
def capture_on() -> Iterator[None]:
    set_config(CaptureConfig(capture_content=True))
    yield
    set_config(None)


@pytest.mark.parametrize("mode", MODES)
async def test_every_span_ends_ok(spans: Spans, mode: str) -> None:
    await run_graph(tool_loop(), {"messages": [HumanMessage("bolts?")]}, None, mode)
    ours = spans.ours
    assert len([s for s in ours if s.name.startswith("chat ")]) == 2  # the model calls too
    assert len(ours) == 7 and all(s.status.status_code is StatusCode.OK for s in ours), [
        (s.name, s.status.status_code) for s in ours if s.status.status_code is not StatusCode.OK
    ]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "astream"])
async def test_a_failing_model_call_is_an_error_and_its_exception_passes_unchanged(
    spans: Spans, mode: str
) -> None:
    down = ConnectionError("model endpoint down")

    def respond(messages: Any) -> AIMessage:
        raise down

    model = ScriptedChatModel(respond=respond)

    def clerk(state: Chat) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(Chat)
    g.add_node("clerk", clerk)
    g.add_edge(START, "clerk")
    with pytest.raises(ConnectionError) as raised:
        await run_graph(g.compile(name="outage"), {"messages": [HumanMessage("hi")]}, None, mode)
    assert raised.value is down  # the user's exception, not a wrapper of ours
    chat = spans.one("chat scripted-model")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == "ConnectionError: model endpoint down"
    (event,) = [e for e in chat.events if e.name == sc.EVENT_EXCEPTION]
    assert event.attributes[sc.EXCEPTION_TYPE] == "ConnectionError"
    for name in ("clerk", "invoke_workflow outage"):  # and everything around it failed with it
        assert spans.one(name).status.status_code is StatusCode.ERROR


def test_a_cancelled_model_call_is_an_error_a_closed_stream_is_not(spans: Spans) -> None:
    def respond(messages: Any) -> AIMessage:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ScriptedChatModel(respond=respond).invoke([HumanMessage("hi")])
    assert spans.one("chat scripted-model").status.status_code is StatusCode.ERROR
    spans.clear()
    stream = tool_loop().stream({"messages": [HumanMessage("bolts?")]}, stream_mode="updates")
    next(stream)
    stream.close()  # the caller's choice: no failure
    assert spans.one("invoke_workflow shop").status.status_code is StatusCode.UNSET


def test_a_failing_node_is_an_error_and_its_run_too(spans: Spans) -> None:
    def broken(state: Case) -> dict[str, Any]:
        raise KeyError("missing")

    g = StateGraph(Case)
    g.add_node("broken", broken)
    g.add_edge(START, "broken")
    with pytest.raises(KeyError):
        g.compile(name="fails").invoke({"log": []})
    for name in ("broken", "invoke_workflow fails"):
        span = spans.one(name)
        assert span.status.status_code is StatusCode.ERROR
        assert "KeyError" in (span.status.description or "")


def test_an_interrupted_run_is_ok_not_an_error(spans: Spans) -> None:
    from langgraph.types import interrupt

    def ask(state: Case) -> dict[str, Any]:
        return {"log": [interrupt("go?")]}

    g = StateGraph(Case)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    graph = g.compile(checkpointer=InMemorySaver(), name="asks")
    graph.invoke({"log": []}, {"configurable": {"thread_id": "i"}})
    assert {s.status.status_code for s in spans.ours} == {StatusCode.OK}


def test_workflow_agent_and_tool_spans_carry_input_and_output(spans: Spans, capture_on: None) -> None:
    g = StateGraph(Case)
    g.add_node("helper", lambda state: {"log": ["helped"]}, metadata={AGENT_METADATA_KEY: True})
    g.add_node("plain", lambda state: {"log": ["plain"]})
    g.add_edge(START, "helper")
    g.add_edge("helper", "plain")
    g.compile(name="office").invoke({"log": ["asked"]})
    run, helper, plain = (spans.one(n) for n in ("invoke_workflow office", "invoke_agent helper", "plain"))
    for span in (run, helper):
        assert json.loads(str(span.attributes[sc.GEN_AI_INPUT_MESSAGES]))
        assert json.loads(str(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))
    assert "helped" in str(helper.attributes[sc.GEN_AI_OUTPUT_MESSAGES])
    assert "plain" in str(run.attributes[sc.GEN_AI_OUTPUT_MESSAGES])  # the final state
    # a plain node repeats the state: no copy of it (the growth stays linear)
    assert sc.GEN_AI_INPUT_MESSAGES not in plain.attributes
    spans.clear()
    tool_loop().invoke({"messages": [HumanMessage("bolts?")]})
    tool_span = spans.one("execute_tool inventory")
    assert json.loads(str(tool_span.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS])) == {"item": "bolt"}
    assert tool_span.attributes[sc.GEN_AI_TOOL_CALL_RESULT] == "3"


def test_without_capture_no_content_is_exported(spans: Spans) -> None:
    desk().invoke({"n": 0})
    keys = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.OUTPUT_VALUE)
    assert not [s.name for s in spans.all if any(k in (s.attributes or {}) for k in keys)]


def test_an_aggregate_is_no_model_call(spans: Spans, capture_on: None) -> None:
    handle = ot.configure(exporter="memory", tracer_provider=spans.provider, batch=False,
                          capture_content=True)

    @ot.agent
    def merger() -> str:
        with ot.aggregate(["a", "b"]) as merge:
            merge.set_result("a and b")
        return "a and b"

    try:
        merger()
    finally:
        handle.shutdown()
    (span,) = [s for s in spans.all if s.attributes.get(sc.ORCH_OPERATION) == sc.OPERATION_AGGREGATE]
    assert sc.GEN_AI_OUTPUT_MESSAGES not in span.attributes
    assert sc.GEN_AI_OPERATION_NAME not in span.attributes
    assert "a and b" in str(span.attributes[sc.OUTPUT_VALUE])
    assert span.status.status_code is StatusCode.OK


def test_the_conversation_id_is_the_episode(spans: Spans) -> None:
    """Two runs with new input on one thread are two episodes, two conversations; a resume joins its own."""
    config = {"configurable": {"thread_id": "shared"}}
    graph = desk().builder.compile(checkpointer=InMemorySaver(), name="desk")
    graph.invoke({"n": 0}, config)
    graph.invoke({"n": 0}, config)
    runs = spans.named("invoke_workflow desk")
    conversations = [r.attributes[sc.GEN_AI_CONVERSATION_ID] for r in runs]
    assert len(set(conversations)) == 2
    assert conversations == [r.attributes[sc.ORCH_EPISODE_ID] for r in runs]


#: Every way of calling ``stream`` that wraps its chunks differently (``invoke`` streams two modes).
STREAM_CALLS: dict[str, dict[str, Any]] = {
    "invoke": {},
    "values": {"stream_mode": "values"},
    "modes": {"stream_mode": ["updates", "values"]},
    "subgraphs": {"stream_mode": "values", "subgraphs": True},
    "modes_and_subgraphs": {"stream_mode": ["values"], "subgraphs": True},
    "v2": {"stream_mode": "values", "version": "v2"},
}


@pytest.mark.parametrize("call", sorted(STREAM_CALLS))
def test_a_runs_output_is_its_final_answer(spans: Spans, capture_on: None, call: str) -> None:
    """The workflow span's output is the final state's last message, however LangGraph wrapped the chunk."""
    graph = tool_loop()
    graph_input = {"messages": [HumanMessage("bolts?")]}
    if call == "invoke":
        graph.invoke(graph_input)
    else:
        list(graph.stream(graph_input, **STREAM_CALLS[call]))
    run = spans.one("invoke_workflow shop")
    assert json.loads(str(run.attributes[sc.GEN_AI_OUTPUT_MESSAGES])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "3 bolts."}], "finish_reason": "stop"}]
    assert json.loads(str(run.attributes[sc.GEN_AI_INPUT_MESSAGES])) == [
        {"role": "user", "parts": [{"type": "text", "content": "bolts?"}]}]


def test_spans_genai_has_no_kind_for_are_chains(spans: Spans) -> None:
    """Backends that read OpenInference (Phoenix) classify workflow runs and graph nodes as chains; model
    calls, agents and tools keep the kind their GenAI operation gives them (no OpenInference one)."""
    tool_loop().invoke({"messages": [HumanMessage("bolts?")]})
    handoff_team().invoke({"log": []})
    kinds = {s.name: s.attributes.get(sc.OPENINFERENCE_SPAN_KIND) for s in spans.ours}
    assert kinds["invoke_workflow shop"] == kinds["clerk"] == kinds["stockroom"] == sc.SPAN_KIND_CHAIN
    assert kinds["chat scripted-model"] is None and kinds["execute_tool inventory"] is None
    agents = [s for s in spans.ours if s.name.startswith("invoke_agent ")]
    assert agents and all(sc.OPENINFERENCE_SPAN_KIND not in s.attributes for s in agents)
