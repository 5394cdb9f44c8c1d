"""The SDK's content refs and capture, as this integration uses them (the one module to change if they move).

Content never goes on a span whole: a ``sha256:<hex>`` ref always, the (redacted, truncated) content itself
only when capture is on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
"""

from __future__ import annotations

from typing import Any

from orchestrace.config import CaptureConfig, get_config
from orchestrace.content import Captured, capture, content_ref
from orchestrace.messages import Message, capture_messages, to_message

__all__ = [
    "CaptureConfig",
    "Captured",
    "Message",
    "capture",
    "capture_messages",
    "content_ref",
    "genai_message",
    "get_config",
]


def genai_message(message: Any) -> Message:
    """A LangChain message in the GenAI shape (role + parts), ids and provider metadata left out.

    A message's ref is the ref of this shape, so the collector can recompute it from captured messages;
    convert each message once and take refs before ``capture_messages``, which clips the texts in place."""
    return to_message(message) or {"role": "user", "parts": []}


