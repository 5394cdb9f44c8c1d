"""LangChain chat model replies: ``AIMessage`` and streamed ``AIMessageChunk``s (text or content blocks,
``tool_calls`` / ``tool_call_chunks``, ``usage_metadata``, ``response_metadata``)."""

from __future__ import annotations

from typing import Any

from orchestrace.fields import field_of, model_fields
from orchestrace.replies.reply import Reply, ToolCall, finish_reason, text_of
from orchestrace.replies.stream import ReplyStream
from orchestrace.usage import Usage, extract_usage, usage_from_block

AI_TYPES = frozenset({"ai", "AIMessageChunk"})


def is_ai_message(result: Any) -> bool:
    return not isinstance(result, dict) and getattr(result, "type", None) in AI_TYPES


def _meta(reply: Reply, message: Any) -> None:
    metadata = field_of(message, "response_metadata") or {}
    # A pydantic message's declared fields, read from its ``__dict__`` as ``field_of`` reads them first.
    fields = model_fields(message)
    if type(metadata) is dict:  # what LangChain gives: read without a call per key
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        response_id = metadata.get("id")
        name = metadata.get("model_name")
    else:
        reason = field_of(metadata, "finish_reason") or field_of(metadata, "stop_reason")
        response_id = field_of(metadata, "id")
        name = field_of(metadata, "model_name")
    if reason:
        reply.finish_reason = finish_reason(reason) or reply.finish_reason
    # ``response_model``'s rule (the message's own ``model``, else the metadata's ``model_name``), with the
    # metadata already in hand.
    model = field_of(message, "model")
    model = model if isinstance(model, str) else name if isinstance(name, str) else None
    reply.response_model = model or reply.response_model
    response_id = response_id or (fields["id"] if "id" in fields else field_of(message, "id"))
    if isinstance(response_id, str) and response_id:
        reply.response_id = response_id
    # ``extract_usage``'s first place to look, ``usage_metadata``, read directly; the others when it has none.
    block = fields.get("usage_metadata")
    usage = usage_from_block(block) if block is not None else None
    reply.usage = usage or extract_usage(message) or reply.usage


def from_ai_message(result: Any, content: bool = True) -> Reply:
    """``content``: false when only the reply's metadata (usage, model, id, finish reason) will be read; its
    text, reasoning and tool calls are then left empty."""
    reply = Reply()
    _meta(reply, result)
    if not content:
        return reply
    reply.text, reply.reasoning = text_of(field_of(result, "content"))
    if not reply.reasoning:
        extra = field_of(result, "additional_kwargs") or {}
        reasoning = field_of(extra, "reasoning_content")
        reply.reasoning = reasoning if isinstance(reasoning, str) else ""
    reply.tool_calls = [ToolCall(field_of(call, "id"), str(field_of(call, "name") or ""),
                                 field_of(call, "args")) for call in field_of(result, "tool_calls") or ()]
    return reply


def add_chunk(stream: ReplyStream, chunk: Any) -> None:
    before = stream.reply.usage
    _meta(stream.reply, chunk)
    usage = extract_usage(chunk)
    if usage is not None and before is not None:  # chunks' usages add up, as when LangChain merges them
        stream.reply.usage = Usage(*((a or 0) + (b or 0) if a is not None or b is not None else None
                                     for a, b in zip(before, usage, strict=True)))
    text, reasoning = text_of(field_of(chunk, "content"))
    stream.add_text(text)
    stream.add_reasoning(reasoning)
    for call in field_of(chunk, "tool_call_chunks") or ():
        stream.add_call(field_of(call, "index", 0), field_of(call, "id"), field_of(call, "name"),
                        field_of(call, "args"))
