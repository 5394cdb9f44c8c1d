"""Held-out graphs (neutral names): one decision per routing choice, made by its decider, carried out by the
spawn it led to; stable names plus activations; tool nodes are not agents; in every execution mode."""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any, TypedDict

import pytest
from episodes import MODES, check_causality, decisions, run_graph
from heldout_graphs import Case, desk, handoff_team, review_flow, router_from_start, tool_loop
from langchain_core.messages import HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from span_checks import Spans
from written_traces import convert, of_type

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize("mode", MODES)
async def test_each_choice_is_one_decision_by_its_decider(spans: Spans, mode: str) -> None:
    await run_graph(desk(), {"n": 0}, None, mode)
    written, _ = convert(spans.all)
    assert decisions(written) == [
        ("desk", 1, "delegate", "dispatcher", "edge", None),  # START's fixed edge: the graph's wiring
        ("dispatcher", 1, "delegate", "pricing", "command", None),
        ("pricing", 1, "delegate", "dispatcher", "conditional_edge", None),
        ("dispatcher", 2, "spawn", "shard", None, None),  # one decision for the three Sends
        ("desk", 1, "delegate", "merge", "edge", None),  # once, though three shards completed
        ("desk", 1, "delegate", "dispatcher", "edge", None),
        ("dispatcher", 3, "stop", None, "command", None),
    ]
    check_causality(written)
    spawns = [(e["agent"], e.get("activation"), e["to"], e["to_activation"])
              for e in of_type(written, "spawn")]
    assert spawns == [
        ("desk", 1, "dispatcher", 1), ("desk", 1, "pricing", 1), ("desk", 1, "dispatcher", 2),
        ("dispatcher", 2, "shard", 1), ("dispatcher", 2, "shard", 2), ("dispatcher", 2, "shard", 3),
        ("desk", 1, "merge", 1), ("desk", 1, "dispatcher", 3),
    ]
    (stop,) = [e for e in of_type(written, "orchestrator_decision") if e.get("decision") == "stop"]
    assert (stop["agent"], stop["activation"]) == ("dispatcher", 3)
    (aggregate,) = of_type(written, "aggregate")
    assert aggregate["agent"] == "merge"
    assert len([e for e in written["edges"] if e["type"] == "aggregate" and e["dst"] == aggregate["id"]]) == 3


def test_the_decision_of_a_node_is_linked_to_the_delegation_it_led_to(spans: Spans) -> None:
    desk().invoke({"n": 0})
    written, _ = convert(spans.all)
    by_id = {e["id"]: e for e in written["events"]}
    (chose,) = [e for e in of_type(written, "orchestrator_decision") if e.get("reason") == "command"
                and e.get("decision") == "delegate"]
    def after(src: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        return [by_id[x["dst"]] for x in written["edges"] if x["type"] == kind and x["src"] == src["id"]]

    (spawn,) = after(chose, "spawn")
    assert spawn["to"] == "pricing"
    (first,) = after(spawn, "causal")
    assert (first["agent"], first.get("decision"), first.get("to"), first.get("to_activation")) == (
        "pricing", "delegate", "dispatcher", 2)


@pytest.mark.parametrize("mode", MODES)
async def test_a_conditional_edge_from_start_is_the_runs_one_decision(spans: Spans, mode: str) -> None:
    await run_graph(router_from_start(), {"topic": "money"}, None, mode)
    written, _ = convert(spans.all)
    assert decisions(written) == [
        ("frontdesk", 1, "delegate", "billing", "conditional_edge", None),
        ("billing", 1, "stop", None, "conditional_edge", None),
    ]
    check_causality(written)


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_node_is_not_an_agent(spans: Spans, mode: str) -> None:
    await run_graph(tool_loop(), {"messages": [HumanMessage("bolts?")]}, None, mode)
    written, episode = convert(spans.all)
    agents = {e["agent"] for e in written["events"] if e["type"] != "tool_result"}
    assert agents == {"shop", "clerk"}
    (call,) = of_type(written, "tool_call")
    assert (call["agent"], call["activation"], call["tool"]) == ("clerk", 1, "inventory")  # who asked for it
    assert decisions(written) == [
        ("shop", 1, "delegate", "clerk", "edge", None),
        ("shop", 1, "delegate", "clerk", "edge", None),  # the tool node's fixed edge back
        ("clerk", 2, "stop", None, "conditional_edge", None),
    ]
    assert of_type(written, "aggregate") == []
    check_causality(written)
    assert [(t.agent, t.activation) for t in episode.turns] == [("clerk", 1), ("clerk", 2)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_command_parent_handoff_is_the_handing_off_agents_decision(spans: Spans, mode: str) -> None:
    await run_graph(handoff_team(), {"log": []}, None, mode)
    written, _ = convert(spans.all)
    assert decisions(written) == [
        ("claims", 1, "delegate", "intake", "edge", None),
        ("intake", 1, "delegate", "settlement", "command_parent", True),
        ("claims", 1, "stop", None, "no_next_node", None),
    ]
    check_causality(written)
    (stop,) = [e for e in of_type(written, "orchestrator_decision") if e.get("decision") == "stop"]
    assert stop["from"] == "settlement"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pause", ["interrupt", "interrupt_before", "interrupt_after"])
async def test_breakpoints_and_interrupts_record_the_human_and_the_resume(
    spans: Spans, mode: str, pause: str
) -> None:
    kwargs = {pause: ["draft"]} if pause != "interrupt" else {}
    graph = review_flow(**kwargs)
    config = {"configurable": {"thread_id": f"t-{mode}-{pause}"}}
    await run_graph(graph, {"log": []}, config, mode)
    resumes = 2 if pause != "interrupt" else 1  # a breakpoint pauses before interrupt() pauses again
    for _ in range(resumes):
        state = graph.get_state(config)
        resume: Any = Command(resume="yes") if state.interrupts else None
        await run_graph(graph, resume, config, mode)
    assert graph.get_state(config).values["log"] == ["draft", "approved:yes", "sent"]
    written, _ = convert(spans.all)
    humans = [(e["agent"], e.get("label")) for e in of_type(written, "human_intervention")]
    paused = [label for _, label in humans if label != "resume"]
    expected = ["interrupt"] if pause == "interrupt" else [pause, "interrupt"]
    assert paused == expected
    assert [label for _, label in humans].count("resume") == len(expected)
    stops = [e for e in of_type(written, "orchestrator_decision") if e.get("decision") == "stop"]
    assert len(stops) == 1 and stops[0]["from"] == "send"  # paused runs do not stop
    check_causality(written)
    # the node that asked runs again on the resume: the graph's doing, and it says so
    assert [d[:5] for d in decisions(written) if d[2] == "delegate"] == [
        ("mailer", 1, "delegate", "draft", "edge"), ("mailer", 1, "delegate", "approve", "edge"),
        ("mailer", 1, "delegate", "approve", "resume"), ("mailer", 1, "delegate", "send", "edge"),
    ]
    returns = [(e["agent"], e["activation"]) for e in of_type(written, "return") if e["agent"] != "mailer"]
    assert returns == [("draft", 1), ("approve", 1), ("approve", 2), ("send", 1)]


def test_a_stop_names_the_activation_that_ran_not_a_later_one(spans: Spans) -> None:
    g = StateGraph(Case)
    g.add_node("probe", lambda state: {"log": ["probed"]})
    g.add_edge(START, "probe")
    graph = g.compile(name="scanner")
    graph.invoke({"log": []})
    graph.invoke({"log": []})
    written, _ = convert(spans.all)  # both runs as one episode: the runs are one instance, probe runs twice
    stops = [e for e in of_type(written, "orchestrator_decision") if e.get("decision") == "stop"]
    assert [(s["from"], s["from_activation"]) for s in stops] == [("probe", 1), ("probe", 2)]


class SeenState(TypedDict):
    seen: Annotated[list[str], operator.add]


def _diamond(slower: str) -> Any:
    """START -> split -> left and right (one step, in parallel; ``slower`` finishes last) -> join."""

    def node(name: str) -> Any:
        def run(state: SeenState) -> dict[str, Any]:
            if name == slower:
                time.sleep(0.05)
            return {"seen": [name]}

        return run

    g = StateGraph(SeenState)
    for name in ("split", "left", "right", "join"):
        g.add_node(name, node(name))
    g.add_edge(START, "split")
    g.add_edge("split", "left")
    g.add_edge("split", "right")
    g.add_edge("left", "join")
    g.add_edge("right", "join")
    return g.compile(name="diamond")


@pytest.mark.parametrize("slower", ["left", "right"])
def test_a_fixed_route_comes_after_every_return_of_the_step_that_took_it(spans: Spans, slower: str) -> None:
    _diamond(slower).invoke({"seen": []})
    written, _ = convert(spans.all)
    events = written["events"]
    returns = [e for e in events if e["type"] == "return" and e["agent"] in ("left", "right")]
    assert returns[-1]["agent"] == slower
    (to_join,) = [e for e in events if e.get("decision") == "delegate" and e.get("to") == "join"]
    # LangGraph follows the route once the step has ended: after both returns, whichever took it first
    assert int(to_join["id"][1:]) > max(int(e["id"][1:]) for e in returns)
    check_causality(written)
    by_id = {e["id"]: e for e in events}
    led_to_join = {by_id[x["src"]]["agent"] for x in written["edges"]
                   if x["dst"] == to_join["id"] and x["type"] == "return"}
    assert led_to_join == {"left", "right"}
