"""Supervisor: one supervisor agent delegates to three worker agents, each with its own tool.

Built with langgraph-supervisor's ``create_supervisor`` and LangChain's ``create_agent``. The supervisor
hands the question to a researcher (looks up moon counts, two tool calls at once), a mathematician (adds
them) and a writer (checks the sentence), then answers. orchestrace records each handoff as a delegation,
every worker as an agent with its tool calls and model turns, and a team reward from a check of the final
answer.

The models are scripted fakes (examples/fakes.py): no network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.supervisor.app --exporter console                         # spans
    .venv/bin/python -m examples.supervisor.app --exporter none --trace-dir out/supervisor  # traces

or see it in Jaeger (http://localhost:16686, service "supervisor-example"):

    docker run -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/all-in-one
    .venv/bin/python -m examples.supervisor.app --exporter jaeger
"""

from __future__ import annotations

from collections.abc import Sequence

import orchestrace as ot
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph
from langgraph_supervisor import create_supervisor
from orchestrace_langgraph import LangGraphInstrumentor

from examples.cli import configure_tracing
from examples.fakes import ScriptedChatModel, call, parallel

QUESTION = "How many moons do Mars and Jupiter have together?"
MOONS = {"Mercury": 0, "Venus": 0, "Earth": 1, "Mars": 2, "Jupiter": 95, "Saturn": 146}
ANSWER = "Mars and Jupiter have 97 moons together."  # what the scripted writer and supervisor say


@tool
def lookup_moons(planet: str) -> int:
    """Number of known moons of a planet."""
    return MOONS[planet]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def count_words(text: str) -> int:
    """Number of words in a text."""
    return len(text.split())


def build_graph() -> CompiledStateGraph:
    researcher = create_agent(
        ScriptedChatModel(
            model_name="researcher-model",
            script=[
                parallel(call("lookup_moons", planet="Mars"), call("lookup_moons", planet="Jupiter")),
                "Mars has 2 moons and Jupiter has 95.",
            ],
        ),
        tools=[lookup_moons],
        system_prompt="You look facts up. Use lookup_moons.",
        name="researcher",
    )
    mathematician = create_agent(
        ScriptedChatModel(model_name="math-model", script=[call("add", a=2, b=95), "2 + 95 = 97."]),
        tools=[add],
        system_prompt="You do arithmetic with the add tool.",
        name="mathematician",
    )
    writer = create_agent(
        ScriptedChatModel(model_name="writer-model", script=[call("count_words", text=ANSWER), ANSWER]),
        tools=[count_words],
        system_prompt="You write one short sentence and check its length.",
        name="writer",
    )
    supervisor = create_supervisor(
        [researcher, mathematician, writer],
        model=ScriptedChatModel(
            model_name="supervisor-model",
            script=[
                call("transfer_to_researcher"),
                call("transfer_to_mathematician"),
                call("transfer_to_writer"),
                ANSWER,
            ],
        ),
        prompt="You lead a researcher, a mathematician and a writer. Delegate, then answer.",
    )
    return supervisor.compile(name="moon_team")


def run(question: str = QUESTION) -> str:
    """One episode: the team answers, and a deterministic check of the answer becomes the team reward."""
    with ot.task("moons", topology="centralized") as episode:
        episode.set_input(question)  # what the episode was asked, and below what it answered
        result = build_graph().invoke({"messages": [{"role": "user", "content": question}]})
        answer = str(result["messages"][-1].content)
        episode.set_result(answer)
        correct = str(MOONS["Mars"] + MOONS["Jupiter"]) in answer
        ot.reward(1.0 if correct else 0.0, family="team")
        episode.set_success(correct)
    return answer


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("supervisor-example", __doc__, argv)
    LangGraphInstrumentor().instrument()
    answer = run()
    tracing.force_flush()
    print(answer)


if __name__ == "__main__":
    main()
