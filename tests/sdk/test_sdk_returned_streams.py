"""An ``@ot.llm`` function that returns a stream for its caller to read, with the real ``openai`` and
``anthropic`` clients over an ``httpx.MockTransport`` serving Server-Sent Events, and LangChain's own
iterators: the turn holds the reply the caller read, its usage with the cached part of the prompt, and a
stream left before its end (or failing midway) is flagged ``completion_incomplete``, which
``export --drop-flagged`` drops."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import orchestrace as ot
import pytest
import requests
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from orchestrace import semconv as sc
from orchestrace_collector.export import Filters, export
from sdk_spans import Spans
from written_turns import record_turns

PROMPT = [{"role": "user", "content": "say hello"}]
#: One prompt of 1,210 tokens, 1,200 of them read from the provider's prompt cache, as each provider says it.
PROMPT_TOKENS, CACHED = 1210, 1200
WORDS = ["Hello", " world"]


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    lines = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
        lines.append("")
    return ("\n".join(lines) + "\n").encode()


def openai_sse() -> bytes:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
    chunks: list[tuple[str | None, Any]] = [
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": word}}]})
        for word in WORDS
    ]
    chunks.append((None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 2, "total_tokens": PROMPT_TOKENS + 2,
             "prompt_tokens_details": {"cached_tokens": CACHED}}
    chunks.append((None, {**base, "choices": [], "usage": usage}))
    chunks.append((None, "[DONE]"))
    return _sse(chunks)


ANTHROPIC_USAGE = {"input_tokens": PROMPT_TOKENS - CACHED, "cache_read_input_tokens": CACHED,
                   "cache_creation_input_tokens": 0, "output_tokens": 1}


def anthropic_sse() -> bytes:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": ANTHROPIC_USAGE}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
    ]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": word}}) for word in WORDS]
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 2},
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return _sse(events)


def _pieces(body: bytes, fail_after: int | None, error: type[Exception]) -> Iterator[bytes]:
    """A response body sent one SSE event at a time; ``fail_after``: the connection drops after that many."""
    for k, piece in enumerate(piece for piece in body.split(b"\n\n") if piece):
        if k == fail_after:
            raise error("connection lost")
        yield piece + b"\n\n"


def _transport(http: Any, body: bytes, fail_after: int | None = None) -> Any:
    """A transport of ``http`` (``httpx``, or ``httpx2`` that ``anthropic`` uses) serving ``body``."""

    class Body(http.SyncByteStream, http.AsyncByteStream):  # type: ignore[misc, name-defined]
        def __iter__(self) -> Iterator[bytes]:
            return _pieces(body, fail_after, http.ReadError)

        async def __aiter__(self) -> Any:
            for piece in _pieces(body, fail_after, http.ReadError):
                yield piece

    def handle(request: Any) -> Any:
        return http.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    return http.MockTransport(handle)


def openai_client(fail_after: int | None = None) -> openai.OpenAI:
    return openai.OpenAI(api_key="test", base_url="http://llm.test/v1", max_retries=0,
                         http_client=httpx.Client(transport=_transport(httpx, openai_sse(), fail_after)))


def anthropic_client() -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url="http://llm.test", max_retries=0,
                               http_client=httpx2.Client(transport=_transport(httpx2, anthropic_sse())))


def _picked(turn: dict[str, Any]) -> dict[str, Any]:
    keys = ("completion", "finish_reason", "input_tokens", "output_tokens", "cache_read_input_tokens",
            "completion_incomplete", "error")
    return {key: turn[key] for key in keys if key in turn}


WHOLE = {"completion": [{"role": "assistant", "content": "Hello world"}], "finish_reason": "stop",
         "input_tokens": PROMPT_TOKENS, "output_tokens": 2, "cache_read_input_tokens": CACHED}


def test_returned_openai_stream_is_read_by_the_caller(tmp_path: Path) -> None:
    client = openai_client()

    @ot.llm("gpt-test")
    def chat(messages: list[dict[str, str]]) -> Any:
        return client.chat.completions.create(model="gpt-test", messages=messages,  # type: ignore[arg-type]
                                              stream=True, stream_options={"include_usage": True})

    def read() -> None:
        stream = chat(PROMPT)
        assert isinstance(stream, openai.Stream)  # the caller still holds the client's own stream
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == "Hello world"

    (turn,) = record_turns(tmp_path, read)
    assert _picked(turn) == WHOLE


def test_returned_async_openai_stream(tmp_path: Path) -> None:
    async def run() -> None:
        client = openai.AsyncOpenAI(api_key="test", base_url="http://llm.test/v1", max_retries=0,
                                    http_client=httpx.AsyncClient(transport=_transport(httpx, openai_sse())))

        @ot.llm("gpt-test")
        async def chat(messages: list[dict[str, str]]) -> Any:
            return await client.chat.completions.create(
                model="gpt-test", messages=messages, stream=True,  # type: ignore[arg-type]
                stream_options={"include_usage": True})

        stream = await chat(PROMPT)
        assert isinstance(stream, openai.AsyncStream)
        assert [c async for c in stream][-1].usage is not None

    (turn,) = record_turns(tmp_path, lambda: asyncio.run(run()))
    assert _picked(turn) == WHOLE


def test_returned_anthropic_stream_counts_the_whole_prompt(tmp_path: Path) -> None:
    client = anthropic_client()

    @ot.llm("claude-test")
    def chat(messages: list[dict[str, str]]) -> Any:
        return client.messages.create(model="claude-test", max_tokens=64, messages=messages,  # type: ignore[arg-type]
                                      stream=True)

    def read() -> None:
        kinds = [event.type for event in chat(PROMPT)]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"

    (turn,) = record_turns(tmp_path, read)
    assert _picked(turn) == WHOLE


def test_returned_anthropic_message_stream_read_as_text(tmp_path: Path) -> None:
    """``messages.stream(...)`` returned, entered and read by ``text_stream`` (which reads the stream
    object itself, past any proxy): the stream's own snapshot is the reply."""
    client = anthropic_client()

    @ot.llm("claude-test")
    def chat(messages: list[dict[str, str]]) -> Any:
        return client.messages.stream(model="claude-test", max_tokens=64, messages=messages)  # type: ignore[arg-type]

    def read() -> None:
        with chat(PROMPT) as stream:
            assert "".join(stream.text_stream) == "Hello world"

    (turn,) = record_turns(tmp_path, read)
    assert _picked(turn) == WHOLE


def test_returned_langchain_iterators(tmp_path: Path) -> None:
    def model() -> GenericFakeChatModel:
        return GenericFakeChatModel(messages=iter([AIMessage("Hello world")]))

    @ot.llm("fake")
    def chat(messages: list[dict[str, str]]) -> Any:
        return model().stream(messages)

    @ot.llm("fake")
    def achat(messages: list[dict[str, str]]) -> Any:
        return model().astream(messages)

    async def aread() -> str:
        return "".join([str(chunk.content) async for chunk in achat(PROMPT)])

    def read() -> None:
        assert "".join(str(chunk.content) for chunk in chat(PROMPT)) == "Hello world"
        assert asyncio.run(aread()) == "Hello world"

    turns = record_turns(tmp_path, read)
    assert [t["completion"] for t in turns] == [[{"role": "assistant", "content": "Hello world"}]] * 2
    assert not any(t.get("completion_incomplete") for t in turns)


def _kept(tmp_path: Path, drop_flagged: bool) -> list[dict[str, Any]]:
    to = tmp_path / f"turns-{drop_flagged}.jsonl"
    export([tmp_path / "out"], "jsonl", to, filters=Filters(drop_flagged=drop_flagged))
    return [json.loads(line) for line in to.read_text().splitlines()]


@pytest.mark.parametrize("leave", ["break", "close", "exit"])
def test_a_returned_stream_left_early_is_flagged_and_dropped(tmp_path: Path, leave: str) -> None:
    client = openai_client()

    @ot.llm("gpt-test")
    def chat(messages: list[dict[str, str]]) -> Any:
        return client.chat.completions.create(model="gpt-test", messages=messages,  # type: ignore[arg-type]
                                              stream=True)

    def first_word(stream: Any) -> None:
        for _ in stream:
            break

    def read() -> None:
        if leave == "break":
            first_word(chat(PROMPT))
            gc.collect()  # the caller dropped the stream: collected, the call ends
        elif leave == "close":
            stream = chat(PROMPT)
            next(stream)
            stream.close()
        else:
            with chat(PROMPT) as stream:
                next(stream)
        chat(PROMPT).close()  # a second call, closed before anything arrived
        for _ in chat(PROMPT):  # and a third, read whole
            pass

    cut, unread, whole = record_turns(tmp_path / "out", read)
    assert _picked(cut) == {"completion": [{"role": "assistant", "content": "Hello"}],
                            "completion_incomplete": True}
    assert unread["completion_incomplete"] is True and "finish_reason" not in unread
    assert "completion_incomplete" not in whole and whole["finish_reason"] == "stop"
    everything = _kept(tmp_path, False)
    assert [row["flags"] for row in everything] == [["completion_incomplete"]] * 2 + [[]]
    assert [row["completion_incomplete"] for row in everything] == [True, True, False]
    assert [row["turn_id"] for row in _kept(tmp_path, True)] == [whole["turn_id"]]


def test_a_returned_stream_failing_midway_is_an_error_and_incomplete(tmp_path: Path) -> None:
    client = openai_client(fail_after=1)

    @ot.llm("gpt-test")
    def chat(messages: list[dict[str, str]]) -> Any:
        return client.chat.completions.create(model="gpt-test", messages=messages,  # type: ignore[arg-type]
                                              stream=True)

    def read() -> None:
        with pytest.raises(openai.APIConnectionError) as raised:  # the client's own error, unchanged
            for _ in chat(PROMPT):
                pass
        assert isinstance(raised.value.__cause__, httpx.ReadError)

    (turn,) = record_turns(tmp_path, read)
    assert _picked(turn) == {"completion": [{"role": "assistant", "content": "Hello"}],
                             "completion_incomplete": True, "error": True}
    assert turn["error_type"].endswith("APIConnectionError")


def test_a_generator_model_call_left_early_or_failing_is_flagged(tmp_path: Path) -> None:
    @ot.llm("gen")
    def chat(messages: list[dict[str, str]], fail: bool = False) -> Iterator[str]:
        yield "Hello"
        if fail:
            raise RuntimeError("engine died")
        yield " world"

    def read() -> None:
        stream = chat(PROMPT)
        next(stream)
        stream.close()
        with pytest.raises(RuntimeError):
            list(chat(PROMPT, fail=True))
        list(chat(PROMPT))

    left, failed, whole = record_turns(tmp_path, read)
    assert _picked(left) == {"completion": [{"role": "assistant", "content": "Hello"}],
                             "completion_incomplete": True}
    assert _picked(failed) == {**_picked(left), "error": True}
    assert _picked(whole) == {"completion": [{"role": "assistant", "content": "Hello world"}],
                              "finish_reason": "stop"}


def _anthropic_message(**usage: int) -> anthropic.types.Message:
    return anthropic.types.Message.model_validate(
        {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
         "stop_reason": "end_turn", "content": [{"type": "text", "text": "ok"}],
         "usage": {"output_tokens": 1, **usage}})


def _openai_completion(**usage: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"completion_tokens": 1, **usage}}


@pytest.mark.parametrize(("reply", "cache_read", "cache_creation"), [
    (_anthropic_message(input_tokens=10, cache_read_input_tokens=1200, cache_creation_input_tokens=0),
     1200, 0),
    (_anthropic_message(input_tokens=10, cache_read_input_tokens=0, cache_creation_input_tokens=1200),
     0, 1200),
    (_openai_completion(prompt_tokens=1210, prompt_tokens_details={"cached_tokens": 1200}), 1200, None),
    (AIMessage("ok", usage_metadata={"input_tokens": 1210, "output_tokens": 1, "total_tokens": 1211,
                                     "input_token_details": {"cache_read": 1200}}), 1200, None),
    ({"object": "response", "id": "r1", "model": "gpt-test", "status": "completed", "output": [],
      "usage": {"input_tokens": 1210, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 1200}}},
     1200, None),
], ids=["anthropic-read", "anthropic-creation", "openai-chat", "langchain", "openai-responses"])
def test_the_same_prompt_counts_the_same_input_tokens_from_every_provider(
        tmp_path: Path, reply: Any, cache_read: int | None, cache_creation: int | None) -> None:
    @ot.llm("m")
    def chat(messages: list[dict[str, str]]) -> Any:
        return reply

    (turn,) = record_turns(tmp_path, lambda: chat(PROMPT))
    assert (turn["input_tokens"], turn["output_tokens"]) == (PROMPT_TOKENS, 1)
    assert (turn.get("cache_read_input_tokens"), turn.get("cache_creation_input_tokens")) == (
        cache_read, cache_creation)


def test_set_usage_states_the_cached_part(tmp_path: Path) -> None:
    @ot.llm("m")
    def chat(messages: list[dict[str, str]]) -> str:
        ot.set_usage(PROMPT_TOKENS, 3, cache_read_input_tokens=CACHED)
        return "ok"

    (turn,) = record_turns(tmp_path, lambda: chat(PROMPT))
    assert (turn["input_tokens"], turn["cache_read_input_tokens"]) == (PROMPT_TOKENS, CACHED)



@pytest.mark.parametrize("latest", [False, True])
def test_the_cache_write_count_under_either_conventions_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spans: Spans, latest: bool) -> None:
    if latest:
        monkeypatch.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, sc.GEN_AI_LATEST_EXPERIMENTAL)
    reply = _anthropic_message(input_tokens=10, cache_read_input_tokens=0, cache_creation_input_tokens=1200)

    @ot.llm("m")
    def chat(messages: list[dict[str, str]]) -> Any:
        return reply

    chat(PROMPT)
    attributes = spans.one("chat m").attributes or {}
    usage = {key: value for key, value in attributes.items() if key.startswith("gen_ai.usage.")}
    write = (sc.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS if latest
             else sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)
    assert usage == {sc.GEN_AI_USAGE_INPUT_TOKENS: 1210, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 1,
                     sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 0, write: 1200}


@pytest.mark.parametrize("latest", [False, True])
def test_the_collector_reads_the_cache_write_count_by_either_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, latest: bool) -> None:
    if latest:
        monkeypatch.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, sc.GEN_AI_LATEST_EXPERIMENTAL)

    @ot.llm("m")
    def chat(messages: list[dict[str, str]]) -> Any:
        ot.set_usage(PROMPT_TOKENS, 1, cache_creation_input_tokens=CACHED)
        return "ok"

    (turn,) = record_turns(tmp_path, lambda: chat(PROMPT))
    assert (turn["input_tokens"], turn["cache_creation_input_tokens"]) == (PROMPT_TOKENS, CACHED)


def test_returned_openai_stream_manager(tmp_path: Path) -> None:
    """``chat.completions.stream(...)`` returned and entered: its events are the helper's own
    (``content.delta`` ...), and its snapshot is the reply."""
    client = openai_client()

    @ot.llm("gpt-test")
    def chat(messages: list[dict[str, str]]) -> Any:
        return client.chat.completions.stream(model="gpt-test", messages=messages,  # type: ignore[arg-type]
                                              stream_options={"include_usage": True})

    def read() -> None:
        with chat(PROMPT) as stream:
            text = "".join(event.delta for event in stream if event.type == "content.delta")
        assert text == "Hello world"

    (turn,) = record_turns(tmp_path, read)
    assert _picked(turn) == WHOLE


def test_returned_async_anthropic_stream_manager(tmp_path: Path) -> None:
    async def run() -> None:
        client = anthropic.AsyncAnthropic(
            api_key="test", base_url="http://llm.test", max_retries=0,
            http_client=httpx2.AsyncClient(transport=_transport(httpx2, anthropic_sse())))

        @ot.llm("claude-test")
        async def chat(messages: list[dict[str, str]]) -> Any:
            return client.messages.stream(model="claude-test", max_tokens=64,
                                          messages=messages)  # type: ignore[arg-type]

        async with await chat(PROMPT) as stream:
            assert "".join([text async for text in stream.text_stream]) == "Hello world"

    (turn,) = record_turns(tmp_path, lambda: asyncio.run(run()))
    assert _picked(turn) == WHOLE


def test_a_returned_context_manager_that_opens_no_stream_is_a_reply(tmp_path: Path) -> None:
    """A ``requests`` response (a context manager, iterable by bytes) returned as it is: recorded as the
    reply, not taken for a stream (a stream manager's class says it is one)."""
    response = requests.Response()
    response.status_code = 200
    response._content = b'{"choices": []}'

    @ot.llm("m")
    def chat(messages: list[dict[str, str]]) -> Any:
        return response

    def read() -> None:
        assert type(chat(PROMPT)) is requests.Response

    (turn,) = record_turns(tmp_path, read)
    assert "completion_incomplete" not in turn and turn["output_ref"] == ot.content_ref(response)


def test_a_returned_stream_ends_ok_once_the_model_said_why_it_stopped(spans: Spans) -> None:
    """Read whole by ``text_stream`` and exited, or left after the finish reason (only the usage chunk
    unread): status OK; left before it: no status (the reply is incomplete)."""
    anthropic_stream, openai_stream = anthropic_client(), openai_client()

    @ot.llm("claude-test")
    def claude(messages: list[dict[str, str]]) -> Any:
        return anthropic_stream.messages.stream(model="claude-test", max_tokens=64,
                                                messages=messages)  # type: ignore[arg-type]

    @ot.llm("gpt-test")
    def gpt(messages: list[dict[str, str]]) -> Any:
        return openai_stream.chat.completions.create(model="gpt-test", messages=messages,  # type: ignore[arg-type]
                                                     stream=True)

    with claude(PROMPT) as stream:
        assert "".join(stream.text_stream) == "Hello world"
    for cut in (3, 1):  # chunks read: the finish reason comes with the third
        stream = gpt(PROMPT)
        for _ in range(cut):
            next(stream)
        stream.close()
    statuses = [(span.name, span.status.status_code.name) for span in spans.all]
    assert statuses == [("chat claude-test", "OK"), ("chat gpt-test", "OK"), ("chat gpt-test", "UNSET")]
    flagged = [sc.ORCH_COMPLETION_INCOMPLETE in (span.attributes or {}) for span in spans.all]
    assert flagged == [False, False, True]
