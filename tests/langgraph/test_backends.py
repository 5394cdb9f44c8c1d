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
from heldout_graphs import Case, desk, tool_loop
from langchain_core.messages import HumanMessage
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
    # (chat spans are the model-call handler's, issue 14's module: not yet)
    ours = [s for s in spans.ours if not s.name.startswith("chat ")]
    assert len(ours) == 5 and all(s.status.status_code is StatusCode.OK for s in ours), [
        (s.name, s.status.status_code) for s in ours if s.status.status_code is not StatusCode.OK
    ]


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
