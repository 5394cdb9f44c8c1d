"""Vercel's AI SDK (JavaScript): ``ai.*`` spans, named after ``ai.operationId``. An ``ai.toolCall`` span is a
tool; an ``ai.generateText`` / ``ai.streamText`` call (a model run in a loop with tools) is an agent when the
caller names it (``ai.telemetry.functionId``). Its provider calls (``ai.generateText.doGenerate``, ...) also
carry the GenAI model and usage (model-like, see ``genai``); their prompt (``ai.prompt.messages``) and reply
(its text and tool calls, as one assistant message) and a tool call's id, arguments and result are read as the
GenAI attributes they stand for, and its messages' tool-call and tool-result parts as calls and answers.
"""

from __future__ import annotations

from typing import Final

import orchestrace_semconv as sc

from ...spans import Span
from .base import AGENT, ContentParts, Kind, ToolParts, Verdict, Vocabulary, json_value
from .genai import json_text

AI_OPERATION_ID: Final = "ai.operationId"
AI_FUNCTION_ID: Final = "ai.telemetry.functionId"
AI_AGENT_OPERATIONS: Final = frozenset({"ai.generateText", "ai.streamText"})
AI_TOOL_CALL: Final = "ai.toolCall"
AI_TOOL_CALL_NAME: Final = "ai.toolCall.name"
#: A tool call's attribute -> the GenAI attribute it stands for.
AI_TOOL_CALL_AS_GENAI: Final = (
    ("ai.toolCall.id", sc.GEN_AI_TOOL_CALL_ID),
    ("ai.toolCall.args", sc.GEN_AI_TOOL_CALL_ARGUMENTS),
    ("ai.toolCall.result", sc.GEN_AI_TOOL_CALL_RESULT),
)
#: A provider call's prompt (a JSON message list), reply text and tool calls (older: ``ai.result.*``).
AI_PROMPT_MESSAGES: Final = "ai.prompt.messages"
AI_RESPONSE_TEXT: Final = ("ai.response.text", "ai.result.text")
AI_RESPONSE_TOOL_CALLS: Final = ("ai.response.toolCalls", "ai.result.toolCalls")


_OPERATIONS: dict[str, Verdict] = {AI_TOOL_CALL: (Kind.TOOL, "")}


def _kind(span: Span, parent: Span | None) -> Verdict | None:
    """A model run in a loop with tools that the caller named: an agent (its table said nothing)."""
    attrs = span.attributes
    op = attrs.get(AI_OPERATION_ID)
    if isinstance(op, str) and op in AI_AGENT_OPERATIONS and attrs.get(AI_FUNCTION_ID):
        return Kind.ACTOR, AGENT
    return None


def _model_call(span: Span, found: dict[str, object], content_parts: ContentParts) -> None:
    attrs = span.attributes
    if AI_OPERATION_ID not in attrs:
        return
    if AI_PROMPT_MESSAGES in attrs:
        found.setdefault(sc.GEN_AI_INPUT_MESSAGES, attrs[AI_PROMPT_MESSAGES])
    text = _first(attrs, AI_RESPONSE_TEXT)
    calls = json_value(_first(attrs, AI_RESPONSE_TOOL_CALLS))
    # The reply as the AI SDK's own assistant message: a text part, then its tool-call parts (older releases
    # record the calls without a ``type``).
    parts: list[object] = [] if text is None else [{"type": "text", "text": text}]
    if isinstance(calls, list):
        parts += [{"type": "tool-call", **call} for call in calls if isinstance(call, dict)]
    if parts:
        found.setdefault(sc.GEN_AI_OUTPUT_MESSAGES, json_text([{"role": "assistant", "content": parts}]))


def _tool_call(span: Span, found: dict[str, object], content_parts: ContentParts) -> None:
    attrs = span.attributes
    if AI_TOOL_CALL_NAME in attrs:
        found.update((genai, attrs[key]) for key, genai in AI_TOOL_CALL_AS_GENAI if key in attrs)


def _first(attrs: dict[str, object], keys: tuple[str, ...]) -> object:
    for key in keys:
        if key in attrs:
            return attrs[key]
    return None


VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="vercel_ai",
    kind_tables=((AI_OPERATION_ID, _OPERATIONS),),
    kind=_kind,
    kind_keys=(AI_OPERATION_ID,),
    agent_names=(AI_FUNCTION_ID,),
    tool_names=(AI_TOOL_CALL_NAME,),
    # Its messages' tool calls (``toolCallId`` / ``toolName`` / ``input``, older ``args``) and results
    # (``output`` as ``{"type": "text" | "json", "value"}``, older ``result``).
    tool_parts=ToolParts("tool-call", "toolCallId", "toolName", ("input", "args"),
                         "tool-result", "toolCallId", "toolName", ("output", "result"), "value"),
    model_call=_model_call,
    other_forms=(AI_OPERATION_ID, AI_TOOL_CALL_NAME),
    tool_call=_tool_call,
)
