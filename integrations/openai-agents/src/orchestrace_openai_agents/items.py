"""The OpenAI Responses API's input items (what the Agents SDK sends a model) as chat messages.

``{"role", "content"}`` messages keep their role; content parts (``input_text``, ``output_text``,
``refusal``) become text; ``function_call`` items become the ``tool_calls`` of an assistant message (joined
to the assistant message just before them, as Chat Completions has it); ``function_call_output`` items become
``tool`` messages. Other items (reasoning, hosted tool calls) carry no chat message and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Message = dict[str, Any]

_TEXT_PARTS = {"input_text": "text", "output_text": "text", "text": "text", "refusal": "refusal"}


def _plain(item: Any) -> Any:
    """A pydantic item (the Agents SDK passes both) as its dict."""
    dump = getattr(item, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else item


def _content(content: Any) -> Any:
    """Text when every part is text, else the parts (images and files as given)."""
    if not isinstance(content, list):
        return content
    texts: list[str] = []
    for part in map(_plain, content):
        key = _TEXT_PARTS.get(str(part.get("type"))) if isinstance(part, Mapping) else None
        if key is None or not isinstance(part.get(key), str):
            return [_plain(p) for p in content]
        texts.append(part[key])
    return "".join(texts)


def chat_messages(items: str | Iterable[Any] | None) -> list[Message]:
    """Chat messages (OpenAI shape) of a model call's input."""
    if items is None:
        return []
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[Message] = []
    calls_to: Message | None = None  # the assistant message the next function_call items join
    for item in map(_plain, items):
        if not isinstance(item, Mapping):
            calls_to = None
            continue
        kind = item.get("type")
        if kind == "function_call":
            if calls_to is None:
                calls_to = {"role": "assistant", "content": ""}
                messages.append(calls_to)
            calls_to.setdefault("tool_calls", []).append({
                "id": item.get("call_id"), "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            })
            continue
        calls_to = None
        if kind == "function_call_output":
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": output if isinstance(output, str) else _content(output)})
        elif "role" in item and kind in (None, "message"):
            message: Message = {"role": item["role"], "content": _content(item.get("content"))}
            messages.append(message)
            if item["role"] == "assistant":
                calls_to = message
    return messages
