"""The SDK's content refs as this integration uses them (the one module to change if they move).

Content never goes on a span whole: a ``sha256:<hex>`` ref always, the (redacted, truncated) content itself
only when the capture settings of the instrumentor's telemetry allow (the SDK decides that). Chat prompts are
referred to by the refs of their messages' GenAI form (``message_ref`` / ``messages_ref`` / ``prompt_refs``),
which the collector recomputes from captured messages.
"""

from __future__ import annotations

from orchestrace.instrumentation import content_ref, genai_message, message_ref, messages_ref, prompt_refs

__all__ = ["content_ref", "genai_message", "message_ref", "messages_ref", "prompt_refs"]
