"""The SDK's content refs and capture, as this integration uses them (the one module to change if they move).

Content never goes on a span whole: a ``sha256:<hex>`` ref always, the (redacted, truncated) content itself
only when capture is on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
"""

from __future__ import annotations

from orchestrace.arguments import request_attributes
from orchestrace.config import CaptureConfig, get_config
from orchestrace.content import Captured, capture, content_ref
from orchestrace.messages import (
    Message,
    PromptRefs,
    capture_messages,
    genai_message,
    message_ref,
    messages_ref,
    prompt_refs,
)
from orchestrace.replies import Reply, normalize, reply_attributes

__all__ = [
    "CaptureConfig",
    "Captured",
    "Message",
    "PromptRefs",
    "Reply",
    "capture",
    "capture_messages",
    "content_ref",
    "genai_message",
    "get_config",
    "message_ref",
    "messages_ref",
    "normalize",
    "prompt_refs",
    "reply_attributes",
    "request_attributes",
]
