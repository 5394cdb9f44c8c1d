"""Chat-message lists (``[{"role", "content", ...}]``) from the shapes instrumentations record model calls in.

- GenAI semantic conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON, each message
  ``{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", ...}, ...]}``, plus
  ``gen_ai.system_instructions``.
- Plain ``{"role", "content", "tool_calls", "tool_call_id", "name"}`` lists (content a string or a list of
  ``{"type": "text", "text"}`` parts; OpenAI or LangChain tool calls).
- Messages flattened into attributes, as the vocabularies declare them (``flat_messages``: OpenInference's
  ``llm.input_messages.<i>.message.role``, the older GenAI ``gen_ai.prompt.<i>.role``, ...).

A message is ``{"role", "content"}`` (text parts joined; a tool result's output is its text; GenAI
``reasoning`` parts go to ``reasoning_content``), plus
``tool_calls`` (``[{"id", "type": "function", "function": {"name", "arguments"}}]``, the shape Hugging Face
chat templates read) on an assistant message that requested tools, and ``tool_call_id`` / ``name`` on a tool
message when recorded.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orchestrace_semconv as sc

from ..spans import Attributes
from .vocabularies import VOCABULARIES
from .vocabularies.base import FlatMessages, ToolParts

ChatMessage = dict[str, Any]

_FLAT_SHAPES: Final = tuple(v.flat_messages for v in VOCABULARIES if v.flat_messages is not None)
#: Whether a span has any flattened message at all (checked first: most spans have none).
_FLAT_FIRST_KEYS: Final = frozenset(
    prefix + "0" + suffix
    for shape in _FLAT_SHAPES
    for prefix in (shape.input_prefix, shape.output_prefix)
    for suffix in (shape.role, shape.content)
)
#: Whether a span has no message at all, flattened or structured (most spans: content was not captured). A
#: bound method, called as it is: compiled, ``frozenset.isdisjoint`` is otherwise looked up on every call.
_without_messages: Final = frozenset(
    {sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, *_FLAT_FIRST_KEYS}).isdisjoint


def prompt_and_completion(attrs: Attributes) -> tuple[list[ChatMessage] | None, list[ChatMessage] | None]:
    if _without_messages(attrs):
        return None, None  # content was not captured (the common case)
    prompt = _structured(attrs.get(sc.GEN_AI_INPUT_MESSAGES))
    completion = _structured(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES))
    if prompt is not None:
        system = _structured_parts(attrs.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS))[0]
        if system:
            prompt.insert(0, {"role": "system", "content": system})
    if (prompt is None or completion is None) and not _FLAT_FIRST_KEYS.isdisjoint(attrs):
        for shape in _FLAT_SHAPES:
            if prompt is None:
                prompt = _flattened(attrs, shape, shape.input_prefix)
            if completion is None:
                completion = _flattened(attrs, shape, shape.output_prefix)
    return prompt, completion


def _loads(raw: object) -> object:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return None
    return raw


def _structured(raw: object) -> list[ChatMessage] | None:
    data = _loads(raw)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list | tuple):
        return None
    messages: list[ChatMessage] = []
    for item in data:
        item = _loads(item)
        if not isinstance(item, dict):
            continue
        message: ChatMessage = {"role": str(item.get("role") or "user")}
        if "parts" in item:
            item = _answers_apart(item, message["role"], messages)
            if item is None:
                continue
            message["content"], calls, call_id = _structured_parts(item["parts"])
            reasoning = _reasoning_parts(item["parts"])
            if reasoning:
                message["reasoning_content"] = reasoning
        else:
            content = item.get("content")
            calls = [c for c in map(_plain_tool_call, item.get("tool_calls") or ()) if c is not None]
            call_id = item.get("tool_call_id")
            if isinstance(content, list) and any(_part_kind(part) in _CALL_OR_RESULT for part in content):
                content = _call_and_result_parts(content, message, calls, messages)
                if content is None:
                    continue
                call_id = call_id or message.pop("tool_call_id", None)
            message["content"] = message.get("content") or _text_of(content)
            if item.get("name") and message["role"] == "tool":
                message["name"] = str(item["name"])
            if isinstance(item.get("reasoning_content"), str) and item["reasoning_content"]:
                message["reasoning_content"] = item["reasoning_content"]
        _add_calls(message, calls, call_id)
        messages.append(message)
    return messages or None


def _answers_apart(item: dict[str, object], role: str,
                   messages: list[ChatMessage]) -> dict[str, object] | None:
    """A GenAI message holding tool answers under another role, or several of them (PydanticAI sends the
    answers to a turn's tool calls, and any retry prompt, as one ``user`` message): one ``tool`` message per
    answer goes to ``messages``, as chat templates expect; returns what is left of the message (``None``:
    nothing)."""
    parts = _loads(item["parts"])
    if not isinstance(parts, list | tuple):
        return item
    answers = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call_response"]
    if not answers or (role == "tool" and len(answers) == 1):
        return item
    for answer in answers:
        text = _text_of(answer.get("response", answer.get("result")))
        tool: ChatMessage = {"role": "tool", "content": text}
        _add_calls(tool, [], answer.get("id"))
        if answer.get("name"):
            tool["name"] = str(answer["name"])
        messages.append(tool)
    rest = [p for p in parts if not (isinstance(p, dict) and p.get("type") == "tool_call_response")]
    return {**item, "parts": rest} if rest else None


#: Content parts of plain messages that call tools or answer them, by part type (each vocabulary's
#: ``tool_parts``).
_CALL_PARTS: Final = {p.call: p for p in (v.tool_parts for v in VOCABULARIES) if p is not None}
_RESULT_PARTS: Final = {p.result: p for p in (v.tool_parts for v in VOCABULARIES) if p is not None}
_CALL_OR_RESULT: Final = frozenset(_CALL_PARTS) | frozenset(_RESULT_PARTS)


def _call_and_result_parts(content: list[Any], message: ChatMessage, calls: list[ChatMessage],
                           messages: list[ChatMessage]) -> list[Any] | None:
    """Reads a plain message's tool-call parts into ``calls`` and its tool-result parts: a ``tool`` message's
    one answer is the message's content (and ``tool_call_id`` / ``name``); any other answers become ``tool``
    messages of their own in ``messages``, as chat templates expect (Anthropic sends them in a ``user``
    message). Returns the parts left for the message's text, ``None`` when nothing is left of it."""
    rest: list[Any] = []
    answers: list[tuple[dict[str, Any], ToolParts]] = []
    for part in content:
        kind = _part_kind(part)
        shape = _CALL_PARTS.get(kind)
        if shape is not None:
            name = part.get(shape.call_name)
            if name:
                arguments = _first_present(part, shape.call_arguments)
                calls.append(_tool_call(part.get(shape.call_id), name, arguments))
        elif kind in _RESULT_PARTS:
            answers.append((part, _RESULT_PARTS[kind]))
        else:
            rest.append(part)
    if message["role"] == "tool" and len(answers) == 1 and not rest:
        _answer(message, *answers[0])
        return rest
    for answer in answers:
        tool: ChatMessage = {"role": "tool"}
        _answer(tool, *answer)
        messages.append(tool)
    return rest if rest or calls or not answers else None


def _part_kind(part: object) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    return kind if isinstance(kind, str) else ""


def _answer(message: ChatMessage, part: dict[str, Any], shape: ToolParts) -> None:
    output = _first_present(part, shape.result_output)
    if shape.output_value is not None and isinstance(output, dict) and shape.output_value in output:
        output = output[shape.output_value]
    message["content"] = _text_of(output)
    call_id = part.get(shape.result_id)
    if call_id:
        message["tool_call_id"] = str(call_id)
    if shape.result_name is not None and part.get(shape.result_name):
        message["name"] = str(part[shape.result_name])


def _first_present(part: dict[str, Any], keys: tuple[str, ...]) -> object:
    for key in keys:
        if key in part:
            return part[key]
    return None


def _structured_parts(raw: object) -> tuple[str, list[ChatMessage], object]:
    """(text, tool calls, id of the tool call answered) of GenAI message parts."""
    parts = _loads(raw)
    if isinstance(parts, str):
        return parts, [], None
    if not isinstance(parts, list | tuple):
        return "", [], None
    texts = []
    calls = []
    call_id = None
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(_text_of(part.get("content", part.get("text"))))
        elif kind == "tool_call_response":
            texts.append(_text_of(part.get("response", part.get("result"))))
            call_id = call_id or part.get("id")
        elif kind == "tool_call" and part.get("name"):
            calls.append(_tool_call(part.get("id"), part["name"], part.get("arguments")))
    return "".join(texts), calls, call_id


def _reasoning_parts(raw: object) -> str:
    """The text of GenAI ``reasoning`` parts (kept apart from the answer's text)."""
    parts = _loads(raw)
    if not isinstance(parts, list | tuple):
        return ""
    return "".join(_text_of(part.get("content")) for part in parts
                   if isinstance(part, dict) and part.get("type") == "reasoning")


#: The first output message's finish reason in the flattened shapes that record one.
_FLAT_FINISH_REASONS: Final = tuple(
    shape.output_prefix + "0" + shape.finish_reason for shape in _FLAT_SHAPES if shape.finish_reason
)
#: What ``output_finish_reason`` reads.
FINISH_REASON_KEYS: Final = (sc.GEN_AI_OUTPUT_MESSAGES, *_FLAT_FINISH_REASONS)


def output_finish_reason(attrs: Attributes) -> str | None:
    """The finish reason the first output message states (GenAI ``finish_reason``, else a flattened shape's):
    for spans without ``gen_ai.response.finish_reasons``."""
    data = _loads(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES))
    first = data[0] if isinstance(data, list) and data else data
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    if not reason:
        for key in _FLAT_FINISH_REASONS:
            reason = attrs.get(key)
            if reason:
                break
    return str(reason) if reason else None


def _tool_call(call_id: object, name: object, arguments: object) -> ChatMessage:
    function = {"name": str(name), "arguments": _arguments(arguments)}
    call: ChatMessage = {"type": "function", "function": function}
    if call_id:
        call["id"] = str(call_id)
    return call


def _plain_tool_call(raw: object) -> ChatMessage | None:
    """An OpenAI (``{"id", "function": {"name", "arguments"}}``) or LangChain (``{"id", "name", "args"}``)
    tool call."""
    if not isinstance(raw, dict):
        return None
    function = raw.get("function")
    if isinstance(function, dict) and function.get("name"):
        return _tool_call(raw.get("id"), function["name"], function.get("arguments"))
    if raw.get("name"):
        return _tool_call(raw.get("id"), raw["name"], raw.get("args", raw.get("arguments")))
    return None


def _arguments(raw: object) -> dict[str, Any] | str:
    """A JSON object when the arguments are (or parse as) one, else their text."""
    parsed = _loads(raw)
    if isinstance(parsed, dict):
        return parsed
    return "" if raw is None else raw if isinstance(raw, str) else json.dumps(raw, default=str)


def _add_calls(message: ChatMessage, calls: list[ChatMessage], call_id: object) -> None:
    if calls:
        message["tool_calls"] = calls
    if call_id:
        message["tool_call_id"] = str(call_id)


def _text_of(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text":
                out.append(_text_of(part.get("text", part.get("content"))))
        return "".join(out)
    return json.dumps(content, ensure_ascii=False, default=str)


def _flattened(attrs: Attributes, shape: FlatMessages, prefix: str) -> list[ChatMessage] | None:
    if prefix + "0" + shape.role not in attrs and prefix + "0" + shape.content not in attrs:
        return None
    messages = []
    i = 0
    while True:
        base = f"{prefix}{i}"
        role = attrs.get(base + shape.role)
        content = attrs.get(base + shape.content)
        calls = _flat_calls(attrs, shape, base)
        if role is None and content is None and not calls:
            break
        message: ChatMessage = {"role": str(role or "user"), "content": _text_of(content)}
        name = attrs.get(base + shape.name) if shape.name else None
        if name and message["role"] == "tool":
            message["name"] = str(name)
        _add_calls(message, calls, attrs.get(base + shape.tool_call_id))
        messages.append(message)
        i += 1
    return messages


def _flat_calls(attrs: Attributes, shape: FlatMessages, message: str) -> list[ChatMessage]:
    calls: list[ChatMessage] = []
    j = 0
    while True:
        base = f"{message}{shape.tool_calls}{j}"
        name = attrs.get(base + shape.call_name)
        if not name:
            return calls
        calls.append(_tool_call(attrs.get(base + shape.call_id), name, attrs.get(base + shape.call_args)))
        j += 1
