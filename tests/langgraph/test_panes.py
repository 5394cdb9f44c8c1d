"""What Phoenix shows in its Input and Output panes (OpenInference's ``input.value`` / ``output.value``) for
LangGraph agents and graph runs, including those that end by handing off with ``Command.PARENT``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from episodes import MODES, convert, run_graph
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from opentelemetry.sdk.trace import ReadableSpan
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config
from span_checks import Spans

PANES = (sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE)


class Ticket(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: list[str]


#: What the first agent hands over with its ``Command.PARENT``: messages, another state key, nothing.
UPDATES: dict[str, dict[str, Any] | None] = {
    "messages": {"messages": [AIMessage("passing ticket 7 to the second desk")]},
    "state": {"notes": ["ticket 7 checked"]},
    "none": None,
}
#: What each update shows in the Output pane of the agent (and of its graph run) that hands it over.
SHOWN = {"messages": "passing ticket 7 to the second desk", "state": "ticket 7 checked", "none": "desk_b"}


def relay(update: dict[str, Any] | None) -> Any:
    """Two subgraph agents of neutral names; the first hands off to the second with ``update``."""

    def hand_over(state: Ticket) -> Command:
        return Command(graph=Command.PARENT, goto="desk_b", update=update)

    first = StateGraph(Ticket)
    first.add_node("work", hand_over)
    first.add_edge(START, "work")
    second = StateGraph(Ticket)
    second.add_node("work", lambda state: {"messages": [AIMessage("ticket 7 closed")]})
    second.add_edge(START, "work")
    team = StateGraph(Ticket)
    team.add_node("desk_a", first.compile(name="desk_a"), destinations=("desk_b",))
    team.add_node("desk_b", second.compile(name="desk_b"))
    team.add_edge(START, "desk_a")
    return team.compile(name="relay")


@pytest.fixture
def capture_on() -> Iterator[None]:
    set_config(CaptureConfig(capture_content=True))
    yield
    set_config(None)


def panes(spans: Spans) -> list[ReadableSpan]:
    return [s for s in spans.ours if (s.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)
            in (sc.OP_INVOKE_AGENT, sc.OP_INVOKE_WORKFLOW)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("update", sorted(UPDATES))
async def test_an_agent_that_hands_off_shows_what_it_hands_over(
    spans: Spans, capture_on: None, update: str, mode: str
) -> None:
    """The agent node that hands off (LangGraph ends its task without an exception) and the subgraph run
    the ``Command.PARENT`` leaves both show the state update handed over (a bare ``goto``: the command),
    as GenAI output messages and in the Output pane; every agent and graph run fills both panes."""
    await run_graph(relay(UPDATES[update]), {"messages": [HumanMessage("ticket 7: refund?")]}, None, mode)
    shown = panes(spans)
    assert sorted(s.name for s in shown) == [
        "invoke_agent desk_a", "invoke_agent desk_b",
        "invoke_workflow desk_a", "invoke_workflow desk_b", "invoke_workflow relay"]
    for span in shown:
        attributes = span.attributes or {}
        assert attributes[sc.INPUT_VALUE] == attributes[sc.GEN_AI_INPUT_MESSAGES], span.name
        assert attributes[sc.INPUT_MIME_TYPE] == sc.MIME_JSON
        assert "ticket 7: refund?" in str(attributes[sc.INPUT_VALUE])
        if mode == "astream_events" and span.name == "invoke_agent desk_b":
            # LangGraph drains a node's task there and returns no result: a node that completes has none
            continue
        assert attributes[sc.OUTPUT_VALUE] == attributes[sc.GEN_AI_OUTPUT_MESSAGES], span.name
        assert attributes[sc.OUTPUT_MIME_TYPE] == sc.MIME_JSON
    for name in ("invoke_agent desk_a", "invoke_workflow desk_a"):
        (output,) = json.loads(str(spans.one(name).attributes[sc.OUTPUT_VALUE]))  # type: ignore[index]
        assert SHOWN[update] in json.dumps(output["parts"]), (name, output)
        assert sc.ORCH_OUTPUT_REF not in (spans.one(name).attributes or {})  # content only: no ref to hash
    convert(spans.all)  # the written trace validates


async def test_a_handoff_adds_nothing_with_capture_off(spans: Spans) -> None:
    await run_graph(relay(UPDATES["messages"]), {"messages": [HumanMessage("ticket 7: refund?")]}, None,
                    "invoke")
    shown = panes(spans)
    assert len(shown) == 5
    for span in shown:
        attributes = set(span.attributes or {})
        assert not attributes & {*PANES, sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES}, span.name
        assert sc.ORCH_OUTPUT_REF not in attributes or span.name == "invoke_agent desk_b", span.name
