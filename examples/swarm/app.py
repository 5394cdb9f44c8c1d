"""Swarm: peer agents hand the conversation to each other, with no supervisor.

Built with langgraph-swarm's ``create_swarm`` and ``create_handoff_tool``. A travel agent (the default
active agent) sees a hotel question, hands off to the hotel agent, which searches, books and hands back to
the travel agent to close. orchestrace records each handoff as a decision and a handoff (a transfer of
control, not a call with a return), so the trace shows who held the conversation when.

The models are scripted fakes (examples/fakes.py): no network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.swarm.app --exporter console
    .venv/bin/python -m examples.swarm.app --exporter none --trace-dir out/swarm

or see it in Jaeger (http://localhost:16686, service "swarm-example"):

    docker run -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/all-in-one
    .venv/bin/python -m examples.swarm.app --exporter jaeger
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from langchain.agents import create_agent
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph_swarm import create_handoff_tool, create_swarm
from orchestrace_langgraph import LangGraphInstrumentor

from examples.cli import configure_tracing
from examples.fakes import ScriptedChatModel, call

QUESTION = "Find me a hotel in Lisbon for two nights and book the cheapest."
HOTELS = {"Lisbon": {"Casa Azul": 95, "Hotel Tejo": 140}}


@tool
def search_hotels(city: str) -> dict[str, int]:
    """Hotels of a city with their price per night in euros."""
    return HOTELS[city]


@tool
def book_hotel(hotel: str, nights: int) -> str:
    """Book a hotel; returns the confirmation code."""
    return f"{hotel[:4].upper()}-{nights}N"


def build_graph() -> CompiledStateGraph:
    travel_agent = create_agent(
        ScriptedChatModel(
            model_name="travel-model",
            script=[
                call("transfer_to_hotel_agent"),
                "Your stay at Casa Azul is booked (confirmation CASA-2N). Have a good trip!",
            ],
        ),
        tools=[create_handoff_tool(agent_name="hotel_agent", description="Hand hotel questions over")],
        system_prompt="You plan trips and hand hotel questions to the hotel agent.",
        name="travel_agent",
    )
    hotel_agent = create_agent(
        ScriptedChatModel(
            model_name="hotel-model",
            script=[
                call("search_hotels", city="Lisbon"),
                call("book_hotel", hotel="Casa Azul", nights=2),
                call("transfer_to_travel_agent"),
            ],
        ),
        tools=[
            search_hotels,
            book_hotel,
            create_handoff_tool(agent_name="travel_agent", description="Hand back to the travel agent"),
        ],
        system_prompt="You find and book hotels, then hand back to the travel agent.",
        name="hotel_agent",
    )
    swarm = create_swarm([travel_agent, hotel_agent], default_active_agent="travel_agent")
    # The checkpointer remembers the active agent between turns of one thread, as a swarm needs.
    return swarm.compile(checkpointer=InMemorySaver(), name="travel_swarm")


def run(question: str = QUESTION) -> str:
    # One thread per conversation: a fresh id, so two runs never read as one episode.
    config: RunnableConfig = {"configurable": {"thread_id": uuid.uuid4().hex}}
    graph = build_graph()
    # Streamed step by step to show who holds the conversation; the checkpointer keeps the final state.
    for update in graph.stream({"messages": [{"role": "user", "content": question}]}, config):
        print("active:", ", ".join(update))
    return str(graph.get_state(config).values["messages"][-1].content)


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("swarm-example", __doc__, argv)
    LangGraphInstrumentor().instrument()
    answer = run()
    tracing.force_flush()
    print(answer)


if __name__ == "__main__":
    main()
