"""Hierarchical teams: a top supervisor routes between two teams; each team is a subgraph with its own
supervisor.

Plain LangGraph: every supervisor is a node that asks its model whom to call next and returns
``Command(goto=...)``; the research team (a searcher and a checker) and the writing team (a writer
and an editor) are compiled ``StateGraph``s added as nodes of the top graph; every worker is a
``create_agent`` agent with a tool. orchestrace records the nesting as delegations two levels deep (top
supervisor, team supervisors, workers), so the trace reads as a hierarchy.

The models are scripted fakes (examples/fakes.py): no network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.hierarchical.app --exporter console
    .venv/bin/python -m examples.hierarchical.app --exporter none --trace-dir out/hierarchical

or see it in Jaeger (http://localhost:16686, service "hierarchical-example"):

    docker run -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/all-in-one
    .venv/bin/python -m examples.hierarchical.app --exporter jaeger
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain.agents import create_agent
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from orchestrace_langgraph import LangGraphInstrumentor

from examples.cli import configure_tracing
from examples.fakes import Reply, ScriptedChatModel, call

QUESTION = "Write a one-line note on the tallest mountain on Earth."
FACT = "Mount Everest, 8849 m above sea level"
FACTS = {"tallest mountain": FACT}
ANSWER = "Mount Everest, at 8849 m above sea level, is the tallest mountain on Earth."


@tool
def search(query: str) -> str:
    """Search a small encyclopedia."""
    return FACTS.get(query, "no result")


@tool
def check_fact(claim: str) -> bool:
    """True when the claim matches the encyclopedia."""
    return claim in FACTS.values()


@tool
def save_note(text: str) -> str:
    """Save a note; returns its id."""
    return f"note-{len(text)}"


@tool
def count_words(text: str) -> int:
    """Number of words in a text."""
    return len(text.split())


class Supervisor:
    """A supervisor node: its model names the member to call next, or FINISH."""

    def __init__(self, model: ScriptedChatModel) -> None:
        self.model = model

    def __call__(self, state: MessagesState) -> Command[str]:
        choice = str(self.model.invoke(state["messages"]).content).strip()
        return Command(goto=END if choice == "FINISH" else choice)


def team(name: str, script: list[str], workers: list[CompiledStateGraph]) -> CompiledStateGraph:
    """A team subgraph: a supervisor and its workers, each worker reporting back to the supervisor."""
    graph = StateGraph(MessagesState)
    members = [str(worker.name) for worker in workers]
    supervisor = f"{name}_supervisor"  # a distinct name per level, so the trace tells them apart
    graph.add_node(
        supervisor,
        Supervisor(ScriptedChatModel(model_name=f"{supervisor}-model", script=script)),
        destinations=(*members, END),
    )
    for worker in workers:
        graph.add_node(str(worker.name), worker)
        graph.add_edge(str(worker.name), supervisor)
    graph.add_edge(START, supervisor)
    return graph.compile(name=name)


def worker(name: str, tool_: BaseTool, script: list[Reply]) -> CompiledStateGraph:
    """A worker agent with one tool."""
    model = ScriptedChatModel(model_name=f"{name}-model", script=script)
    return create_agent(model, tools=[tool_], name=name)


def build_graph() -> CompiledStateGraph:
    research_team = team(
        "research_team",
        ["searcher", "checker", "FINISH"],
        [
            worker("searcher", search, [call("search", query="tallest mountain"), FACT]),
            worker("checker", check_fact, [call("check_fact", claim=FACT), "Confirmed."]),
        ],
    )
    writing_team = team(
        "writing_team",
        ["writer", "editor", "FINISH"],
        [
            worker("writer", save_note, [call("save_note", text=ANSWER), "Saved the note."]),
            worker("editor", count_words, [call("count_words", text=ANSWER), ANSWER]),
        ],
    )
    return team("top", ["research_team", "writing_team", "FINISH"], [research_team, writing_team])


def run(question: str = QUESTION) -> str:
    result = build_graph().invoke({"messages": [{"role": "user", "content": question}]})
    return str(result["messages"][-1].content)


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("hierarchical-example", __doc__, argv)
    LangGraphInstrumentor().instrument()
    answer = run()
    tracing.force_flush()
    print(answer)


if __name__ == "__main__":
    main()
