"""Spans of a small LangGraph agent run under another project's LangChain instrumentor, written as OTLP-JSON.

Run as a script (``python foreign_spans.py openinference|openllmetry OUT_DIR``), in its own process: these
instrumentors patch LangChain and LangGraph globally and do not all undo it (OpenLLMetry's ``uninstrument``
leaves its ``Pregel.stream`` patch), which would leak into every later test of the session. It runs each
graph once, the agent first, and writes ``OUT_DIR/agent.jsonl``, ``OUT_DIR/fanout.jsonl`` and
``OUT_DIR/experts.jsonl``.
"""

from __future__ import annotations

import operator
import sys
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Send
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace.exporters import OtlpJsonFileExporter


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class _ToolCallingFake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> _ToolCallingFake:
        return self


def run_graph() -> None:
    """agent -> tools -> agent: one tool call, then the answer."""
    model = _ToolCallingFake(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "call_add"}],
                    usage_metadata={"input_tokens": 11, "output_tokens": 7, "total_tokens": 18},
                ),
                AIMessage(
                    content="2 + 3 = 5",
                    usage_metadata={"input_tokens": 25, "output_tokens": 6, "total_tokens": 31},
                ),
            ]
        )
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([add]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    result = graph.compile(name="calculator").invoke({"messages": [("user", "What is 2 + 3?")]})
    assert result["messages"][-1].content == "2 + 3 = 5"


class FanState(TypedDict, total=False):
    items: list[int]
    done: Annotated[list[int], operator.add]
    total: int


def run_fan_out() -> None:
    """plan -> Send("work") x3 (a conditional edge) -> gather (the reducer)."""
    graph = StateGraph(FanState)
    graph.add_node("plan", lambda state: {"items": [1, 2, 3]})
    graph.add_node("work", lambda state: {"done": [state["items"][0] * 10]})
    graph.add_node("gather", lambda state: {"total": sum(state["done"])})
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", lambda state: [Send("work", {"items": [i]}) for i in state["items"]],
                                ["work"])
    graph.add_edge("work", "gather")
    graph.add_edge("gather", END)
    result = graph.compile(name="fan").invoke({"items": []})
    assert result["total"] == 60


def run_experts() -> None:
    """lead -> Send to each of 8 differently named nodes (one fan-out), each asking a model -> tally (their
    reducer): a fan-in whatever the nodes are called."""
    model = _ToolCallingFake(messages=iter([AIMessage(content=f"view {i}") for i in range(9)]))
    experts = [f"desk {i}" for i in range(8)]
    graph = StateGraph(FanState)
    graph.add_node("lead", lambda state: {"items": list(range(8))})
    for i, name in enumerate(experts):
        graph.add_node(name, lambda state, i=i: {"done": [len(str(model.invoke(f"q{i}").content))]})
        graph.add_edge(name, "tally")
    graph.add_node("tally", lambda state: {"total": len(state["done"])})
    graph.add_edge(START, "lead")
    packets = [Send(name, {"items": [i]}) for i, name in enumerate(experts)]
    graph.add_conditional_edges("lead", lambda state: packets, experts)
    graph.add_edge("tally", END)
    result = graph.compile(name="panel").invoke({"items": []})
    assert result["total"] == 8


def main(which: str, out: str) -> None:
    memory = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(memory))
    if which == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tp)
    elif which == "openllmetry":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tp)
    else:
        raise SystemExit(f"unknown instrumentation {which!r}")
    for shape, run in (("agent", run_graph), ("fanout", run_fan_out), ("experts", run_experts)):
        run()
        exporter = OtlpJsonFileExporter(f"{out}/{shape}.jsonl")
        exporter.export(memory.get_finished_spans())
        exporter.shutdown()
        memory.clear()
    tp.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:3])
