"""Decorated functions under the integration: a LangChain tool made of an ``@ot.tool`` function, a LangGraph
agent node made of an ``@ot.agent`` one. One span per call, not one per layer; the SDK sees an agent node as
the running agent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import orchestrace as ot
import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from orchestrace import semconv as sc
from orchestrace.config import set_config
from orchestrace.context import AgentFrame, current_agent
from span_checks import Spans


@pytest.fixture
def both(spans: Spans) -> Iterator[Spans]:
    """The integration and the SDK decorators exporting to the same provider."""
    handle = ot.configure(exporter="memory", tracer_provider=spans.provider, batch=False)
    yield spans
    handle.shutdown()
    set_config(None)


def run_tool(lc_tool: BaseTool, args: dict[str, Any], asynchronous: bool = False) -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([lc_tool]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    inputs = {"messages": [AIMessage("", tool_calls=[{"name": lc_tool.name, "args": args, "id": "c1"}])]}
    if asynchronous:
        asyncio.run(graph.ainvoke(inputs))
    else:
        graph.invoke(inputs)


def tool_spans(spans: Spans) -> list[Any]:
    return [s for s in spans.all if s.name.startswith("execute_tool ")]


def test_decorated_function_under_a_langchain_tool_is_one_span(both: Spans) -> None:
    @tool
    @ot.tool(trusted=True)
    def lookup(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city}"

    run_tool(lookup, {"city": "Oslo"})
    (span,) = tool_spans(both)
    assert span.name == "execute_tool lookup"
    assert both.parent_name(span) == "tools"
    assert span.attributes[sc.GEN_AI_TOOL_CALL_ID] == "c1"  # the integration's span: it knows the call id
    assert span.attributes[sc.ORCH_TOOL_TRUSTED] is True  # the decorator's option is kept
    assert sc.ORCH_OUTPUT_REF in span.attributes


def test_async_decorated_function_under_a_langchain_tool_is_one_span(both: Spans) -> None:
    @tool
    @ot.tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        await asyncio.sleep(0)
        return f"<html>{url}</html>"

    run_tool(fetch, {"url": "http://x"}, asynchronous=True)
    (span,) = tool_spans(both)
    assert span.name == "execute_tool fetch"
    assert both.parent_name(span) == "tools"


def test_recursive_calls_of_the_decorated_function_keep_their_spans(both: Spans) -> None:
    def countdown(n: int) -> str:
        """Count down to zero."""
        return "zero" if n == 0 else traced(n - 1)

    traced: Callable[[int], str] = ot.tool(countdown)
    run_tool(tool(traced), {"n": 2})
    spans = tool_spans(both)
    assert [s.name for s in spans] == ["execute_tool countdown"] * 3  # n = 0, 1 (decorator), 2 (integration)
    inner, middle, outer = spans
    assert both.parent(inner) == middle and both.parent(middle) == outer
    assert both.parent_name(outer) == "tools"


def test_a_decorated_helper_inside_a_plain_langchain_tool_keeps_its_span(both: Spans) -> None:
    @ot.tool
    def geocode(city: str) -> str:
        return f"{city}: 59.9N"

    @tool
    def locate(city: str) -> str:
        """Where a city is."""
        return geocode(city)

    run_tool(locate, {"city": "Oslo"})
    helper, outer = tool_spans(both)
    assert (helper.name, outer.name) == ("execute_tool geocode", "execute_tool locate")
    assert both.parent(helper) == outer
    # Outside any LangChain tool the decorated function is traced as always.
    both.clear()
    assert geocode("Bergen") == "Bergen: 59.9N"
    assert [s.name for s in tool_spans(both)] == ["execute_tool geocode"]


def run_node(fn: Callable[[Any], Any], as_agent: bool) -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("research", fn, metadata={"orchestrace.agent": True} if as_agent else None)
    builder.add_edge(START, "research")
    builder.add_edge("research", END)
    builder.compile().invoke({"messages": []})


def test_decorated_function_of_an_agent_node_is_one_agent_span(both: Spans) -> None:
    seen: list[AgentFrame | None] = []

    @ot.agent("researcher")
    def research(state: Any) -> dict[str, Any]:
        seen.append(current_agent())
        ot.message("writer", "notes")
        return {"messages": [AIMessage("found")]}

    run_node(research, as_agent=True)
    (span,) = [s for s in both.all if s.name.startswith("invoke_agent ")]
    assert span.name == "invoke_agent research"  # the node's agent, as without the decorator
    assert [e.name for e in span.events] == [sc.EVENT_MESSAGE]
    assert seen == [AgentFrame("research", str(span.attributes[sc.GEN_AI_AGENT_ID]), None)]


def test_agent_called_inside_an_agent_node_has_the_node_as_its_parent(both: Spans) -> None:
    @ot.agent
    def helper() -> str:
        return "done"

    def research(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(helper())]}

    run_node(research, as_agent=True)
    node, inner = both.one("invoke_agent research"), both.one("invoke_agent helper")
    assert both.parent(inner) == node
    assert inner.attributes[sc.ORCH_AGENT_PARENT_ID] == node.attributes[sc.GEN_AI_AGENT_ID]


def test_decorated_function_of_a_plain_node_keeps_its_agent_span(both: Spans) -> None:
    @ot.agent
    def research(state: Any) -> dict[str, Any]:
        frame = current_agent()
        assert frame is not None and frame.name == "research"
        return {"messages": [AIMessage("found")]}

    run_node(research, as_agent=False)
    agent = both.one("invoke_agent research")
    assert both.parent_name(agent) == "research"  # the node span, not an agent
    assert sc.ORCH_AGENT_PARENT_ID not in agent.attributes
