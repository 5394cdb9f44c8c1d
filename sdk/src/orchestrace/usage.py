"""Token usage and response details read from what a model call returned.

Shapes read: a dict or object with ``usage`` (OpenAI ``prompt_tokens``/``completion_tokens``, Anthropic
and OpenAI Responses ``input_tokens``/``output_tokens``), LangChain messages with ``usage_metadata``,
LangChain ``response_metadata["token_usage"]``, and a LangChain ``LLMResult.llm_output`` (``token_usage``).
The one usage reader of orchestrace: the SDK's model calls and every integration use it. Anything else
yields no usage (set it with ``ot.set_usage``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from orchestrace.fields import field_of


class Usage(NamedTuple):
    input_tokens: int | None
    output_tokens: int | None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _from_usage_block(block: Any) -> Usage | None:
    if block is None:
        return None
    input_tokens = _int(field_of(block, "input_tokens"))
    if input_tokens is None:
        input_tokens = _int(field_of(block, "prompt_tokens"))
    output_tokens = _int(field_of(block, "output_tokens"))
    if output_tokens is None:
        output_tokens = _int(field_of(block, "completion_tokens"))
    if input_tokens is None and output_tokens is None:
        return None
    return Usage(input_tokens, output_tokens)


def extract_usage(result: Any) -> Usage | None:
    """Token usage found in ``result``, or ``None``."""
    if result is None or isinstance(result, str | bytes | int | float):
        return None
    for key in ("usage_metadata", "usage", "token_usage"):
        usage = _from_usage_block(field_of(result, key))
        if usage is not None:
            return usage
    metadata = field_of(result, "response_metadata")
    if metadata is not None:
        return (_from_usage_block(field_of(metadata, "token_usage"))
                or _from_usage_block(field_of(metadata, "usage")))
    return None


def response_model(result: Any) -> str | None:
    """The model that answered, when the result names it (``model`` or ``response_metadata.model_name``)."""
    if result is None or isinstance(result, str | bytes | int | float):
        return None
    model = field_of(result, "model")
    if isinstance(model, str):
        return model
    metadata = field_of(result, "response_metadata")
    name = field_of(metadata, "model_name") if metadata is not None else None
    return name if isinstance(name, str) else None
