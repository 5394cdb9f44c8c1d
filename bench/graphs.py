"""The LangGraph graphs every instrumentation is measured on, driven by deterministic fake chat models.

Real LangGraph graphs (StateGraph, ToolNode, langgraph-supervisor handoffs, Send fan-out); only the model is
fake, and it answers from the conversation alone so that every run of a graph does exactly the same work.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send

#: A policy maps the conversation so far to the model's next message.
Policy = Callable[[Sequence[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answer is a pure function of its input messages (tool calls included)."""

    policy: Policy
    model_name: str = "scripted-fake"

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self.policy(messages)
        reply.usage_metadata = {
            "input_tokens": 10 * len(messages),
            "output_tokens": 5,
            "total_tokens": 10 * len(messages) + 5,
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        # The policy already knows which tools it calls; binding only has to keep the model usable by agents.
        return self


def _tool_call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    )


# --- 1. a chain of three nodes, each one model call ------------------------------------------------------


def chain_graph() -> Any:
    model = ScriptedChatModel(policy=lambda msgs: AIMessage(content=f"step {len(msgs)}"))

    def step(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    for name in ("plan", "act", "review"):
        builder.add_node(name, step)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", "review")
    builder.add_edge("review", END)
    return builder.compile()


# --- 2. a supervisor with three tool-using workers (langgraph-supervisor) ----------------------------------

WORKERS = ("researcher", "coder", "writer")


def _worker_tool(worker: str) -> BaseTool:
    @tool(f"{worker}_lookup")
    def lookup(query: str) -> str:
        """Look something up for the worker."""
        return f"{worker} found: {query}"

    return lookup


def _worker_policy(worker: str) -> Policy:
    def policy(messages: Sequence[BaseMessage]) -> AIMessage:
        # One tool call, then an answer once the tool result is in.
        if isinstance(messages[-1], ToolMessage) and messages[-1].name == f"{worker}_lookup":
            return AIMessage(content=f"{worker} done")
        return _tool_call(f"{worker}_lookup", {"query": "topic"}, f"call-{worker}")

    return policy


def _supervisor_policy(messages: Sequence[BaseMessage]) -> AIMessage:
    # Delegate to each worker in turn, counting the returns already in the conversation, then finish.
    returned = sum(
        1 for m in messages if isinstance(m, ToolMessage) and m.name == "transfer_back_to_supervisor"
    )
    if returned < len(WORKERS):
        worker = WORKERS[returned]
        return _tool_call(f"transfer_to_{worker}", {}, f"handoff-{returned}")
    return AIMessage(content="all done")


def supervisor_graph() -> Any:
    from langgraph_supervisor import create_supervisor

    with warnings.catch_warnings():
        # create_react_agent is what langgraph-supervisor itself builds on; its deprecation is not ours to
        # fix.
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        agents: list[Any] = [
            create_react_agent(ScriptedChatModel(policy=_worker_policy(w)), tools=[_worker_tool(w)], name=w)
            for w in WORKERS
        ]
        return create_supervisor(agents, model=ScriptedChatModel(policy=_supervisor_policy)).compile()


# --- 3. a Send fan-out to N parallel workers and a reducer -------------------------------------------------


class FanOutState(TypedDict):
    topic: str
    results: Annotated[list[str], operator.add]
    summary: str


class WorkerInput(TypedDict):
    topic: str
    index: int


def fanout_graph(width: int) -> Any:
    model = ScriptedChatModel(policy=lambda msgs: AIMessage(content=f"part of {msgs[-1].content}"))

    def dispatch(state: FanOutState) -> list[Send]:
        return [Send("work", {"topic": state["topic"], "index": i}) for i in range(width)]

    def work(state: WorkerInput) -> dict[str, list[str]]:
        reply = model.invoke([HumanMessage(content=f"{state['topic']} #{state['index']}")])
        return {"results": [str(reply.content)]}

    def reduce(state: FanOutState) -> dict[str, str]:
        return {"summary": str(model.invoke([HumanMessage(content=" ".join(state["results"]))]).content)}

    builder = StateGraph(FanOutState)
    builder.add_node("work", work, input_schema=WorkerInput)
    builder.add_node("reduce", reduce)
    builder.add_conditional_edges(START, dispatch, ["work"])
    builder.add_edge("work", "reduce")
    builder.add_edge("reduce", END)
    return builder.compile()


#: Name -> (graph factory, input of one run).
GRAPHS: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {
    "chain3": (chain_graph, {"messages": [HumanMessage(content="start")]}),
    "supervisor3": (supervisor_graph, {"messages": [HumanMessage(content="build it")]}),
    "fanout8": (lambda: fanout_graph(8), {"topic": "t", "results": []}),
    "fanout64": (lambda: fanout_graph(64), {"topic": "t", "results": []}),
}
