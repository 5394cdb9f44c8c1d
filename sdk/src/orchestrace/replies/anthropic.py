"""Anthropic Messages API replies: ``Message`` (object or dict; text, ``thinking`` and ``tool_use`` blocks)
and its raw stream events (``message_start`` ... ``message_stop``)."""

from __future__ import annotations

from typing import Any

from orchestrace.fields import field_of
from orchestrace.replies.reply import Reply, add_block, finish_reason
from orchestrace.replies.stream import ReplyStream
from orchestrace.usage import extract_usage

#: The ``type`` of every raw stream event.
STREAM_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta",
                           "content_block_stop", "message_delta", "message_stop"})


def is_message(result: Any) -> bool:
    return field_of(result, "type") == "message" and isinstance(field_of(result, "content"), list | tuple)


def _meta(reply: Reply, message: Any) -> None:
    reply.response_id = field_of(message, "id") or reply.response_id
    reply.response_model = field_of(message, "model") or reply.response_model
    reply.usage = extract_usage(message) or reply.usage


def from_message(result: Any) -> Reply:
    reply = Reply()
    _meta(reply, result)
    for block in field_of(result, "content") or ():
        add_block(reply, block)
    reply.finish_reason = finish_reason(field_of(result, "stop_reason"))
    return reply


def add_event(stream: ReplyStream, event: Any) -> None:
    kind = field_of(event, "type")
    index = field_of(event, "index")
    if kind == "message_start":
        _meta(stream.reply, field_of(event, "message"))
    elif kind == "content_block_start":
        block = field_of(event, "content_block")
        block_type = field_of(block, "type")
        if block_type == "tool_use":
            stream.add_call(index, field_of(block, "id"), field_of(block, "name"))
        elif block_type == "text":
            stream.add_text(field_of(block, "text"))
        elif block_type == "thinking":
            stream.add_reasoning(field_of(block, "thinking"))
    elif kind == "content_block_delta":
        delta = field_of(event, "delta")
        delta_type = field_of(delta, "type")
        if delta_type == "text_delta":
            stream.add_text(field_of(delta, "text"))
        elif delta_type == "thinking_delta":
            stream.add_reasoning(field_of(delta, "thinking"))
        elif delta_type == "input_json_delta":
            stream.add_call(index, arguments=field_of(delta, "partial_json"))
    elif kind == "message_delta":
        reason = finish_reason(field_of(field_of(event, "delta"), "stop_reason"))
        if reason is not None:
            stream.reply.finish_reason = reason
        usage = extract_usage(event)  # output tokens so far; input tokens came with message_start
        if usage is not None:
            before = stream.reply.usage
            stream.reply.usage = before.updated(usage) if before is not None else usage
