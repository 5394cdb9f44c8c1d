"""The normalized reply of one model call, whatever client library produced it.

``Reply.message()`` is the completion in the GenAI output-message shape (what goes on the span)::

    {"role": "assistant",
     "parts": [{"type": "reasoning", "content": "..."},          # thinking / reasoning text, when any
               {"type": "text", "content": "..."},               # the answer's text, when any
               {"type": "tool_call", "id": "...", "name": "...", "arguments": ...}],  # each requested call
     "finish_reason": "stop" | "length" | "tool_calls" | "content_filter" | <provider's own word>}

Finish reasons use the OpenAI Chat Completions words: Anthropic's ``end_turn`` / ``max_tokens`` /
``tool_use``, the Responses API's statuses and Gemini's upper-case reasons are mapped onto them (other
words are kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrace import semconv as sc
from orchestrace.fields import field_of
from orchestrace.usage import Usage, usage_attributes

Message = dict[str, Any]

_FINISH_REASONS = {
    "end_turn": "stop", "stop_sequence": "stop", "completed": "stop", "STOP": "stop",
    "max_tokens": "length", "max_output_tokens": "length", "MAX_TOKENS": "length",
    "tool_use": "tool_calls", "tool_call": "tool_calls", "function_call": "tool_calls",
    "refusal": "content_filter", "SAFETY": "content_filter",
}


def finish_reason(raw: Any) -> str | None:
    """A provider's stop reason in the OpenAI vocabulary (``None`` when there is none)."""
    if not isinstance(raw, str) or not raw:
        return None
    return _FINISH_REASONS.get(raw, raw)


@dataclass(slots=True)
class ToolCall:
    id: str | None
    name: str
    #: As the provider gave them: JSON text (OpenAI) or an object (Anthropic, LangChain).
    arguments: Any


@dataclass(slots=True)
class Reply:
    """One model reply (its first choice), normalized."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None  # as stated by the reply (``None``: it said nothing)
    usage: Usage | None = None
    response_model: str | None = None
    response_id: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None

    def message(self) -> Message:
        """The completion as a GenAI output message (see the module docstring)."""
        parts: list[dict[str, Any]] = []
        if self.reasoning:
            parts.append({"type": "reasoning", "content": self.reasoning})
        if self.text:
            parts.append({"type": "text", "content": self.text})
        parts.extend({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
                     for call in self.tool_calls)
        return {"role": "assistant", "parts": parts, "finish_reason": self.final_reason()}

    def final_reason(self) -> str:
        """The finish reason stated, else the one the reply shows (tool calls made, or a stop)."""
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


def reply_attributes(reply: Reply, capture_content: bool, with_usage: bool = True) -> dict[str, Any]:
    """Span attributes of a reply: usage (unless ``with_usage`` is false: set by the user), response model,
    id and finish reason; with content capture, token ids and logprobs (the content in another form)."""
    attributes: dict[str, Any] = (usage_attributes(reply.usage) if with_usage and reply.usage is not None
                                  else {})
    if reply.response_model:
        attributes[sc.GEN_AI_RESPONSE_MODEL] = reply.response_model
    if reply.response_id:
        attributes[sc.GEN_AI_RESPONSE_ID] = reply.response_id
    if reply.finish_reason:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = [reply.finish_reason]
    if capture_content:
        for key, values in ((sc.ORCH_PROMPT_TOKEN_IDS, reply.prompt_token_ids),
                            (sc.ORCH_COMPLETION_TOKEN_IDS, reply.completion_token_ids),
                            (sc.ORCH_COMPLETION_LOGPROBS, reply.completion_logprobs)):
            if values:
                attributes[key] = values
    return attributes


def add_block(reply: Reply, block: Any) -> None:
    """One content block of a reply (Anthropic ``Message.content``, a LangChain message's list content, an
    OpenAI content part): its text, reasoning or tool call goes to ``reply``."""
    if isinstance(block, str):
        reply.text += block
        return
    kind = field_of(block, "type")
    if kind in ("text", "output_text"):
        reply.text += str(field_of(block, "text") or "")
    elif kind == "thinking":
        reply.reasoning += str(field_of(block, "thinking") or "")
    elif kind == "reasoning":  # LangChain's standard block (``reasoning``) or OpenAI's summary list
        text = field_of(block, "reasoning")
        if text is None:
            text = "".join(str(field_of(s, "text") or "") for s in field_of(block, "summary") or ())
        reply.reasoning += str(text or "")
    elif kind == "tool_use":
        reply.tool_calls.append(ToolCall(field_of(block, "id"), str(field_of(block, "name") or ""),
                                         field_of(block, "input")))


def text_of(content: Any) -> tuple[str, str]:
    """(text, reasoning) of message content: a string, or a list of content blocks."""
    if content is None or isinstance(content, str):
        return content or "", ""
    reply = Reply()
    for block in content if isinstance(content, list | tuple) else (content,):
        if isinstance(block, Mapping | str) or hasattr(block, "type"):
            add_block(reply, block)
    return reply.text, reply.reasoning
