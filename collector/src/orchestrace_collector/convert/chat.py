"""Chat-message lists (``[{"role", "content"}]``) from the shapes instrumentations record model calls in.

- GenAI semantic conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON, each message
  ``{"role", "parts": [{"type": "text", "content"}, ...]}``, plus ``gen_ai.system_instructions``.
- Plain ``{"role", "content"}`` lists (content a string or a list of ``{"type": "text", "text"}`` parts).
- OpenInference flattened ``llm.input_messages.<i>.message.role`` / ``.content``.
- OpenLLMetry (older) flattened ``gen_ai.prompt.<i>.role`` / ``.content`` and ``gen_ai.completion.<i>.*``.

Only text is kept (the training format has string contents); tool results count as text, tool-call requests do
not.
"""

from __future__ import annotations

import json

from orchestrace import semconv as sc

from ..spans import Attributes
from .vocabularies import (
    GEN_AI_COMPLETION_PREFIX,
    GEN_AI_PROMPT_PREFIX,
    OI_CONTENT,
    OI_INPUT_MESSAGES,
    OI_OUTPUT_MESSAGES,
    OI_ROLE,
)

ChatMessage = dict[str, str]

_FLAT_SHAPES = (
    (OI_INPUT_MESSAGES, OI_ROLE, OI_CONTENT, OI_OUTPUT_MESSAGES),
    (GEN_AI_PROMPT_PREFIX, ".role", ".content", GEN_AI_COMPLETION_PREFIX),
)
#: Whether a span has any flattened message at all (checked first: most spans have none).
_FLAT_FIRST_KEYS = tuple(
    prefix + "0" + suffix
    for in_prefix, role, content, out_prefix in _FLAT_SHAPES
    for prefix in (in_prefix, out_prefix)
    for suffix in (role, content)
)


def prompt_and_completion(attrs: Attributes) -> tuple[list[ChatMessage] | None, list[ChatMessage] | None]:
    has_structured = sc.GEN_AI_INPUT_MESSAGES in attrs or sc.GEN_AI_OUTPUT_MESSAGES in attrs
    if not has_structured and not any(key in attrs for key in _FLAT_FIRST_KEYS):
        return None, None  # content was not captured (the common case)
    prompt = _structured(attrs.get(sc.GEN_AI_INPUT_MESSAGES))
    completion = _structured(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES))
    if prompt is not None:
        system = _structured_parts(attrs.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS))
        if system:
            prompt.insert(0, {"role": "system", "content": system})
    if (prompt is None or completion is None) and any(key in attrs for key in _FLAT_FIRST_KEYS):
        for in_prefix, role_suffix, content_suffix, out_prefix in _FLAT_SHAPES:
            if prompt is None:
                prompt = _flattened(attrs, in_prefix, role_suffix, content_suffix)
            if completion is None:
                completion = _flattened(attrs, out_prefix, role_suffix, content_suffix)
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
    messages = []
    for item in data:
        item = _loads(item)
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        content = _structured_parts(item["parts"]) if "parts" in item else _text_of(item.get("content"))
        messages.append({"role": str(role or "user"), "content": content})
    return messages or None


def _structured_parts(raw: object) -> str:
    parts = _loads(raw)
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list | tuple):
        return ""
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(_text_of(part.get("content", part.get("text"))))
        elif kind == "tool_call_response":
            texts.append(_text_of(part.get("response", part.get("result"))))
    return "".join(texts)


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


def _flattened(
    attrs: Attributes, prefix: str, role_suffix: str, content_suffix: str
) -> list[ChatMessage] | None:
    if prefix + "0" + role_suffix not in attrs and prefix + "0" + content_suffix not in attrs:
        return None
    messages = []
    i = 0
    while True:
        role = attrs.get(f"{prefix}{i}{role_suffix}")
        content = attrs.get(f"{prefix}{i}{content_suffix}")
        if role is None and content is None:
            break
        messages.append({"role": str(role or "user"), "content": _text_of(content)})
        i += 1
    return messages
