"""Agents and runs show their input and final output (GenAI messages, and OpenInference's ``input.value`` /
``output.value``, which Phoenix shows in its Input and Output panes): the Agents SDK's spans carry neither,
so they come from the agent's model calls, whatever the model and however the run is started."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents_spans import Spans
from opentelemetry.sdk.trace import ReadableSpan
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config
from test_agents_modes import MODES, run

from examples.agents_fakes import ScriptedChatModel, ScriptedResponsesModel, Step, UntracedModel, call, say

QUESTION = "How many boxes are left on shelf 4?"
ANSWER = "Shelf 4 has 12 boxes left."
INSTRUCTIONS = ("Pass the question on.", "Count with the tool.")
PANES = (sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE)


@function_tool
def count(shelf: int) -> int:
    """Boxes on a shelf."""
    return 12


#: Every kind of model: its own response spans, Chat Completions' generation spans, no span at all.
MODELS: dict[str, Callable[[Sequence[Step]], Any]] = {
    "responses": ScriptedResponsesModel, "chat_completions": ScriptedChatModel, "untraced": UntracedModel}


def relay(model: Callable[[Sequence[Step]], Any]) -> Agent[Any]:
    """``desk_a`` hands off to ``desk_b``, which calls a tool, then answers."""
    desk_b = Agent(name="desk_b", instructions=INSTRUCTIONS[1], tools=[count], model=model([
        call(("count", {"shelf": 4}), input_tokens=12, output_tokens=6), say(ANSWER, 20, 4)]))
    return Agent(name="desk_a", instructions=INSTRUCTIONS[0], handoffs=[desk_b],
                 model=model([call(("transfer_to_desk_b", {}), input_tokens=7, output_tokens=3)]))


@pytest.fixture
def capture() -> Iterator[None]:
    set_config(CaptureConfig(capture_content=True))
    yield
    set_config(None)


def actors(spans: Spans) -> dict[str, ReadableSpan]:
    found = {s.name: s for s in spans.all if (s.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)
             in (sc.OP_INVOKE_AGENT, sc.OP_INVOKE_WORKFLOW)}
    assert sorted(found) == ["invoke_agent desk_a", "invoke_agent desk_b", "invoke_workflow Agent workflow"]
    return found


def parts(span: ReadableSpan, key: str) -> list[dict[str, Any]]:
    return [part for message in json.loads(str((span.attributes or {})[key])) for part in message["parts"]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", sorted(MODELS))
async def test_agents_and_runs_show_their_input_and_final_output(
    spans: Spans, capture: None, model: str, mode: str
) -> None:
    if model == "chat_completions" and mode == "run_streamed":
        pytest.skip("the Chat Completions fake does not stream")
    assert await run(relay(MODELS[model]), QUESTION, mode) == ANSWER
    found = actors(spans)
    for name, span in found.items():
        attributes = span.attributes or {}
        assert attributes[sc.INPUT_VALUE] == attributes[sc.GEN_AI_INPUT_MESSAGES], name
        assert attributes[sc.OUTPUT_VALUE] == attributes[sc.GEN_AI_OUTPUT_MESSAGES], name
        assert attributes[sc.INPUT_MIME_TYPE] == attributes[sc.OUTPUT_MIME_TYPE] == sc.MIME_JSON
        # the input items the agent (the run) got, without its instructions: the question first
        assert parts(span, sc.INPUT_VALUE)[0] == {"type": "text", "content": QUESTION}, name
        assert not any(text in str(attributes[sc.INPUT_VALUE]) for text in INSTRUCTIONS), name
        assert sc.ORCH_INPUT_REF not in attributes and sc.ORCH_OUTPUT_REF not in attributes  # content only
    # desk_a's output is its handoff; desk_b's and the run's the final answer
    (handoff,) = parts(found["invoke_agent desk_a"], sc.OUTPUT_VALUE)
    assert (handoff["type"], handoff["name"]) == ("tool_call", "transfer_to_desk_b")
    for name in ("invoke_agent desk_b", "invoke_workflow Agent workflow"):
        assert parts(found[name], sc.OUTPUT_VALUE) == [{"type": "text", "content": ANSWER}], name
    # desk_b got the question and desk_a's handoff (its history), not its own calls
    assert len(json.loads(str(found["invoke_agent desk_b"].attributes[sc.INPUT_VALUE]))) == 3  # type: ignore[index]
    spans.convert()  # the written trace validates


@pytest.mark.parametrize("run_config", [None, RunConfig(trace_include_sensitive_data=False)],
                         ids=["capture_off", "sensitive_data_off"])
async def test_nothing_is_shown_without_content(spans: Spans, run_config: RunConfig | None) -> None:
    """Capture off, or the run withholds its data (then with capture on): no content on agents and runs."""
    if run_config is not None:
        set_config(CaptureConfig(capture_content=True))
    try:
        await Runner.run(relay(ScriptedResponsesModel), QUESTION, run_config=run_config)
    finally:
        set_config(None)
    for name, span in actors(spans).items():
        shown = set(span.attributes or {}) & {*PANES, sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES}
        assert not shown, (name, shown)
