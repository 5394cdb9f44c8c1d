"""Other forms of a model call's or tool call's record, as the GenAI attributes they stand for.

Conversion reads GenAI attributes (and the flattened vocabularies ``chat`` reads); the records here say the
same in another form and are overlaid on a span's attributes, the span's own attributes winning:

- messages on span events (see ``vocabularies.GEN_AI_DETAILS_EVENT``); events of one message each,
  ``gen_ai.<role>.message`` with its ``content`` then ``gen_ai.choice`` with the reply's ``message``, stand
  for a JSON list of ``{"role", "content"}`` messages in event order (a content of Bedrock content blocks,
  Strands' form, as text and tool-use and tool-result parts); on a tool span, the arguments and result;
- a Langfuse generation's usage (a JSON object in one attribute) and captured input and output;
- a Vercel AI SDK provider call's prompt (``ai.prompt.messages``) and reply (its text and tool calls, as one
  assistant message), and its tool call's id, arguments and result.
"""

from __future__ import annotations

import json

import orchestrace_semconv as sc

from ..spans import Attributes, Span
from .vocabularies import (
    AI_OPERATION_ID,
    AI_PROMPT_MESSAGES,
    AI_RESPONSE_TEXT,
    AI_RESPONSE_TOOL_CALLS,
    AI_TOOL_CALL_AS_GENAI,
    AI_TOOL_CALL_NAME,
    GEN_AI_CHOICE_EVENT,
    GEN_AI_COMPLETION,
    GEN_AI_COMPLETION_EVENT,
    GEN_AI_DETAILS_EVENT,
    GEN_AI_PROMPT,
    GEN_AI_PROMPT_EVENT,
    LF_INPUT,
    LF_OBSERVATION_TYPE,
    LF_OUTPUT,
    LF_USAGE_DETAILS,
)

#: Langfuse usage key -> the GenAI attribute it stands for.
_USAGE_DETAILS = ((sc.GEN_AI_USAGE_INPUT_TOKENS, "input"), (sc.GEN_AI_USAGE_OUTPUT_TOKENS, "output"))

#: The GenAI conventions' older events of one message each, as span events: event -> the message's role.
_MESSAGE_EVENTS = {f"gen_ai.{role}.message": role for role in ("system", "user", "assistant", "tool")}
_EVENT_CONTENT = "content"
_CHOICE_MESSAGE = "message"
_TOOL_MESSAGE_EVENT = "gen_ai.tool.message"

#: Content blocks of Amazon Bedrock's Converse API (Strands records a message's content as a JSON list of
#: them): each a one-key object.
_BEDROCK_BLOCKS = frozenset({"text", "toolUse", "toolResult", "image", "document", "video",
                             "reasoningContent", "cachePoint", "guardContent", "citationsContent"})

#: Span event -> (its attribute, the span attribute it stands for).
_EVENT_MESSAGES = {
    GEN_AI_DETAILS_EVENT: [(key, key) for key in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
                                                   sc.GEN_AI_SYSTEM_INSTRUCTIONS)],
    GEN_AI_PROMPT_EVENT: [(GEN_AI_PROMPT, sc.GEN_AI_INPUT_MESSAGES)],
    GEN_AI_COMPLETION_EVENT: [(GEN_AI_COMPLETION, sc.GEN_AI_OUTPUT_MESSAGES)],
}


def model_call(span: Span) -> Attributes:
    """A model call's attributes with its record's other forms overlaid (see the module docstring)."""
    attrs = span.attributes
    found: dict[str, object] = {}
    if span.events:
        _event_messages(span, found)
    if LF_OBSERVATION_TYPE in attrs:
        _langfuse(attrs, found)
    if AI_OPERATION_ID in attrs:
        _ai_sdk_call(attrs, found)
    return {**found, **attrs} if found else attrs


def tool_call(span: Span) -> Attributes:
    """A tool span's attributes, with an AI SDK tool call's, and the arguments and result of the older
    events of one message each (Strands: ``gen_ai.tool.message`` with the arguments as ``content``, then
    ``gen_ai.choice`` with the result as ``message``), as the GenAI ones they stand for."""
    attrs = span.attributes
    found: dict[str, object] = {}
    if AI_TOOL_CALL_NAME in attrs:
        found.update((genai, attrs[key]) for key, genai in AI_TOOL_CALL_AS_GENAI if key in attrs)
    for event in span.events:
        if event.name == _TOOL_MESSAGE_EVENT and event.attributes.get(_EVENT_CONTENT) is not None:
            found.setdefault(sc.GEN_AI_TOOL_CALL_ARGUMENTS, event.attributes[_EVENT_CONTENT])
        elif event.name == GEN_AI_CHOICE_EVENT and event.attributes.get(_CHOICE_MESSAGE) is not None:
            found.setdefault(sc.GEN_AI_TOOL_CALL_RESULT, event.attributes[_CHOICE_MESSAGE])
    return {**found, **attrs} if found else attrs


def _event_messages(span: Span, found: dict[str, object]) -> None:
    sent: list[dict[str, object]] = []
    chosen: list[dict[str, object]] = []
    for event in span.events:
        for key, as_key in _EVENT_MESSAGES.get(event.name, ()):
            value = event.attributes.get(key)
            if value is not None:
                found.setdefault(as_key, value)
        role = _MESSAGE_EVENTS.get(event.name)
        if role is not None and event.attributes.get(_EVENT_CONTENT) is not None:
            sent.append({"role": role, "content": _blocks_as_parts(event.attributes[_EVENT_CONTENT])})
        elif event.name == GEN_AI_CHOICE_EVENT and event.attributes.get(_CHOICE_MESSAGE) is not None:
            reply = _blocks_as_parts(event.attributes[_CHOICE_MESSAGE])
            chosen.append({"role": "assistant", "content": reply})
    if sent:
        found.setdefault(sc.GEN_AI_INPUT_MESSAGES, _json_text(sent))
    if chosen:
        found.setdefault(sc.GEN_AI_OUTPUT_MESSAGES, _json_text(chosen))


def _blocks_as_parts(content: object) -> object:
    """A message's content given as a JSON list of Bedrock content blocks, as the content parts ``chat``
    reads (text; Anthropic's ``tool_use`` and ``tool_result``, which Bedrock's blocks mirror); any other
    content as it is."""
    if not (isinstance(content, str) and content.startswith("[{")):
        return content
    blocks = _json(content)
    if not isinstance(blocks, list) or not all(
        isinstance(b, dict) and len(b) == 1 and next(iter(b)) in _BEDROCK_BLOCKS for b in blocks
    ):
        return content
    parts: list[object] = []
    for block in blocks:
        ((kind, value),) = block.items()
        if kind == "text":
            parts.append({"type": "text", "text": value})
        elif kind == "toolUse" and isinstance(value, dict):
            parts.append({"type": "tool_use", "id": value.get("toolUseId"), "name": value.get("name"),
                          "input": value.get("input")})
        elif kind == "toolResult" and isinstance(value, dict):
            parts.append({"type": "tool_result", "tool_use_id": value.get("toolUseId"),
                          "content": value.get("content")})
    return parts


def _langfuse(attrs: Attributes, found: dict[str, object]) -> None:
    usage = _json(attrs.get(LF_USAGE_DETAILS))
    if isinstance(usage, dict):
        for key, name in _USAGE_DETAILS:
            if name in usage:
                found.setdefault(key, usage[name])
    for key, lf_key in ((sc.GEN_AI_INPUT_MESSAGES, LF_INPUT), (sc.GEN_AI_OUTPUT_MESSAGES, LF_OUTPUT)):
        if lf_key in attrs:
            found.setdefault(key, attrs[lf_key])


def _ai_sdk_call(attrs: Attributes, found: dict[str, object]) -> None:
    if AI_PROMPT_MESSAGES in attrs:
        found.setdefault(sc.GEN_AI_INPUT_MESSAGES, attrs[AI_PROMPT_MESSAGES])
    text = _first(attrs, AI_RESPONSE_TEXT)
    calls = _json(_first(attrs, AI_RESPONSE_TOOL_CALLS))
    # The reply as the AI SDK's own assistant message: a text part, then its tool-call parts (older releases
    # record the calls without a ``type``).
    parts: list[object] = [] if text is None else [{"type": "text", "text": text}]
    if isinstance(calls, list):
        parts += [{"type": "tool-call", **call} for call in calls if isinstance(call, dict)]
    if parts:
        found.setdefault(sc.GEN_AI_OUTPUT_MESSAGES, _json_text([{"role": "assistant", "content": parts}]))


def _json_text(messages: list[dict[str, object]]) -> str:
    # Attribute values may be of any type an exporter sends (bytes among them): written as their text.
    return json.dumps(messages, default=str)


def _first(attrs: Attributes, keys: tuple[str, ...]) -> object:
    for key in keys:
        if key in attrs:
            return attrs[key]
    return None


def _json(raw: object) -> object:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return None
