"""Which LangGraph run is a conversation turn under the latest GenAI conventions
(``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``). semantic-conventions-genai's invocation span:
``invoke_workflow`` when the application defines the control flow (a LangGraph ``StateGraph``);
``handle_conversation_turn`` when the framework steers it, as a langgraph-swarm graph invoked as an
entrypoint (``create_swarm(...).compile().invoke(...)``, its own example); never a turn inside another turn
of the same process. The collector writes the same trace under either setting."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from episodes import MODES, convert, run_graph
from heldout_graphs import handoff_team
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command
from langgraph_swarm import SwarmState, add_active_agent_router
from opentelemetry.sdk.trace import ReadableSpan
from orchestrace import semconv as sc
from orchestrace.instrumentation import Telemetry, start_workflow
from span_checks import Spans

from examples.swarm import app as swarm_app

TURN, WORKFLOW = sc.OP_HANDLE_CONVERSATION_TURN, sc.OP_INVOKE_WORKFLOW


@pytest.fixture(params=["default", "latest"])
def latest(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param == "latest":
        monkeypatch.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, sc.GEN_AI_LATEST_EXPERIMENTAL)
    else:
        monkeypatch.delenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, raising=False)
    return request.param == "latest"


def relay_swarm() -> Any:
    """A swarm of two plain nodes of neutral names (langgraph-swarm's router over its ``SwarmState``): the
    first hands the conversation to the second."""

    def desk_a(state: SwarmState) -> Command:
        return Command(goto="desk_b", update={"active_agent": "desk_b",
                                              "messages": [AIMessage("over to desk b")]})

    builder = StateGraph(SwarmState)
    builder.add_node("desk_a", desk_a, destinations=("desk_b",))
    builder.add_node("desk_b", lambda state: {"messages": [AIMessage("done")]})
    return add_active_agent_router(builder, route_to=["desk_a", "desk_b"],
                                   default_active_agent="desk_a").compile(name="relay")


def runs(spans: Spans) -> list[tuple[str, str | None, bool]]:
    """Every graph run: (span name, operation, whether it is a root)."""
    found = [(s.name, operation, s.parent is None) for s in spans.ours
             if (operation := (s.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)) in (TURN, WORKFLOW)]
    return sorted(found, key=str)


def one_turn(spans: Spans, name: str, latest: bool) -> ReadableSpan:
    """The root run of ``name``: a turn under the latest conventions, else a workflow run."""
    (root,) = [s for s in spans.ours if s.parent is None]
    operation = TURN if latest else WORKFLOW
    assert (root.name, root.attributes[sc.GEN_AI_OPERATION_NAME]) == (f"{operation} {name}", operation)
    assert root.attributes[sc.GEN_AI_WORKFLOW_NAME] == name
    return root


@pytest.mark.parametrize("mode", MODES)
async def test_a_swarm_invoked_as_an_entrypoint_is_one_conversation_turn(
    spans: Spans, latest: bool, mode: str
) -> None:
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    await run_graph(swarm_app.build_graph(), {"messages": [HumanMessage(swarm_app.QUESTION)]}, config, mode)
    one_turn(spans, "travel_swarm", latest)
    # its agents' own graphs (create_agent) are workflows the turn runs
    inner = [(name, operation) for name, operation, root in runs(spans) if not root]
    assert inner and {operation for _, operation in inner} == {WORKFLOW}
    convert(spans.all)


async def test_a_swarm_of_plain_nodes_is_a_turn_too(spans: Spans, latest: bool) -> None:
    await run_graph(relay_swarm(), {"messages": [HumanMessage("ticket 7")]}, None, "invoke")
    one_turn(spans, "relay", latest)
    assert [root for *_, root in runs(spans)] == [True]


def test_a_graph_the_application_wires_stays_a_workflow_run(spans: Spans, latest: bool) -> None:
    """Hand-written ``Command.PARENT`` handoffs (the application's own control flow), and a swarm run as a
    node of such a graph: workflow runs only."""
    handoff_team().invoke({"log": []})
    outer = StateGraph(MessagesState)
    outer.add_node("front", relay_swarm())
    outer.add_edge(START, "front")
    outer.compile(name="front_office").invoke({"messages": [HumanMessage("ticket 8")]})
    assert {operation for _, operation, _ in runs(spans)} == {WORKFLOW}
    assert Counter(root for *_, root in runs(spans)) == {True: 2, False: 3}


def test_a_swarm_inside_a_turn_is_no_second_turn(spans: Spans, latest: bool) -> None:
    """A framework runner's turn (another framework's ``Runner.run``) whose code runs a swarm: one turn."""
    outer = start_workflow(Telemetry(spans.provider), "front_desk", episode=True, runner=True)
    token = outer.resume()
    try:
        relay_swarm().invoke({"messages": [HumanMessage("ticket 9")]})
    finally:
        outer.stop(token=token)
    operations = Counter(str((s.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)) for s in spans.all
                         if s.name.startswith((TURN, WORKFLOW)))
    assert operations == ({TURN: 1, WORKFLOW: 1} if latest else {WORKFLOW: 2})
    convert(spans.all)


def test_the_collector_writes_the_same_trace_under_both_settings(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Counter[tuple[Any, ...]]] = []
    for setting in ("", sc.GEN_AI_LATEST_EXPERIMENTAL):
        monkeypatch.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, setting)
        spans.clear()
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        swarm_app.build_graph().invoke({"messages": [HumanMessage(swarm_app.QUESTION)]}, config)
        trace, _ = convert(spans.all)
        written.append(Counter((e["type"], e["agent"], e.get("activation"), e.get("decision"), e.get("to"))
                               for e in trace["events"]))
    assert written[0] == written[1] and written[0]
