"""Content refs and captured content: the one place that talks to the SDK's content and capture settings.

Content never goes on a span whole: a ``sha256:<hex>`` ref always, the (redacted, truncated) content itself
only when capture is on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from orchestrace.config import CaptureConfig, get_config

__all__ = ["CaptureConfig", "capture", "content_ref", "genai_messages", "jsonable", "message_dict", "text"]


def capture() -> CaptureConfig:
    return get_config()


def jsonable(obj: Any) -> Any:
    """A JSON-able view of ``obj`` (LangChain messages as role/content dicts, anything unknown as ``str``)."""
    if isinstance(obj, BaseMessage):
        return message_dict(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if hasattr(obj, "model_dump"):
        try:
            return jsonable(obj.model_dump())
        except Exception:  # a model that cannot dump itself is hashed by its text
            return str(obj)
    return str(obj)


def content_ref(obj: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``obj``."""
    data = json.dumps(jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}


def message_dict(msg: BaseMessage) -> dict[str, Any]:
    """The parts of a message that make it what it is (ids and provider metadata left out)."""
    out: dict[str, Any] = {"role": _ROLES.get(msg.type, msg.type), "content": msg.content}
    tool_calls = getattr(msg, "tool_calls", None)
    if tool_calls:
        out["tool_calls"] = [{"id": c.get("id"), "name": c["name"], "args": c["args"]} for c in tool_calls]
    if isinstance(msg, ToolMessage):
        out["tool_call_id"] = msg.tool_call_id
    if msg.name:
        out["name"] = msg.name
    return out


class _Budget:
    """Cuts captured text to the configured size, across all the pieces of one attribute."""

    def __init__(self, config: CaptureConfig) -> None:
        self.left = config.max_content_bytes
        self.redact = config.redact
        self.truncated = False

    def cut(self, value: str) -> str:
        if self.redact is not None:
            value = self.redact(value)
        data = value.encode("utf-8")
        if len(data) > self.left:
            self.truncated = True
            value = data[: self.left].decode("utf-8", errors="ignore")
        self.left -= min(len(data), self.left)
        return value


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(jsonable(value), ensure_ascii=False, default=str)


def text(value: Any, config: CaptureConfig) -> tuple[str, bool]:
    """Captured text of one value and whether it was truncated."""
    budget = _Budget(config)
    return budget.cut(_as_text(value)), budget.truncated


def genai_messages(messages: Sequence[BaseMessage], config: CaptureConfig) -> tuple[str, bool]:
    """Messages in the GenAI semantic-conventions JSON shape (role + parts), cut to the size limit."""
    budget = _Budget(config)
    out: list[dict[str, Any]] = []
    for msg in messages:
        d = message_dict(msg)
        parts: list[dict[str, Any]] = []
        if isinstance(msg, ToolMessage):
            parts.append({"type": "tool_call_response", "id": msg.tool_call_id,
                          "response": budget.cut(_as_text(msg.content))})
        elif msg.content:
            parts.append({"type": "text", "content": budget.cut(_as_text(msg.content))})
        for call in d.get("tool_calls", ()):
            parts.append({"type": "tool_call", "id": call["id"], "name": call["name"],
                          "arguments": budget.cut(_as_text(call["args"]))})
        entry: dict[str, Any] = {"role": d["role"], "parts": parts}
        if msg.name:
            entry["name"] = msg.name
        out.append(entry)
    return json.dumps(out, ensure_ascii=False), budget.truncated
