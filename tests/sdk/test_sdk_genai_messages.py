"""Chat spans' input and output messages follow the GenAI message schemas, whatever the prompt and reply."""

from __future__ import annotations

import json
from typing import Any

import orchestrace as ot
import pytest
from anthropic.types import Message as AnthropicMessage
from genai_messages import INPUT_MESSAGES, OUTPUT_MESSAGES, problems
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from openai.types.chat import ChatCompletion
from orchestrace import semconv as sc
from orchestrace.config import set_config
from sdk_spans import Spans, configure_memory
from test_sdk_replies import ANTHROPIC_MESSAGE, CHAT_COMPLETION

PROMPTS: list[Any] = [
    "a plain question",
    [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ],
    [
        SystemMessage("s"),
        HumanMessage("h"),
        AIMessage("", tool_calls=[{"id": "c2", "name": "g", "args": {}}]),
        ToolMessage("r", tool_call_id="c2"),
    ],
]
REPLIES: list[Any] = [
    "text",
    ChatCompletion.model_validate(CHAT_COMPLETION),
    CHAT_COMPLETION,
    AnthropicMessage.model_validate(ANTHROPIC_MESSAGE),
    AIMessage("x", response_metadata={"stop_reason": "end_turn"}),
    {"unknown": "shape"},
]


@pytest.mark.parametrize("prompt", PROMPTS, ids=["text", "openai-dicts", "langchain"])
@pytest.mark.parametrize(
    "reply", REPLIES, ids=["text", "openai-object", "openai-dict", "anthropic", "langchain", "unknown"]
)
def test_captured_messages_follow_the_genai_schemas(prompt: Any, reply: Any) -> None:
    handle = configure_memory(capture_content=True)
    try:

        @ot.llm("m")
        def chat(messages: Any) -> Any:
            return reply

        chat(prompt)
        span = Spans(handle).one("chat m")
    finally:
        handle.shutdown()
        set_config(None)
    inputs = json.loads(str(span.attributes[sc.GEN_AI_INPUT_MESSAGES]))
    outputs = json.loads(str(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))
    assert problems(INPUT_MESSAGES, inputs) == []
    assert problems(OUTPUT_MESSAGES, outputs) == []
    assert outputs[0]["role"] == "assistant"


def test_the_schema_rejects_what_a_backend_would() -> None:
    assert problems(OUTPUT_MESSAGES, [{"role": "assistant", "parts": []}])  # no finish_reason
    assert problems(INPUT_MESSAGES, [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "x"}]}])
    assert problems(INPUT_MESSAGES, [{"role": "message", "parts": [{"type": "text", "content": 3}]}])
