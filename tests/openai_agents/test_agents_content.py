"""Model calls as training samples: full messages, the tools offered and usage (content capture on), from the
Responses API's spans and from Chat Completions' ones; only refs and usage with capture off."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from agents_apps import TRIAGE_TURNS, add, math_agent, triage_app
from agents_spans import Spans
from openai import AsyncOpenAI
from opentelemetry.trace import StatusCode
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config

from examples.agents_fakes import ScriptedChatModel, ScriptedResponsesModel, Step, UntracedModel, call, say


@pytest.fixture
def capture() -> Iterator[None]:
    set_config(CaptureConfig(capture_content=True))
    yield
    set_config(None)


def messages(turn_messages: Any) -> list[dict[str, Any]]:
    return [m.model_dump(exclude_none=True) for m in turn_messages or []]


def tools(turn: Any) -> list[dict[str, Any]]:
    return [t.model_dump(exclude_none=True) for t in turn.tools or []]


ADD_CALL = {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}


def check_math_turns(turns: list[Any]) -> None:
    """math's two turns: the add call, then the answer after the tool's result."""
    first, second = turns
    assert messages(first.prompt)[0] == {"role": "system", "content": "Compute with the add tool."}
    (request,) = messages(first.completion)
    assert request["role"] == "assistant" and len(request["tool_calls"]) == 1
    call_id = request["tool_calls"][0]["id"]
    assert request["tool_calls"][0] == {"id": call_id, **ADD_CALL}
    # the call and its result are the end of the next prompt
    prompt = messages(second.prompt)
    assert prompt[-2]["tool_calls"] == [{"id": call_id, **ADD_CALL}]
    assert {k: prompt[-1][k] for k in ("role", "content", "tool_call_id")} == {
        "role": "tool", "content": "5", "tool_call_id": call_id}
    assert messages(second.completion)[0]["content"] == "2 + 3 = 5"
    assert second.finish_reason == "stop" and first.finish_reason == "tool_calls"


async def test_responses_api_turns(spans: Spans, capture: None) -> None:
    await Runner.run(triage_app(), "What is 2 + 3?")
    written, episode = spans.convert()
    turns = episode.turns
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in turns] == TRIAGE_TURNS
    assert messages(turns[0].prompt) == [{"role": "system", "content": "Route the question."},
                                         {"role": "user", "content": "What is 2 + 3?"}]
    assert [t["function"]["name"] for t in tools(turns[0])] == ["transfer_to_math"]
    (add_tool,) = tools(turns[1])
    assert (add_tool["function"]["name"], add_tool["function"]["description"]) == ("add", "Add two integers.")
    assert sorted(add_tool["function"]["parameters"]["properties"]) == ["a", "b"]
    check_math_turns(turns[1:])
    chats = spans.named("chat scripted-model")
    # math's second call names its first (history exported once); its first starts with its own instructions
    assert [sc.ORCH_PREFIX_SPAN_ID in c.attributes for c in chats] == [False, False, True]
    # the handoff is in math's history: the transfer call and its answer
    history = messages(turns[1].prompt)
    assert history[2]["tool_calls"][0]["function"]["name"] == "transfer_to_math"
    assert history[3]["role"] == "tool"
    tool = spans.one("execute_tool add")
    assert json.loads(str(tool.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS])) == {"a": 2, "b": 3}
    assert tool.attributes[sc.GEN_AI_TOOL_CALL_RESULT] == "5"
    assert written["costs"]["tokens"] == sum(i + o for _, i, o in TRIAGE_TURNS)


async def test_chat_completions_turns(spans: Spans, capture: None) -> None:
    model = ScriptedChatModel([call(("add", {"a": 2, "b": 3}), input_tokens=12, output_tokens=6),
                               say("2 + 3 = 5", input_tokens=20, output_tokens=4)], model="chat-model")
    agent = Agent(name="math", instructions="Compute with the add tool.", model=model, tools=[add])
    await Runner.run(agent, "What is 2 + 3?")
    chats = spans.named("chat chat-model")
    assert len(chats) == 2
    # The history went out once: the second call carries the tool's result only and names the first.
    assert chats[1].attributes[sc.ORCH_PREFIX_SPAN_ID] == format(chats[0].context.span_id, "016x")
    assert len(json.loads(str(chats[1].attributes[sc.GEN_AI_INPUT_MESSAGES]))) == 1
    written, episode = spans.convert()
    assert [(t.agent, t.model, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("math", "chat-model", 12, 6), ("math", "chat-model", 20, 4)]
    check_math_turns(episode.turns)
    assert messages(episode.turns[0].prompt)[1] == {"role": "user", "content": "What is 2 + 3?"}
    assert written["costs"]["tokens"] == 42


async def test_without_capture_spans_carry_refs_and_usage_only(spans: Spans) -> None:
    await Runner.run(triage_app(), "What is 2 + 3?")
    for chat in spans.named("chat scripted-model"):
        assert sc.GEN_AI_INPUT_MESSAGES not in chat.attributes
        assert sc.GEN_AI_OUTPUT_MESSAGES not in chat.attributes
        assert sc.GEN_AI_TOOL_DEFINITIONS not in chat.attributes
        assert str(chat.attributes[sc.ORCH_INPUT_REF]).startswith("sha256:")
        assert str(chat.attributes[sc.ORCH_OUTPUT_REF]).startswith("sha256:")
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in spans.one("execute_tool add").attributes
    _, episode = spans.convert()
    assert [(t.input_tokens, t.output_tokens) for t in episode.turns] == [(7, 3), (12, 6), (20, 4)]
    assert all(t.prompt is None for t in episode.turns)


async def test_sensitive_data_off_keeps_usage(spans: Spans, capture: None) -> None:
    await Runner.run(math_agent(), "What is 2 + 3?", run_config=RunConfig(trace_include_sensitive_data=False))
    chats = spans.named("chat")  # the model's name is part of what is withheld
    assert [(c.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], c.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS])
            for c in chats] == [(12, 6), (20, 4)]
    assert all(sc.GEN_AI_INPUT_MESSAGES not in c.attributes for c in chats)
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in spans.one("execute_tool add").attributes
    written, _ = spans.convert()
    assert written["costs"]["tokens"] == 42


# --- models that open no span of their own --------------------------------------------------------------
def untraced_math_agent() -> Agent[Any]:
    model = UntracedModel([call(("add", {"a": 2, "b": 3}), input_tokens=12, output_tokens=6),
                           say("2 + 3 = 5", input_tokens=20, output_tokens=4)], model="own-model")
    return Agent(name="math", instructions="Compute with the add tool.", model=model, tools=[add])


def check_untraced_turns(spans: Spans) -> None:
    """The Runner's two calls of a model that traces nothing: two turns, with request, tools and usage."""
    assert len(spans.named("chat own-model")) == 2
    written, episode = spans.convert()
    turns = episode.turns
    assert [(t.agent, t.model, t.input_tokens, t.output_tokens) for t in turns] == [
        ("math", "own-model", 12, 6), ("math", "own-model", 20, 4)]
    check_math_turns(turns)
    assert messages(turns[0].prompt)[1] == {"role": "user", "content": "What is 2 + 3?"}
    for turn in turns:
        (offered,) = tools(turn)
        function = offered["function"]
        assert (function["name"], function["description"]) == ("add", "Add two integers.")
    assert written["costs"]["tokens"] == 42


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_a_model_that_traces_nothing_still_gives_every_turn(spans: Spans, capture: None,
                                                                  streamed: bool) -> None:
    agent = untraced_math_agent()
    if streamed:
        result = Runner.run_streamed(agent, "What is 2 + 3?")
        async for _ in result.stream_events():
            pass
    else:
        await Runner.run(agent, "What is 2 + 3?")
    check_untraced_turns(spans)


def test_a_model_that_traces_nothing_run_sync(spans: Spans, capture: None) -> None:
    Runner.run_sync(untraced_math_agent(), "What is 2 + 3?")
    check_untraced_turns(spans)


async def test_untraced_handoff_and_failure(spans: Spans, capture: None) -> None:
    """A handoff offered by an untraced model is among its tools; a call that raises is a failed turn."""
    triage = Agent(name="triage", instructions="Route the question.", handoffs=[untraced_math_agent()],
                   model=UntracedModel([call(("transfer_to_math", {}), input_tokens=7, output_tokens=3)]))
    await Runner.run(triage, "What is 2 + 3?")
    _, episode = spans.convert()
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in episode.turns] == TRIAGE_TURNS
    assert [t["function"]["name"] for t in tools(episode.turns[0])] == ["transfer_to_math"]
    spans.clear()
    broken = Agent(name="math", model=UntracedModel([Step(error=ValueError("model down"))]))
    with pytest.raises(ValueError, match="model down"):
        await Runner.run(broken, "What is 2 + 3?")
    (chat,) = spans.named("chat")
    assert chat.status.status_code is StatusCode.ERROR and chat.attributes[sc.ERROR_TYPE] == "ValueError"


class _ChatCompletionsServer(ThreadingHTTPServer):
    """A local OpenAI-compatible server: answers each ``/v1/chat/completions`` with the next reply."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _ChatCompletionsHandler)
        self.replies = replies
        self.requests: list[dict[str, Any]] = []


class _ChatCompletionsHandler(BaseHTTPRequestHandler):
    server: _ChatCompletionsServer

    def do_POST(self) -> None:
        self.server.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        message, (prompt, completion) = self.server.replies.pop(0)
        body = json.dumps({
            "id": f"chatcmpl-{len(self.server.requests)}", "object": "chat.completion", "created": 0,
            "model": "served-model",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_openai_chat_completions_model_against_a_local_server(spans: Spans, capture: None) -> None:
    """The SDK's own Chat Completions model opens a generation span per call: one turn per call, not two."""
    add_call = {"id": "call_1", "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    server = _ChatCompletionsServer([
        ({"role": "assistant", "content": None, "tool_calls": [add_call]}, (12, 6)),
        ({"role": "assistant", "content": "2 + 3 = 5"}, (20, 4)),
    ])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="test",
                             max_retries=0)
        model = OpenAIChatCompletionsModel(model="served-model", openai_client=client)
        agent = Agent(name="math", instructions="Compute with the add tool.", model=model, tools=[add])
        await Runner.run(agent, "What is 2 + 3?")
    finally:
        server.shutdown()
        server.server_close()
    assert len(server.requests) == 2
    assert len(spans.named("chat served-model")) == 2
    written, episode = spans.convert()
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("math", 12, 6), ("math", 20, 4)]
    check_math_turns(episode.turns)
    assert [t["function"]["name"] for t in tools(episode.turns[0])] == ["add"]
    assert written["costs"]["tokens"] == 42


@pytest.mark.parametrize("model", [ScriptedResponsesModel, ScriptedChatModel, UntracedModel],
                         ids=["responses", "chat_completions", "untraced"])
async def test_cached_input_tokens_are_the_cache_read_count(spans: Spans, model: Any) -> None:
    """OpenAI counts the cached part of a prompt in its input tokens and states it apart
    (``input_tokens_details.cached_tokens``): a turn keeps the whole prompt as its input and the cached part
    as its cache-read count, whatever the model's span (a response span, a generation span, none)."""
    steps = [Step(calls=(("add", {"a": 2, "b": 3}),), input_tokens=12, output_tokens=6, cached_tokens=0),
             Step(text="2 + 3 = 5", input_tokens=20, output_tokens=4, cached_tokens=16)]
    agent = Agent(name="math", instructions="Compute with the add tool.", model=model(steps), tools=[add])
    await Runner.run(agent, "What is 2 + 3?")
    chats = sorted((s for s in spans.all if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    counts = (sc.GEN_AI_USAGE_INPUT_TOKENS, sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)
    assert [tuple(c.attributes[key] for key in counts) for c in chats] == [(12, 0), (20, 16)]
    written, episode = spans.convert()
    assert [(t.input_tokens, t.cache_read_input_tokens, t.output_tokens) for t in episode.turns] == [
        (12, 0, 6), (20, 16, 4)]
    assert written["costs"]["tokens"] == 42  # cached tokens are part of the input, not counted again
