"""Small real LangGraph graphs shared by the tests; nodes record what they ran on for the parent checks."""

from __future__ import annotations

import asyncio
import operator
import threading
from typing import Annotated, Any, TypedDict

from fakes import ScriptedChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from opentelemetry import trace
from opentelemetry.trace import TracerProvider

USER_SPAN = "user-work"


class MessagesState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    threads: Annotated[list[int], operator.add]


def echo_model() -> ScriptedChatModel:
    """Replies ``"reply to <last message>"``: deterministic under any interleaving."""
    return ScriptedChatModel(respond=lambda msgs: AIMessage(f"reply to {msgs[-1].content}"))


def _user_span(provider: TracerProvider, node: str) -> None:
    with trace.get_tracer("user", tracer_provider=provider).start_as_current_span(USER_SPAN) as span:
        span.set_attribute("node", node)


def pipeline(provider: TracerProvider, model: ScriptedChatModel | None = None) -> CompiledStateGraph:
    """START -> a (model call + user span) -> b -> c -> END."""
    llm = model or echo_model()

    def a(state: MessagesState) -> dict[str, Any]:
        _user_span(provider, "a")
        return {"messages": [llm.invoke(state["messages"])]}

    async def a_async(state: MessagesState) -> dict[str, Any]:
        _user_span(provider, "a")
        return {"messages": [await llm.ainvoke(state["messages"])]}

    def b(state: MessagesState) -> dict[str, Any]:
        return {"messages": [HumanMessage("b")]}

    def c(state: MessagesState) -> dict[str, Any]:
        return {"messages": [HumanMessage("c")]}

    from langchain_core.runnables import RunnableLambda

    g = StateGraph(MessagesState)
    g.add_node("a", RunnableLambda(a, afunc=a_async))
    g.add_node("b", b)
    g.add_node("c", c)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(name="pipeline")


def parallel(provider: TracerProvider, *, use_async: bool, width: int = 3) -> CompiledStateGraph:
    """START fans out (static edges) to ``width`` branches running at once, then ``join``."""
    llm = echo_model()
    g = StateGraph(MessagesState)

    def make(name: str) -> Any:
        if use_async:
            async def node(state: MessagesState) -> dict[str, Any]:
                await asyncio.sleep(0.01)
                _user_span(provider, name)
                reply = await llm.ainvoke([HumanMessage(name)])
                await asyncio.sleep(0)
                return {"messages": [reply], "threads": [threading.get_ident()]}
        else:
            def node(state: MessagesState) -> dict[str, Any]:  # type: ignore[misc]
                _user_span(provider, name)
                reply = llm.invoke([HumanMessage(name)])
                return {"messages": [reply], "threads": [threading.get_ident()]}
        return node

    for i in range(width):
        name = f"branch{i}"
        g.add_node(name, make(name))
        g.add_edge(START, name)
        g.add_edge(name, "join")
    g.add_node("join", lambda state: {"messages": [HumanMessage("joined")]})
    g.add_edge("join", END)
    return g.compile(name="parallel")
