"""Prompts stored once (``orchestrace.content.prefix_*``) are rebuilt whole for each turn."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator, Sequence
from typing import Any

import orchestrace as ot
import pytest
from convert_support import Spans
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.output import episode_lines
from orchestrace_langgraph import LangGraphInstrumentor
from pydantic import Field

STEPS = 4


@tool
def count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


class RecordingModel(BaseChatModel):
    """Asks for ``count`` until it has called it ``STEPS - 1`` times, then answers; records every prompt."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        k = len(self.received)
        if k < STEPS:
            call = {"name": "count", "args": {"text": f"call {k}"}, "id": f"c{k}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"done after {k} calls")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    set_config(CaptureConfig(capture_content=True))
    try:
        yield exporter
    finally:
        set_config(None)
        instrumentor.uninstrument()
        provider.shutdown()


def _as_chat(message: BaseMessage) -> dict[str, Any]:
    """What the model received, in the written chat format."""
    role = {"human": "user", "ai": "assistant"}.get(message.type, message.type)
    out: dict[str, Any] = {"role": role, "content": str(message.content)}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}}
            for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


def test_each_turn_gets_the_whole_history_the_model_received(exporter: InMemorySpanExporter) -> None:
    model = RecordingModel()
    agent = create_agent(model, tools=[count], name="counter")
    agent.invoke({"messages": [HumanMessage("count some words")]})
    spans = [span_from_readable(s) for s in exporter.get_finished_spans()]
    chats = [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT]
    assert sum(sc.ORCH_PREFIX_SPAN_ID in s.attributes for s in chats) == STEPS - 1  # stored once indeed

    turns = convert_episode(spans).turns
    assert len(turns) == len(model.received) == STEPS
    for k, (turn, received) in enumerate(zip(turns, model.received, strict=True)):
        assert len(received) == 1 + 2 * k  # the question, then a tool call and its result per step
        assert [m.model_dump(exclude_none=True) for m in turn.prompt or []] == [_as_chat(m) for m in received]
        assert turn.prompt_incomplete is None


def _chat(
    s: Spans, start: float, prompt: list[dict[str, Any]], answer: str, span_id: str | None = None,
    **attrs: Any,
) -> Any:
    span = s.chat(start, start + 0.5, **{
        sc.GEN_AI_INPUT_MESSAGES: json.dumps(prompt),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "content": answer}]),
        **attrs,
    })
    if span_id is not None:
        span.span_id = span_id
    return span


def _prefixed(earlier: Any, length: int, count: int) -> dict[str, Any]:
    return {sc.ORCH_PREFIX_SPAN_ID: earlier.span_id, sc.ORCH_PREFIX_LENGTH: length,
            sc.ORCH_INPUT_MESSAGE_COUNT: count}


def test_chains_are_followed_and_broken_ones_marked_incomplete() -> None:
    s = Spans()
    first = _chat(s, 1, [{"role": "user", "content": "q"}], "a1")
    second = _chat(s, 2, [{"role": "user", "content": "more"}], "a2", **_prefixed(first, 2, 3))
    # Keeps only the first message of the earlier history (a shorter prefix), then its own.
    _chat(s, 3, [{"role": "user", "content": "other"}], "a3", **_prefixed(second, 1, 2))
    _chat(s, 4, [{"role": "user", "content": "x"}], "a4", **_prefixed(second, 4, 5))
    # A reference to a span that never arrived, and two calls referring to each other.
    _chat(s, 5, [{"role": "user", "content": "lost"}], "a5",
          **{sc.ORCH_PREFIX_SPAN_ID: "ffffffffffffffff", sc.ORCH_PREFIX_LENGTH: 3})
    loop_a = _chat(s, 6, [{"role": "user", "content": "la"}], "b1", span_id="00000000000000aa",
                   **{sc.ORCH_PREFIX_SPAN_ID: "00000000000000bb", sc.ORCH_PREFIX_LENGTH: 1})
    _chat(s, 7, [{"role": "user", "content": "lb"}], "b2", span_id="00000000000000bb",
          **{sc.ORCH_PREFIX_SPAN_ID: loop_a.span_id, sc.ORCH_PREFIX_LENGTH: 1})
    s.agent("solver", 0, 10)
    for span in s.spans[:-1]:
        span.parent_span_id = s.spans[-1].span_id

    turns = convert_episode(s.spans).turns
    contents = [[m.content for m in t.prompt or []] for t in turns]
    assert contents[:4] == [["q"], ["q", "a1", "more"], ["q", "other"], ["q", "a1", "more", "a2", "x"]]
    assert [t.prompt_incomplete for t in turns[:4]] == [None] * 4
    assert contents[4] == ["lost"] and turns[4].prompt_incomplete is True
    assert turns[5].prompt_incomplete is True and turns[6].prompt_incomplete is True
    assert contents[5][-1] == "la" and contents[6][-1] == "lb"


Prompt = list[dict[str, Any]]


def _agent_loop(turns: int, reply_bytes: int, full_prompt: bool) -> tuple[list[Any], list[Prompt]]:
    """An ``@ot.llm`` agent loop (OpenAI chat messages, a tool call every third turn) in one task: each call's
    prompt is the whole history so far. Returns the finished spans and the prompts the model received."""
    handle = ot.configure(exporter="memory", tracer_provider=TracerProvider(shutdown_on_exit=False),
                          batch=False, capture_content=True, full_prompt=full_prompt)
    received: list[Prompt] = []

    @ot.llm("m")
    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        received.append(list(messages))
        k = len(received)
        call = {"id": f"c{k}", "type": "function", "function": {"name": "look", "arguments": f'{{"k": {k}}}'}}
        message: dict[str, Any] = ({"role": "assistant", "content": None, "tool_calls": [call]} if k % 3 == 0
                                   else {"role": "assistant", "content": f"reply {k} " + "x" * reply_bytes})
        return {"choices": [{"message": message, "finish_reason": "tool_calls" if k % 3 == 0 else "stop"}]}

    @ot.agent
    def solver() -> None:
        history: Prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
        for k in range(turns):
            out = model(history)["choices"][0]["message"]
            history.append(out)
            calls = out.get("tool_calls")
            history.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": f"found {k}"} if calls
                           else {"role": "user", "content": f"next {k}"})

    try:
        with ot.task("loop"):
            solver()
        return [span_from_readable(s) for s in handle.get_finished_spans()], received
    finally:
        handle.shutdown()
        set_config(None)


def test_an_llm_call_exports_only_its_new_messages_and_every_prompt_is_rebuilt() -> None:
    """``@ot.llm`` follows the history-once rule: the exported input grows linearly with the episode's content
    (quadratically with ``full_prompt``), and the collector rebuilds the same prompts either way."""
    turns, reply = 30, 2000
    written = {}
    for full_prompt in (False, True):
        spans, received = _agent_loop(turns, reply, full_prompt)
        chats = [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT]
        exported = sum(len(str(s.attributes[sc.GEN_AI_INPUT_MESSAGES])) for s in chats)
        content = sum(len(json.dumps(m)) for m in received[-1])  # the whole episode's messages, once
        if full_prompt:
            assert exported > turns / 3 * content  # every call carries its whole prompt
            assert not any(sc.ORCH_PREFIX_SPAN_ID in s.attributes for s in chats)
        else:
            assert exported < content  # each message once (the replies go out as completions)
            assert sum(sc.ORCH_PREFIX_SPAN_ID in s.attributes for s in chats) == turns - 1  # tool calls too
        turn_records = convert_episode(spans).turns
        assert len(turn_records) == turns
        for turn, prompt in zip(turn_records, received, strict=True):
            assert turn.prompt_incomplete is None
            assert [(m.role, m.content or None) for m in turn.prompt or []] == [
                (m["role"], m["content"]) for m in prompt]
            assert [m.tool_call_id for m in turn.prompt or []] == [m.get("tool_call_id") for m in prompt]
        written[full_prompt] = [t.model_dump() for t in turn_records]
    for with_prefix, whole in zip(written[False], written[True], strict=True):
        assert with_prefix["prompt"] == whole["prompt"] and with_prefix["completion"] == whole["completion"]


def test_a_long_conversation_is_written_in_memory_linear_in_its_content() -> None:
    """Each turn writes its whole prompt, so a conversation's turns are quadratic in its length: the turns
    hold one copy of each message (shared models) and are never serialized whole before the output limit
    cuts them."""
    spans, received = _agent_loop(200, 4000, full_prompt=False)
    content = sum(len(json.dumps(m)) for m in received[-1])
    episode = convert_episode(spans)
    records = episode.turns
    assert records[-1].prompt is not None and records[-2].prompt is not None
    assert all(a is b for a, b in zip(records[-1].prompt, records[-2].prompt[: len(records[-1].prompt)],
                                      strict=False))
    assert sum(len(json.dumps(p)) for p in received) > 25 * content  # what writing every prompt whole takes
    episode = convert_episode(spans)
    tracemalloc.start()
    try:
        _, turn_lines = episode_lines(episode, 1, 4 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(turn_lines) == 200 and sum(map(len, turn_lines)) < 4 << 20
    assert json.loads(turn_lines[-1])["truncated"]["prompt"] > 0
    assert peak < 4 * content + (8 << 20)
