"""The SDK's content refs and capture, as this integration uses them (the one module to change if they move).

Content never goes on a span whole: a ``sha256:<hex>`` ref always, the (redacted, truncated) content itself
only when capture is on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrace.config import CaptureConfig, get_config
from orchestrace.content import _CHUNK, Captured, capture, content_ref, json_ref
from orchestrace.messages import Message, capture_messages, message_json, to_message

__all__ = [
    "CaptureConfig",
    "Captured",
    "Message",
    "capture",
    "capture_messages",
    "content_ref",
    "genai_message",
    "get_config",
    "message_ref",
    "messages_ref",
]


def genai_message(message: Any) -> Message:
    """A LangChain message in the GenAI shape (role + parts), ids and provider metadata left out.

    A message's ref is the ref of this shape, so the collector can recompute it from captured messages;
    convert each message once and take refs before ``capture_messages``, which clips the texts in place."""
    return to_message(message) or {"role": "user", "parts": []}


def message_ref(message: Any) -> str:
    """``content_ref(genai_message(message))``; a plain text message is not converted to get it."""
    text = message_json(message)
    return json_ref(text) if text is not None else content_ref(genai_message(message))


def messages_ref(messages: Sequence[Any]) -> str:
    """``content_ref([genai_message(m) for m in messages])``, from the messages' JSON when every one is plain
    text and all of them are small enough to hash in one piece (``content_ref`` streams larger values)."""
    texts: list[str] = []
    size = 0
    for message in messages:
        text = message_json(message)
        if text is None or size + len(text) > _CHUNK:
            return content_ref([genai_message(m) for m in messages])
        texts.append(text)
        size += len(text)
    return json_ref(f"[{','.join(texts)}]")
