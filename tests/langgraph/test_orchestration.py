"""LangGraph control flow as orchestration events: Send fan-out and aggregation, Command routing, END,
subgraphs and agent nodes, Command.PARENT handoffs (langgraph-supervisor, langgraph-swarm), interrupts."""

from __future__ import annotations

import operator
import time
import warnings
from typing import Annotated, Any, TypedDict

import pytest
from fakes import ScriptedChatModel, tool_call
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from opentelemetry.trace import StatusCode
from orchestrace import semconv as sc
from orchestrace.instrumentation import content_ref
from orchestrace_langgraph import AGENT_METADATA_KEY, AGENT_ROLE_METADATA_KEY
from span_checks import Spans
from written_traces import convert

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import ToolNode, create_react_agent

# create_react_agent moved to langchain.agents; langgraph-supervisor still builds on it.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class MapState(TypedDict):
    items: list[str]
    results: Annotated[list[str], operator.add]


def map_reduce(fan_from_start: bool = False) -> Any:
    def plan(state: MapState) -> dict[str, Any]:
        return {"items": ["x", "y", "z"]}

    def fan(state: MapState) -> list[Send]:
        return [Send("work", {"items": [i], "results": []}) for i in state["items"]]

    def work(state: MapState) -> dict[str, Any]:
        return {"results": [state["items"][0].upper()]}

    def reduce(state: MapState) -> dict[str, Any]:
        return {"results": ["+".join(sorted(state["results"]))]}

    g = StateGraph(MapState)
    g.add_node("work", work)
    g.add_node("reduce", reduce)
    if fan_from_start:
        g.add_conditional_edges(START, fan, ["work"])
    else:
        g.add_node("plan", plan)
        g.add_edge(START, "plan")
        g.add_conditional_edges("plan", fan, ["work"])
    g.add_edge("work", "reduce")
    g.add_edge("reduce", END)
    return g.compile(name="mapreduce")


def assert_no_errors(spans: Spans) -> None:
    assert [s.name for s in spans.all if s.status.status_code == StatusCode.ERROR] == []


@pytest.mark.parametrize("use_async", [False, True])
async def test_send_fan_out_spawns_and_aggregate_links(spans: Spans, use_async: bool) -> None:
    graph, inputs = map_reduce(), {"items": [], "results": []}
    out = await graph.ainvoke(inputs) if use_async else graph.invoke(inputs)
    assert out["results"][-1] == "X+Y+Z"
    plan = spans.one("plan")
    decisions = spans.events(plan, sc.EVENT_DECISION)
    assert len(decisions) == 1
    assert decisions[0][sc.ORCH_DECISION_KIND] == sc.DECISION_SPAWN
    assert decisions[0][sc.ORCH_DECISION_OPTIONS] == ("work",)
    spawns = spans.events(plan, sc.EVENT_SPAWN)
    assert [s[sc.ORCH_TARGET_AGENT] for s in spawns] == ["work"] * 3
    assert len({s[sc.ORCH_CONTENT_REF] for s in spawns}) == 3  # one per packet
    works = spans.named("work")
    assert len(works) == 3
    # each worker's input is its packet: the collector gives each spawn to the worker that took its packet
    assert {w.attributes[sc.ORCH_INPUT_REF] for w in works} == {s[sc.ORCH_CONTENT_REF] for s in spawns}
    assert len({w.attributes[sc.LANGGRAPH_TASK_ID] for w in works}) == 3  # parallel tasks are distinct
    assert len({w.attributes[sc.LANGGRAPH_CHECKPOINT_NS] for w in works}) == 3
    reduce = spans.one("reduce")
    linked = {link.context.span_id for link in reduce.links
              if link.attributes and link.attributes[sc.ORCH_LINK_TYPE] == sc.LINK_AGGREGATE_INPUT}
    assert linked == {w.context.span_id for w in works}
    assert reduce.attributes[sc.ORCH_OPERATION] == sc.OPERATION_NODE
    assert_no_errors(spans)


class CountedPacket:
    """A Send payload that counts its serializations (a content ref serializes it through ``model_dump``)."""

    def __init__(self, item: str) -> None:
        self.item = item
        self.dumps = 0

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        self.dumps += 1
        return {"item": self.item}


def test_a_send_payload_is_serialized_once_for_its_spawn_and_its_worker(spans: Spans) -> None:
    """The spawn's ref is the worker's input ref (the same object reaches the worker): hashed once."""
    packets = [CountedPacket(item) for item in "xyz"]

    def work(packet: Any) -> dict[str, Any]:
        return {"results": [packet.item.upper()]}

    g = StateGraph(MapState)
    g.add_node("work", work)
    g.add_conditional_edges(START, lambda state: [Send("work", p) for p in packets], ["work"])
    g.add_edge("work", END)
    assert g.compile(name="fan").invoke({"items": [], "results": []})["results"] == ["X", "Y", "Z"]
    assert [p.dumps for p in packets] == [1, 1, 1]
    refs = {content_ref({"item": item}) for item in "xyz"}
    spawns = spans.events(spans.one("invoke_workflow fan"), sc.EVENT_SPAWN)
    assert {s[sc.ORCH_CONTENT_REF] for s in spawns} == refs
    assert {w.attributes[sc.ORCH_INPUT_REF] for w in spans.named("work")} == refs


def test_each_send_is_the_spawn_of_the_worker_that_took_its_packet(spans: Spans) -> None:
    map_reduce().invoke({"items": [], "results": []})
    written, _ = convert(spans.all)
    returned = {(e["from"], e["from_activation"]): e.get("content_ref")
                for e in written["events"] if e["type"] == "return"}
    spawned = {e["content_ref"]: (e["to"], e["to_activation"]) for e in written["events"]
               if e["type"] == "spawn" and e["to"] == "work"}
    for item in "xyz":
        packet = content_ref({"items": [item], "results": []})
        assert returned[spawned[packet]] == content_ref({"results": [item.upper()]})


def test_send_workers_are_numbered_in_send_order_whichever_started_first(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker of the first packet is made to start last (its task waits before LangGraph runs it): the
    workers are still activations 1, 2, 3 of work in the order of the Sends, so every rollout numbers a
    packet's worker alike."""
    from langgraph.pregel import _runner

    instrumented = _runner.run_with_retry

    def first_packet_late(task: Any, *args: Any, **kwargs: Any) -> Any:
        if task.name == "work" and task.input.get("items") == ["x"]:
            time.sleep(0.05)
        return instrumented(task, *args, **kwargs)

    monkeypatch.setattr(_runner, "run_with_retry", first_packet_late)
    map_reduce().invoke({"items": [], "results": []})
    packets = {item: content_ref({"items": [item], "results": []}) for item in "xyz"}
    started = sorted(spans.named("work"), key=lambda s: s.start_time or 0)
    assert started[-1].attributes[sc.ORCH_INPUT_REF] == packets["x"]  # the order was forced
    written, _ = convert(spans.all)
    spawned = {e["content_ref"]: (e["to"], e["to_activation"]) for e in written["events"]
               if e["type"] == "spawn" and e["to"] == "work"}
    assert spawned == {packets["x"]: ("work", 1), packets["y"]: ("work", 2), packets["z"]: ("work", 3)}


def test_send_from_start_is_recorded_on_the_workflow(spans: Spans) -> None:
    map_reduce(fan_from_start=True).invoke({"items": ["a", "b"], "results": []})
    workflow = spans.one("invoke_workflow mapreduce")
    assert [s[sc.ORCH_TARGET_AGENT] for s in spans.events(workflow, sc.EVENT_SPAWN)] == ["work", "work"]
    assert spans.named("__start__") == []  # LangGraph's input task gets no span
    assert len(spans.one("reduce").links) == 2


class RouteState(TypedDict):
    steps: Annotated[list[str], operator.add]


def test_command_goto_is_a_delegate_decision_and_goto_end_a_stop(spans: Spans) -> None:
    def router(state: RouteState) -> Command:
        return Command(goto="worker", update={"steps": ["router"]})

    def worker(state: RouteState) -> Command:
        return Command(goto=END, update={"steps": ["worker"]})

    g = StateGraph(RouteState)
    g.add_node("router", router, destinations=("worker",))
    g.add_node("worker", worker, destinations=(END,))
    g.add_edge(START, "router")
    g.compile().invoke({"steps": []})
    decision = spans.events(spans.one("router"), sc.EVENT_DECISION)
    assert decision == [{sc.ORCH_DECISION_KIND: sc.DECISION_DELEGATE, sc.ORCH_TARGET_AGENT: "worker",
                         sc.ORCH_REASON: "command", sc.ORCH_DECISION_OPTIONS: ("worker",)}]
    stop = spans.events(spans.one("worker"), sc.EVENT_STOP)
    assert stop == [{sc.ORCH_REASON: "command", sc.ORCH_FROM: "worker"}]
    assert spans.events(spans.one("router"), sc.EVENT_STOP) == []


def test_conditional_edge_routes_and_stops(spans: Spans) -> None:
    def decide(state: RouteState) -> dict[str, Any]:
        return {"steps": ["decide"]}

    def route(state: RouteState) -> str:
        return "again" if len(state["steps"]) < 3 else "done"

    g = StateGraph(RouteState)
    g.add_node("decide", decide)
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", route, {"again": "decide", "done": END})
    g.compile().invoke({"steps": []})
    runs = sorted(spans.named("decide"), key=lambda s: s.start_time or 0)
    assert len(runs) == 3
    for first in runs[:2]:
        (event,) = spans.events(first, sc.EVENT_DECISION)
        assert event[sc.ORCH_TARGET_AGENT] == "decide"
        assert set(event[sc.ORCH_DECISION_OPTIONS]) == {"decide", END}
    stop = {sc.ORCH_REASON: "conditional_edge", sc.ORCH_FROM: "decide"}
    assert spans.events(runs[2], sc.EVENT_STOP) == [stop]
    assert spans.events(runs[2], sc.EVENT_DECISION) == []
    assert spans.events(spans.one("invoke_workflow LangGraph"), sc.EVENT_STOP) == []  # the route said it


def test_a_run_ending_without_a_next_node_is_a_stop_by_its_last_node(spans: Spans) -> None:
    def step(name: str) -> Any:
        return lambda state: {"steps": [name]}

    g = StateGraph(RouteState)
    g.add_node("draft", step("draft"))
    g.add_node("review", step("review"))
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")  # review has no outgoing edge: the run ends after it
    g.compile(name="pipeline").invoke({"steps": []})
    stop = {sc.ORCH_REASON: "no_next_node", sc.ORCH_FROM: "review"}
    assert spans.events(spans.one("invoke_workflow pipeline"), sc.EVENT_STOP) == [stop]
    assert all(spans.events(s, sc.EVENT_STOP) == [] for s in spans.named("draft") + spans.named("review"))


@pytest.mark.parametrize("slower", ["check", "audit"])
def test_a_run_ending_after_parallel_nodes_names_the_same_one_whichever_finished_last(
    spans: Spans, slower: str
) -> None:
    def step(name: str) -> Any:
        def run(state: RouteState) -> dict[str, Any]:
            if name == slower:
                time.sleep(0.05)  # the other one of the step finishes first
            return {"steps": [name]}

        return run

    g = StateGraph(RouteState)
    for name in ("draft", "check", "audit"):
        g.add_node(name, step(name))
    g.add_edge(START, "draft")
    g.add_edge("draft", "check")  # check and audit run in one step, in parallel; neither has a next node
    g.add_edge("draft", "audit")
    g.compile(name="pipeline").invoke({"steps": []})
    ends = {name: spans.one(name).end_time or 0 for name in ("check", "audit")}
    assert max(ends, key=ends.__getitem__) == slower
    stop = {sc.ORCH_REASON: "no_next_node", sc.ORCH_FROM: "audit"}  # the first of the step by name
    assert spans.events(spans.one("invoke_workflow pipeline"), sc.EVENT_STOP) == [stop]


def inner_graph() -> Any:
    def step(state: RouteState) -> dict[str, Any]:
        return {"steps": ["inner"]}

    g = StateGraph(RouteState)
    g.add_node("step", step)
    g.add_edge(START, "step")
    return g.compile(name="inner")


def test_subgraph_as_node_is_an_agent_with_its_workflow_nested(spans: Spans) -> None:
    g = StateGraph(RouteState)
    g.add_node("team", inner_graph())
    g.add_edge(START, "team")
    g.compile(name="outer").invoke({"steps": []})
    outer = spans.one("invoke_workflow outer")
    team = spans.one("invoke_agent team")
    assert spans.parent(team) is outer
    assert team.attributes[sc.GEN_AI_AGENT_NAME] == "team"
    assert team.attributes[sc.GEN_AI_AGENT_ID] == team.attributes[sc.LANGGRAPH_TASK_ID]
    inner = spans.one("invoke_workflow inner")
    assert spans.parent(inner) is team
    assert inner.attributes[sc.LANGGRAPH_CHECKPOINT_NS] == team.attributes[sc.LANGGRAPH_CHECKPOINT_NS]
    assert spans.parent(spans.one("step")) is inner


@pytest.mark.parametrize("agent", [False, True])
def test_a_graphs_only_node_named_like_the_graph_is_a_node_of_its_run(spans: Spans, agent: bool) -> None:
    """Graph ``team`` whose one node is ``team`` (a plain node, or a subgraph agent): the run spawns the node,
    the subgraph's inner node stays the agent's inner working, and the run's stop names the node."""
    g = StateGraph(RouteState)
    g.add_node("team", inner_graph() if agent else (lambda state: {"steps": ["team"]}))
    g.add_edge(START, "team")
    g.compile(name="team").invoke({"steps": []})
    written, _ = convert(spans.all)
    assert [(e["agent"], e["to"], e["to_activation"]) for e in written["events"] if e["type"] == "spawn"] == [
        ("team", "team", 2)]
    assert {e["agent"] for e in written["events"]} == {"team"}
    (stop,) = [e for e in written["events"] if e.get("decision") == "stop"]
    assert (stop["activation"], stop["from"], stop["from_activation"]) == (1, "team", 2)


def test_subgraph_called_from_a_function_node_nests_under_it(spans: Spans) -> None:
    sub = inner_graph()

    def caller(state: RouteState) -> dict[str, Any]:
        return {"steps": sub.invoke({"steps": []})["steps"]}

    g = StateGraph(RouteState)
    g.add_node("caller", caller)
    g.add_edge(START, "caller")
    g.compile(name="outer").invoke({"steps": []})
    inner = spans.one("invoke_workflow inner")
    caller_span = spans.parent(inner)
    assert caller_span is not None and caller_span.attributes[sc.LANGGRAPH_NODE] == "caller"


def test_agent_marker_in_node_metadata(spans: Spans) -> None:
    g = StateGraph(RouteState)
    g.add_node("planner", lambda s: {"steps": ["p"]},
               metadata={AGENT_METADATA_KEY: True, AGENT_ROLE_METADATA_KEY: "planner"})
    g.add_node("plain", lambda s: {"steps": ["q"]})
    g.add_edge(START, "planner")
    g.add_edge("planner", "plain")
    g.compile().invoke({"steps": []})
    planner = spans.one("invoke_agent planner")
    assert planner.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_INVOKE_AGENT
    assert planner.attributes[sc.ORCH_AGENT_ROLE] == "planner"
    assert sc.ORCH_OPERATION not in planner.attributes
    assert spans.one("plain").attributes[sc.ORCH_OPERATION] == sc.OPERATION_NODE


def approval_graph(subgraph: bool = False) -> Any:
    def ask(state: RouteState) -> dict[str, Any]:
        answer = interrupt({"question": "approve?"})
        return {"steps": [f"answer:{answer}"]}

    g = StateGraph(RouteState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    if not subgraph:
        return g.compile(checkpointer=InMemorySaver(), name="approval")
    outer = StateGraph(RouteState)
    outer.add_node("reviewer", g.compile(name="review"))
    outer.add_edge(START, "reviewer")
    return outer.compile(checkpointer=InMemorySaver(), name="approval")


@pytest.mark.parametrize("subgraph", [False, True])
def test_interrupt_and_resume_are_one_episode(spans: Spans, subgraph: bool) -> None:
    graph = approval_graph(subgraph)
    config = {"configurable": {"thread_id": "thread-7"}}
    first = graph.invoke({"steps": []}, config)
    assert "__interrupt__" in first
    runs = spans.named("invoke_workflow approval")
    assert len(runs) == 1
    ask = spans.one("ask")
    (asked,) = spans.events(ask, sc.EVENT_HUMAN_INTERVENTION)
    assert asked[sc.ORCH_HUMAN_KIND] == "interrupt" and asked[sc.ORCH_HUMAN_ACTOR] == "ask"
    interrupts = [e for s in spans.all for e in spans.events(s, sc.EVENT_HUMAN_INTERVENTION)]
    assert len(interrupts) == 1  # recorded once, not again by every graph it bubbles through
    assert all(spans.events(s, sc.EVENT_STOP) == [] for s in spans.all)  # paused, not stopped
    assert_no_errors(spans)

    spans.clear()
    second = graph.invoke(Command(resume="yes"), config)
    assert second["steps"] == ["answer:yes"]
    resumed = spans.one("invoke_workflow approval")
    (resume,) = spans.events(resumed, sc.EVENT_HUMAN_INTERVENTION)
    assert resume[sc.ORCH_HUMAN_KIND] == "resume"
    stops = [e for s in spans.all for e in spans.events(s, sc.EVENT_STOP)]
    assert len(stops) == 1  # the resumed run finishes: one stop, whichever way its graph ends
    assert resumed.attributes[sc.ORCH_EPISODE_ID] == runs[0].attributes[sc.ORCH_EPISODE_ID] != "thread-7"
    assert resumed.context.trace_id != runs[0].context.trace_id
    (link,) = resumed.links
    assert link.attributes is not None and link.attributes[sc.ORCH_LINK_TYPE] == sc.LINK_RESUME_OF
    assert link.context.span_id == ask.context.span_id
    assert_no_errors(spans)


def worker_agent(name: str, reply: str) -> Any:
    return create_react_agent(ScriptedChatModel(replies=[AIMessage(reply)]), [], name=name)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "astream"])
async def test_supervisor_handoff_is_a_delegate_not_an_error(spans: Spans, mode: str) -> None:
    from langgraph_supervisor import create_supervisor

    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[tool_call("transfer_to_researcher", {}, "h1")]),
        AIMessage("all done"),
    ])
    app = create_supervisor([worker_agent("researcher", "found it"), worker_agent("writer", "wrote it")],
                            model=model).compile(name="team")
    inputs = {"messages": [HumanMessage("research please")]}
    if mode == "invoke":
        out = app.invoke(inputs)
    elif mode == "ainvoke":
        out = await app.ainvoke(inputs)
    else:
        out = [c async for c in app.astream(inputs, stream_mode="values")][-1]
    assert out["messages"][-1].content == "all done"
    stop = {sc.ORCH_REASON: "no_next_node", sc.ORCH_FROM: "supervisor"}  # its final answer ends the run
    assert spans.events(spans.one("invoke_workflow team"), sc.EVENT_STOP) == [stop]
    supervisor_runs = spans.named("invoke_agent supervisor")
    handoffs = [(s, e) for s in supervisor_runs for e in spans.events(s, sc.EVENT_DELEGATE)]
    assert len(handoffs) == 1
    span, event = handoffs[0]
    assert event[sc.ORCH_HANDOFF] is True
    assert event[sc.ORCH_FROM] == "supervisor" and event[sc.ORCH_TO] == "researcher"
    assert event[sc.ORCH_TARGET_AGENT] == "researcher"
    researcher = spans.one("invoke_agent researcher")
    assert spans.parent(researcher) is spans.one("invoke_workflow team")
    assert researcher.start_time is not None and span.end_time is not None
    assert researcher.start_time >= span.end_time  # control really moved after the handoff
    (tool,) = spans.named("execute_tool transfer_to_researcher")
    assert tool.attributes[sc.GEN_AI_TOOL_CALL_ID] == "h1"
    assert_no_errors(spans)


def test_swarm_handoff_between_peers(spans: Spans) -> None:
    from langgraph_swarm import create_handoff_tool, create_swarm

    alice = create_react_agent(
        ScriptedChatModel(replies=[AIMessage("", tool_calls=[tool_call("transfer_to_bob", {}, "s1")])]),
        [create_handoff_tool(agent_name="bob")], name="alice")
    bob = create_react_agent(ScriptedChatModel(replies=[AIMessage("bob here")]),
                             [create_handoff_tool(agent_name="alice")], name="bob")
    app = create_swarm([alice, bob], default_active_agent="alice").compile(name="swarm")
    out = app.invoke({"messages": [HumanMessage("hello")]})
    assert out["messages"][-1].content == "bob here"
    (delegate,) = spans.events(spans.one("invoke_agent alice"), sc.EVENT_DELEGATE)
    assert delegate[sc.ORCH_HANDOFF] is True
    assert (delegate[sc.ORCH_FROM], delegate[sc.ORCH_TO]) == ("alice", "bob")
    assert spans.parent(spans.one("invoke_agent bob")) is spans.one("invoke_workflow swarm")
    assert_no_errors(spans)


def test_functional_api_tasks_nest_under_the_entrypoint(spans: Spans) -> None:
    from langgraph.func import entrypoint, task

    @task
    def double(x: int) -> int:
        return 2 * x

    @entrypoint()
    def workflow(xs: list[int]) -> int:
        return sum(f.result() for f in [double(x) for x in xs])

    assert workflow.invoke([1, 2, 3]) == 12
    run = spans.one("invoke_workflow LangGraph")  # an entrypoint keeps LangGraph's default graph name
    (entry,) = [s for s in spans.named("workflow") if spans.parent(s) is run]
    doubles = spans.named("double")
    assert len(doubles) == 3 and all(spans.parent(d) is entry for d in doubles)


def test_command_goto_send_packets_are_spawns(spans: Spans) -> None:
    def dispatch(state: MapState) -> Command:
        return Command(goto=[Send("work", {"items": [i], "results": []}) for i in ("p", "q")])

    def work(state: MapState) -> dict[str, Any]:
        return {"results": [state["items"][0]]}

    g = StateGraph(MapState)
    g.add_node("dispatch", dispatch, destinations=("work",))
    g.add_node("work", work)
    g.add_edge(START, "dispatch")
    g.compile().invoke({"items": [], "results": []})
    dispatch_span = spans.one("dispatch")
    (decision,) = spans.events(dispatch_span, sc.EVENT_DECISION)
    assert decision[sc.ORCH_DECISION_KIND] == sc.DECISION_SPAWN
    assert [e[sc.ORCH_TARGET_AGENT] for e in spans.events(dispatch_span, sc.EVENT_SPAWN)] == ["work", "work"]


def test_episode_id_is_configurable() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from orchestrace_langgraph import LangGraphInstrumentor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(tracer_provider=provider,
                            episode_id=lambda config: config["configurable"].get("session"))
    try:
        approval_graph().invoke({"steps": []}, {"configurable": {"thread_id": "t1", "session": "s-42"}})
    finally:
        instrumentor.uninstrument()
    (run,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_workflow approval"]
    assert run.attributes[sc.ORCH_EPISODE_ID] == "s-42"
    assert run.attributes[sc.LANGGRAPH_THREAD_ID] == "t1"


def test_react_agent_tools_under_tool_node(spans: Spans) -> None:
    from langchain_core.tools import tool

    @tool
    def lookup(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city}"

    @tool
    def broken(city: str) -> str:
        """Always fails."""
        raise ValueError("no data")

    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[tool_call("lookup", {"city": "Oslo"}, "c1"),
                                  tool_call("broken", {"city": "x"}, "c2")]),
        AIMessage("It is sunny."),
    ])
    agent = create_react_agent(model, ToolNode([lookup, broken], handle_tool_errors=True), name="weather")
    agent.invoke({"messages": [HumanMessage("weather?")]})
    ok = spans.one("execute_tool lookup")
    assert ok.attributes[sc.GEN_AI_TOOL_CALL_ID] == "c1"
    assert ok.attributes[sc.GEN_AI_TOOL_NAME] == "lookup"
    assert spans.parent_name(ok) == "tools"
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in ok.attributes  # capture is off
    failed = spans.one("execute_tool broken")
    assert failed.status.status_code == StatusCode.ERROR
    # ToolNode turned the error into a message: its node and the run did not fail
    assert all(s.status.status_code != StatusCode.ERROR for s in spans.named("tools"))
    chats = spans.named("chat scripted-model")
    assert len(chats) == 2 and all(spans.parent_name(c) == "agent" for c in chats)


def test_user_exception_passes_through_unchanged(spans: Spans) -> None:
    boom = RuntimeError("boom")

    def explode(state: RouteState) -> dict[str, Any]:
        raise boom

    g = StateGraph(RouteState)
    g.add_node("explode", explode)
    g.add_edge(START, "explode")
    with pytest.raises(RuntimeError) as caught:
        g.compile(name="fails").invoke({"steps": []})
    assert caught.value is boom
    node = spans.one("explode")
    assert node.status.status_code == StatusCode.ERROR
    assert spans.one("invoke_workflow fails").status.status_code == StatusCode.ERROR
    assert any(e.name == "exception" for e in node.events)


def test_internal_errors_are_swallowed(spans: Spans, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    import orchestrace_langgraph.nodes as nodes
    import orchestrace_langgraph.workflow as workflow

    def broken(value: Any) -> str:
        raise KeyError("internal")

    monkeypatch.setattr(nodes, "content_ref", broken)
    monkeypatch.setattr(workflow, "content_ref", broken)
    for _ in range(2):
        out = map_reduce().invoke({"items": [], "results": []})
        assert out["results"][-1] == "X+Y+Z"
    assert spans.named("invoke_workflow mapreduce") == []  # the run's span could not start: the run went on
    assert len(spans.named("work")) == 6  # node spans still ended
    # logged once per place (run start, a Send's payload at its node's start, node end), not once per node
    logged = [r for r in caplog.records if r.name == "orchestrace" and "KeyError" in str(r.exc_info)]
    assert len(logged) == 3
