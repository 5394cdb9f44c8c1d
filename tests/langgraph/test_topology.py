"""Topology from structure and declared roles, never from names: one LangGraph app per topology, each
compiled under names that would mislead a name-based guess."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from heldout_graphs import desk
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from orchestrace_langgraph import AGENT_METADATA_KEY, AGENT_ROLE_METADATA_KEY
from span_checks import Spans
from written_traces import convert


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    turns: int


def roles_chain(name: str, nodes: tuple[str, str, str], roles: tuple[str, ...] | None) -> Any:
    """Three agent nodes in a row; ``roles``: their declared roles (none declared when None)."""
    g = StateGraph(Log)
    for k, node in enumerate(nodes):
        metadata: dict[str, Any] = {AGENT_METADATA_KEY: True}
        if roles is not None:
            metadata[AGENT_ROLE_METADATA_KEY] = roles[k]
        g.add_node(node, lambda state, node=node: {"log": [node]}, metadata=metadata)
    g.add_edge(START, nodes[0])
    g.add_edge(nodes[0], nodes[1])
    g.add_edge(nodes[1], nodes[2])
    return g.compile(name=name)


def nested_teams(name: str) -> Any:
    """A graph of two agents (subgraphs) whose graphs have agents of their own: two delegating levels above
    the innermost agents."""
    leaf = StateGraph(Log)
    leaf.add_node("step", lambda state: {"log": ["step"]})
    leaf.add_edge(START, "step")
    inner = StateGraph(Log)
    inner.add_node("unit_a", leaf.compile(name="unit_a"))
    inner.add_node("unit_b", leaf.compile(name="unit_b"))
    inner.add_edge(START, "unit_a")
    inner.add_edge("unit_a", "unit_b")
    outer = StateGraph(Log)
    outer.add_node("division", inner.compile(name="division"))
    outer.add_node("branch", inner.compile(name="branch"))
    outer.add_edge(START, "division")
    outer.add_edge("division", "branch")
    return outer.compile(name=name)


def relay(name: str) -> Any:
    """Two agents hand control to each other (``Command.PARENT``) until three turns passed: peers, a swarm."""

    def hand(me: str, other: str) -> Any:
        def step(state: Log) -> Command:
            turns = state.get("turns", 0)
            if turns >= 3:
                return Command(update={"log": [me]})
            return Command(graph=Command.PARENT, goto=other, update={"log": [me], "turns": turns + 1})

        sub = StateGraph(Log)
        sub.add_node("act", step)
        sub.add_edge(START, "act")
        return sub.compile(name=me)

    g = StateGraph(Log)
    g.add_node("north", hand("north", "south"), destinations=("south",))
    g.add_node("south", hand("south", "north"), destinations=("north",))
    g.add_edge(START, "north")
    return g.compile(name=name)


@pytest.mark.parametrize("graph_name", ["plan_exec_critic", "moon_team"])
@pytest.mark.parametrize(
    ("build", "expected"),
    [
        # names that look like a planner, an executor and a critic, no roles declared: just a graph
        (lambda n: roles_chain(n, ("planner", "executor", "critic"), None), "centralized"),
        # neutral names, declared roles
        (lambda n: roles_chain(n, ("alpha", "beta", "gamma"), ("planner", "executor", "reviewer")),
         "planner_executor_critic"),
        (lambda n: desk(), "centralized"),
        (nested_teams, "hierarchical"),
        (relay, "swarm"),
    ],
)
def test_topology_from_structure_and_roles(spans: Spans, graph_name: str, build: Any, expected: str) -> None:
    build(graph_name).invoke({"log": []} if build is not desk else {"n": 0})
    written, _ = convert(spans.all)
    assert written["topology"] == expected
