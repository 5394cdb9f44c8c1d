"""Human in the loop: a graph pauses with ``interrupt()`` for a review, and resumes on the same thread.

A plain LangGraph ``StateGraph`` compiled with an ``InMemorySaver`` checkpointer: ``draft`` writes a reply
with a model, ``review`` calls ``interrupt(...)`` and the run stops there; the program (standing in for a
person) reads the draft and resumes with ``Command(resume=...)`` on the same ``thread_id``; ``send`` sends
the reviewed text. The two invocations are two OpenTelemetry traces; orchestrace stitches them by thread
id into one episode with a human intervention for the interrupt and one for the resume, and never reports
the interrupt as an error.

The model is a scripted fake (examples/fakes.py): no network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.human_in_the_loop.app --exporter console
    .venv/bin/python -m examples.human_in_the_loop.app --exporter none --trace-dir out/human_in_the_loop

or see it in Jaeger (http://localhost:16686, service "human-in-the-loop-example"):

    docker run -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/all-in-one
    .venv/bin/python -m examples.human_in_the_loop.app --exporter jaeger
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt
from orchestrace_langgraph import LangGraphInstrumentor

from examples.cli import configure_tracing
from examples.fakes import ScriptedChatModel

QUESTION = "Can I return the headphones I bought last week?"


class State(TypedDict, total=False):
    question: str
    draft: str
    reply: str
    sent: bool


def build_graph() -> CompiledStateGraph:
    model = ScriptedChatModel(
        model_name="support-model", script=["Yes, you can return them within 30 days for a full refund."]
    )

    def draft(state: State) -> State:
        return {"draft": str(model.invoke(f"Answer the customer: {state['question']}").content)}

    def review(state: State) -> State:
        # The run stops here; the value passed to Command(resume=...) is what interrupt() returns.
        verdict: dict[str, str] = interrupt({"draft": state["draft"], "ask": "approve, or edit the text"})
        return {"reply": verdict.get("text", state["draft"])}

    def send(state: State) -> State:
        return {"sent": True}

    graph = StateGraph(State)
    graph.add_node("draft", draft)
    graph.add_node("review", review)
    graph.add_node("send", send)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    graph.add_edge("review", "send")
    graph.add_edge("send", END)
    return graph.compile(checkpointer=InMemorySaver(), name="support_reply")


def human_review(request: dict[str, Any]) -> dict[str, str]:
    """Stands in for the person at the keyboard: keeps the draft and adds a line."""
    return {"action": "edit", "text": request["draft"] + " Keep the receipt."}


def run(question: str = QUESTION) -> str:
    graph = build_graph()
    # The checkpointer keys the paused run by thread id; the resume must use the same one.
    config: RunnableConfig = {"configurable": {"thread_id": uuid.uuid4().hex}}
    paused = graph.invoke({"question": question}, config)
    request = paused["__interrupt__"][0].value
    print(f"Paused for review of: {request['draft']!r}")
    done = graph.invoke(Command(resume=human_review(request)), config)
    return str(done["reply"])


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("human-in-the-loop-example", __doc__, argv)
    LangGraphInstrumentor().instrument()
    answer = run()
    tracing.force_flush()
    print(answer)


if __name__ == "__main__":
    main()
