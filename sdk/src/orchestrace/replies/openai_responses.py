"""OpenAI Responses API replies: ``Response`` (object or dict) with ``message`` / ``reasoning`` /
``function_call`` output items, and its stream events (``response.output_text.delta`` ...
``response.completed``)."""

from __future__ import annotations

from typing import Any

from orchestrace.fields import field_of
from orchestrace.replies.reply import Reply, ToolCall, add_block, finish_reason
from orchestrace.replies.stream import ReplyStream
from orchestrace.usage import extract_usage

STREAM_EVENT_PREFIX = "response."


def is_response(result: Any) -> bool:
    return field_of(result, "object") == "response" and isinstance(field_of(result, "output"), list | tuple)


def from_response(result: Any) -> Reply:
    reply = Reply(response_id=field_of(result, "id"), response_model=field_of(result, "model"),
                  usage=extract_usage(result))
    for item in field_of(result, "output") or ():
        kind = field_of(item, "type")
        if kind == "message":
            for part in field_of(item, "content") or ():
                add_block(reply, part)
        elif kind == "reasoning":
            add_block(reply, item)
        elif kind == "function_call":
            reply.tool_calls.append(ToolCall(field_of(item, "call_id") or field_of(item, "id"),
                                             str(field_of(item, "name") or ""), field_of(item, "arguments")))
    status = field_of(result, "status")
    if status == "incomplete":
        reason = field_of(field_of(result, "incomplete_details"), "reason")
        reply.finish_reason = finish_reason(reason) or "length"
    elif status == "completed":
        reply.finish_reason = "tool_calls" if reply.tool_calls else "stop"
    else:
        reply.finish_reason = finish_reason(status)
    return reply


def add_event(stream: ReplyStream, event: Any) -> None:
    """A stream event: text deltas as they come; the final ``response.completed`` (or ``.incomplete``)
    event carries the whole response, which then replaces what the deltas built."""
    kind = field_of(event, "type")
    if kind == "response.output_text.delta":
        stream.add_text(field_of(event, "delta"))
    elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        stream.add_reasoning(field_of(event, "delta"))
    elif kind in ("response.completed", "response.incomplete"):
        whole = from_response(field_of(event, "response"))
        stream.reply = whole
        stream.calls = {i: [c.id, c.name, [c.arguments if isinstance(c.arguments, str) else ""]]
                        for i, c in enumerate(whole.tool_calls)}
        if whole.reasoning and not stream.reasoning:
            stream.add_reasoning(whole.reasoning)
