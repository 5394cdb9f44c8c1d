"""Every common reply shape, built with the real client libraries' types (no network), becomes one turn: the
assistant completion (text, reasoning, tool calls), usage, finish reason, response model and id."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orchestrace as ot
import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent
from langchain_core.messages import AIMessage, AIMessageChunk
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response
from pydantic import TypeAdapter
from written_turns import record_turns

PROMPT = [{"role": "user", "content": "weather in Paris?"}]
WEATHER_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
}
#: What every shape below says, as the turn must hold it.
EXPECTED = {
    "completion": [{"role": "assistant", "content": "Let me check.", "tool_calls": [WEATHER_CALL]}],
    "finish_reason": "tool_calls",
    "response_id": "resp-42",
    "response_model": "served-model-1",
    "input_tokens": 12,
    "output_tokens": 7,
}
TURN_KEYS = list(EXPECTED)


def one_turn(tmp_path: Path, reply: Any) -> dict[str, Any]:
    @ot.llm("requested-model")
    def chat(messages: list[dict[str, str]]) -> Any:
        return reply

    (turn,) = record_turns(tmp_path, lambda: chat(PROMPT))
    assert turn["prompt"] == PROMPT
    return turn


def streamed_turn(tmp_path: Path, chunks: list[Any]) -> dict[str, Any]:
    @ot.llm("requested-model")
    def chat(messages: list[dict[str, str]]) -> Iterator[Any]:
        yield from chunks

    (turn,) = record_turns(tmp_path, lambda: list(chat(PROMPT)))
    assert turn["prompt"] == PROMPT
    return turn


def picked(turn: dict[str, Any]) -> dict[str, Any]:
    return {key: turn.get(key) for key in TURN_KEYS}


# --- OpenAI Chat Completions -------------------------------------------------------------------------------

CHAT_COMPLETION = {
    "id": "resp-42",
    "object": "chat.completion",
    "created": 1,
    "model": "served-model-1",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
}


@pytest.mark.parametrize("as_object", [True, False], ids=["object", "dict"])
def test_openai_chat_completion(tmp_path: Path, as_object: bool) -> None:
    reply = ChatCompletion.model_validate(CHAT_COMPLETION) if as_object else CHAT_COMPLETION
    assert picked(one_turn(tmp_path, reply)) == EXPECTED


def test_litellm_model_response(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of LiteLLM's price list
    from litellm import ModelResponse  # imported here: a heavy import, and after the variable is set

    reply = ModelResponse(**CHAT_COMPLETION)
    assert type(reply).__module__.startswith("litellm")
    assert picked(one_turn(tmp_path, reply)) == EXPECTED


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {
            "id": "resp-42",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "served-model-1",
            "choices": choices,
            **extra,
        }
    )


def openai_chunks() -> list[ChatCompletionChunk]:
    """The reply above as the API streams it: text in pieces, the tool call's arguments in pieces, the finish
    reason, then usage alone in the last chunk (``stream_options={"include_usage": True}``)."""
    delta = [
        {"role": "assistant", "content": "Let me"},
        {"content": " check."},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": '},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
    ]
    chunks = [_chunk([{"index": 0, "delta": d, "finish_reason": None}]) for d in delta]
    chunks.append(_chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
    chunks.append(_chunk([], usage={"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}))
    return chunks


def test_openai_stream_sync(tmp_path: Path) -> None:
    assert picked(streamed_turn(tmp_path, openai_chunks())) == EXPECTED


def test_openai_stream_async_dict_chunks(tmp_path: Path) -> None:
    chunks = [c.model_dump(exclude_none=True) for c in openai_chunks()]

    @ot.llm("requested-model")
    async def chat(messages: list[dict[str, str]]) -> AsyncIterator[Any]:
        for chunk in chunks:
            await asyncio.sleep(0)
            yield chunk

    async def consume() -> None:
        assert [c async for c in chat(PROMPT)] == chunks

    (turn,) = record_turns(tmp_path, lambda: asyncio.run(consume()))
    assert picked(turn) == EXPECTED


def test_abandoned_stream_records_what_arrived(tmp_path: Path) -> None:
    @ot.llm("requested-model")
    def chat(messages: list[dict[str, str]]) -> Iterator[Any]:
        yield from openai_chunks()

    def consume_two() -> None:
        stream = chat(PROMPT)
        next(stream), next(stream)
        stream.close()

    (turn,) = record_turns(tmp_path, consume_two)
    assert turn["completion"] == [{"role": "assistant", "content": "Let me check."}]
    assert turn["completion_incomplete"] is True and "finish_reason" not in turn


# --- OpenAI Responses API ----------------------------------------------------------------------------------


def test_openai_responses_api(tmp_path: Path) -> None:
    response = Response.model_validate(
        {
            "id": "resp-42",
            "object": "response",
            "created_at": 1,
            "model": "served-model-1",
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "Need weather."}],
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
                },
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                    "status": "completed",
                },
            ],
            "usage": {
                "input_tokens": 12,
                "output_tokens": 7,
                "total_tokens": 19,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 3},
            },
        }
    )
    turn = one_turn(tmp_path, response)
    assert picked(turn) == {
        **EXPECTED,
        "completion": [{**EXPECTED["completion"][0], "reasoning_content": "Need weather."}],
    }


# --- Anthropic ---------------------------------------------------------------------------------------------

ANTHROPIC_MESSAGE = {
    "id": "resp-42",
    "type": "message",
    "role": "assistant",
    "model": "served-model-1",
    "content": [
        {"type": "thinking", "thinking": "Need weather.", "signature": "sig"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 7},
}
WITH_THINKING = {
    **EXPECTED,
    "completion": [{**EXPECTED["completion"][0], "reasoning_content": "Need weather."}],
}


def test_anthropic_message(tmp_path: Path) -> None:
    assert picked(one_turn(tmp_path, AnthropicMessage.model_validate(ANTHROPIC_MESSAGE))) == WITH_THINKING


def test_anthropic_stream(tmp_path: Path) -> None:
    start = {
        **ANTHROPIC_MESSAGE,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    raw = [
        {"type": "message_start", "message": start},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need "}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "weather."},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Let me check."}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 7},
        },
        {"type": "message_stop"},
    ]
    events = [TypeAdapter(RawMessageStreamEvent).validate_python(e) for e in raw]
    assert picked(streamed_turn(tmp_path, events)) == WITH_THINKING


# --- LangChain ---------------------------------------------------------------------------------------------


def test_langchain_ai_message(tmp_path: Path) -> None:
    message = AIMessage(
        "Let me check.",
        id="resp-42",
        tool_calls=[{"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        response_metadata={"finish_reason": "tool_calls", "model_name": "served-model-1"},
    )
    assert picked(one_turn(tmp_path, message)) == EXPECTED


def test_langchain_ai_message_chunks(tmp_path: Path) -> None:
    chunks = [
        AIMessageChunk("Let me", id="resp-42"),
        AIMessageChunk(" check.", id="resp-42"),
        AIMessageChunk(
            "",
            id="resp-42",
            tool_call_chunks=[{"index": 0, "id": "call_1", "name": "get_weather", "args": '{"city": '}],
        ),
        AIMessageChunk("", id="resp-42", tool_call_chunks=[{"index": 0, "args": '"Paris"}'}]),
        AIMessageChunk(
            "",
            id="resp-42",
            response_metadata={"finish_reason": "tool_calls", "model_name": "served-model-1"},
            usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        ),
    ]
    assert picked(streamed_turn(tmp_path, chunks)) == EXPECTED


# --- Plain text --------------------------------------------------------------------------------------------


def test_plain_string(tmp_path: Path) -> None:
    turn = one_turn(tmp_path, "It is sunny.")
    assert turn["completion"] == [{"role": "assistant", "content": "It is sunny."}]
    assert turn["finish_reason"] == "stop"
    assert "response_id" not in turn and "input_tokens" not in turn


def test_plain_string_stream(tmp_path: Path) -> None:
    turn = streamed_turn(tmp_path, ["It is ", "sunny."])
    assert turn["completion"] == [{"role": "assistant", "content": "It is sunny."}]


def test_every_shape_gives_the_same_turn(tmp_path: Path) -> None:
    """The same answer in four providers' shapes: one turn (but for the reasoning some of them carry)."""
    replies = [
        ChatCompletion.model_validate(CHAT_COMPLETION),
        CHAT_COMPLETION,
        AnthropicMessage.model_validate({**ANTHROPIC_MESSAGE, "content": ANTHROPIC_MESSAGE["content"][1:]}),
    ]

    @ot.llm("requested-model")
    def chat(messages: list[dict[str, str]], which: int) -> Any:
        return replies[which]

    turns = record_turns(tmp_path, lambda: [chat(PROMPT, i) for i in range(len(replies))])
    assert [picked(t) for t in turns] == [EXPECTED] * len(replies)
    # The completion renders with a chat template's tool-call shape: arguments a JSON object.
    assert (
        json.dumps(turns[0]["completion"][0]["tool_calls"][0]["function"]["arguments"]) == '{"city": "Paris"}'
    )


def test_a_langchain_reply_s_metadata_is_read_from_its_fields_or_its_response_metadata() -> None:
    """A LangChain message's usage, response id and model, read from its own fields first
    (``fields.model_fields``): ``usage_metadata`` when it states counts, else the provider's usage in
    ``response_metadata``; the provider's id before LangChain's run id; an ``AIMessageChunk`` alike."""
    from orchestrace.replies import normalize
    from orchestrace.usage import Usage

    stated = AIMessage("a", id="run-1",
                       usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
                       response_metadata={"id": "resp-1", "model_name": "m-1", "finish_reason": "length",
                                          "token_usage": {"prompt_tokens": 99, "completion_tokens": 99}})
    provider_only = AIMessage("b", id="run-2", response_metadata={
        "token_usage": {"prompt_tokens": 4, "completion_tokens": 1,
                        "prompt_tokens_details": {"cached_tokens": 2}}})
    nothing = AIMessageChunk(content="c")
    replies = [normalize(m, False) for m in (stated, provider_only, nothing)]
    assert [(r.usage, r.response_id, r.response_model, r.finish_reason) for r in replies if r] == [
        (Usage(3, 2), "resp-1", "m-1", "length"),
        (Usage(4, 1, 2), "run-2", None, None),
        (None, None, None, None),
    ]
