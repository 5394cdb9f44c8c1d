"""Map-reduce: a planner fans out one worker per subtopic with ``Send``, a reducer collects, a node
aggregates.

A plain LangGraph ``StateGraph`` run with ``ainvoke``: ``plan`` asks a model which planets to compare, a
conditional edge returns one ``Send("research", ...)`` per planet (the workers are coroutines that run
concurrently), each worker's finding lands in ``findings: Annotated[list[str], operator.add]``, and
``summarize`` merges them into the answer. orchestrace records a spawn per worker, one actor per parallel
task, and the summarize step as an aggregate of their returns.

The models are scripted fakes (examples/fakes.py): no network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.map_reduce.app --exporter console
    .venv/bin/python -m examples.map_reduce.app --exporter none --trace-dir out/map_reduce

or see it in Jaeger (http://localhost:16686, service "map-reduce-example"):

    docker run -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/all-in-one
    .venv/bin/python -m examples.map_reduce.app --exporter jaeger
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Sequence
from typing import Annotated, TypedDict

from langchain_core.messages import BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send
from orchestrace_langgraph import LangGraphInstrumentor

from examples.cli import configure_tracing
from examples.fakes import ScriptedChatModel

QUESTION = "Which of the four giant planets is the largest?"
RADIUS_KM = {"Jupiter": 69_911, "Saturn": 58_232, "Uranus": 25_362, "Neptune": 24_622}


class State(TypedDict, total=False):
    question: str
    planets: list[str]
    findings: Annotated[list[str], operator.add]  # the reducer: each worker's list is appended
    answer: str


class WorkerInput(TypedDict):
    planet: str


def look_up_radius(messages: Sequence[BaseMessage]) -> str:
    """The workers' fake model: answers with the radius of the planet named in the last message."""
    planet = str(messages[-1].content).rsplit(" ", 1)[-1].rstrip("?")
    return f"{planet}: mean radius {RADIUS_KM[planet]} km."


def build_graph() -> CompiledStateGraph:
    planner = ScriptedChatModel(model_name="planner-model", script=["Jupiter, Saturn, Uranus, Neptune"])
    worker = ScriptedChatModel(model_name="worker-model", script=look_up_radius)
    summarizer = ScriptedChatModel(
        model_name="summarizer-model", script=["Jupiter is the largest, with a mean radius of 69911 km."]
    )

    async def plan(state: State) -> State:
        reply = await planner.ainvoke(f"List the planets to compare for: {state['question']}")
        return {"planets": [p.strip() for p in str(reply.content).split(",")]}

    def fan_out(state: State) -> list[Send]:
        return [Send("research", WorkerInput(planet=planet)) for planet in state["planets"]]

    async def research(state: WorkerInput) -> State:
        reply = await worker.ainvoke(f"What is the mean radius of {state['planet']}")
        return {"findings": [str(reply.content)]}

    async def summarize(state: State) -> State:
        notes = "\n".join(state["findings"])
        reply = await summarizer.ainvoke(f"{state['question']}\nFindings:\n{notes}")
        return {"answer": str(reply.content)}

    graph = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node("research", research, input_schema=WorkerInput)
    graph.add_node("summarize", summarize)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", fan_out, ["research"])
    graph.add_edge("research", "summarize")
    graph.add_edge("summarize", END)
    return graph.compile(name="planet_map_reduce")


async def run(question: str = QUESTION) -> str:
    result = await build_graph().ainvoke({"question": question})
    return str(result["answer"])


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("map-reduce-example", __doc__, argv)
    LangGraphInstrumentor().instrument()
    answer = asyncio.run(run())
    tracing.force_flush()
    print(answer)


if __name__ == "__main__":
    main()
