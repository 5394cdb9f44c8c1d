"""Model-call replies of every common client library, normalized to one :class:`Reply`.

One module per provider's shapes (``openai_chat``, ``openai_responses``, ``anthropic``, ``langchain``); this
module only tells the shapes apart. Whole replies go through :func:`normalize`, streamed chunks through
:func:`parse_chunk` into a :class:`ReplyStream`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrace.fields import field_of
from orchestrace.replies import anthropic, langchain, openai_chat, openai_responses
from orchestrace.replies.reply import Reply, ToolCall, finish_reason, reply_attributes
from orchestrace.replies.stream import ReplyStream, StreamedText
from orchestrace.usage import extract_usage

__all__ = ["Reply", "ReplyStream", "StreamedText", "ToolCall", "finish_reason", "normalize", "parse_chunk",
           "reply_attributes"]


#: A tuple rather than an ``X | Y`` union, which is built anew at each call (every model call's path).
_NOT_REPLIES = (bytes, int, float, list, tuple)


def normalize(result: Any, content: bool = True) -> Reply | None:
    """The reply ``result`` holds, or ``None`` when it is none of the known shapes: a string, an OpenAI
    Chat Completions response (object or dict, LiteLLM's too), an OpenAI Responses API response, an
    Anthropic ``Message``, a LangChain ``AIMessage``. ``content``: false when only the reply's metadata
    (usage, response model and id, finish reason) will be read: a reader may then skip the text, reasoning
    and tool calls (the LangChain one does: a model call through callbacks, capture off, reads no more)."""
    if isinstance(result, str):
        return Reply(text=result)
    if result is None or isinstance(result, _NOT_REPLIES):
        return None
    # First the one shape told apart by its type alone (no other shape's type is "ai"): asking a LangChain
    # message (a pydantic model) for another shape's fields costs a raised AttributeError each.
    if langchain.is_ai_message(result):
        return langchain.from_ai_message(result, content)
    if isinstance(field_of(result, "choices"), list | tuple):
        return openai_chat.from_chat_completion(result)
    if openai_responses.is_response(result):
        return openai_responses.from_response(result)
    if anthropic.is_message(result):
        return anthropic.from_message(result)
    return None


def parse_chunk(stream: ReplyStream, chunk: Any) -> None:
    """Add one streamed chunk of any known shape to ``stream``: a string, an OpenAI ``ChatCompletionChunk``
    (object or dict), an Anthropic stream event, an OpenAI Responses stream event, or a LangChain
    ``AIMessageChunk``; chunks of no known shape add nothing."""
    if isinstance(chunk, str):
        stream.add_text(chunk)
        return
    if isinstance(field_of(chunk, "choices"), list | tuple):
        openai_chat.add_chunk(stream, chunk)
        return
    kind = field_of(chunk, "type")
    if not isinstance(kind, str):  # a chunk of the user's own shape: ``{"content": ...}``, ``{"usage": ...}``
        if isinstance(chunk, Mapping) and isinstance(chunk.get("content"), str):
            stream.add_text(chunk["content"])
        stream.reply.usage = extract_usage(chunk) or stream.reply.usage
        return
    if kind in anthropic.STREAM_EVENTS:
        anthropic.add_event(stream, chunk)
    elif kind.startswith(openai_responses.STREAM_EVENT_PREFIX):
        openai_responses.add_event(stream, chunk)
    elif kind in langchain.AI_TYPES:
        langchain.add_chunk(stream, chunk)
