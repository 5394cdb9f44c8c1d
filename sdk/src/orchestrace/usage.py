"""Token usage and response details read from what a model call returned.

Shapes read: a dict or object with ``usage`` (OpenAI ``prompt_tokens``/``completion_tokens``, Anthropic
and OpenAI Responses ``input_tokens``/``output_tokens``), LangChain messages with ``usage_metadata``,
LangChain ``response_metadata["token_usage"]``, and a LangChain ``LLMResult.llm_output`` (``token_usage``).
The one usage reader of orchestrace: the SDK's model calls and every integration use it. Anything else
yields no usage (set it with ``ot.set_usage``).

Input tokens are the whole prompt for every provider, as the GenAI conventions count them: cached parts
included. OpenAI (``prompt_tokens_details.cached_tokens``, Responses ``input_tokens_details``), LiteLLM and
LangChain (``input_token_details``) count them so already; Anthropic's ``input_tokens`` is only the part
after the last cache breakpoint, so its ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are
added to it. The cached parts are kept beside (``Usage.cache_read_input_tokens``,
``Usage.cache_creation_input_tokens``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from orchestrace import semconv as sc
from orchestrace.fields import field_of


class Usage(NamedTuple):
    input_tokens: int | None  # the whole prompt, cached parts included
    output_tokens: int | None
    cache_read_input_tokens: int | None = None  # the part of input_tokens read from the prompt cache
    cache_creation_input_tokens: int | None = None  # the part of input_tokens written to it

    def updated(self, later: Usage) -> Usage:
        """This usage with every count ``later`` states (a stream's later event restates some counts)."""
        return Usage(*(new if new is not None else old for old, new in zip(self, later, strict=True)))


#: What holds no usage. Tuples rather than ``X | Y`` unions: a union is built anew at each call (reading a
#: reply's usage is on every model call's path).
_SCALARS = (str, bytes, int, float)
_NUMBERS = (int, float)


def _int(value: Any) -> int | None:
    if type(value) is int:  # the common case, answered without the checks below
        return value
    return int(value) if isinstance(value, _NUMBERS) and not isinstance(value, bool) else None


def usage_from_block(block: Any) -> Usage | None:
    """The usage a block states (``usage_metadata``, ``usage``, ``token_usage``: a dict or an object)."""
    if block is None:
        return None
    # A dict (LangChain's usage_metadata, JSON replies) is read with its own ``get``.
    read: Callable[[str], Any] = block.get if type(block) is dict else functools.partial(field_of, block)
    input_tokens = _int(read("input_tokens"))
    # Anthropic's names; LiteLLM puts them beside ``prompt_tokens``, which counts the whole prompt already.
    cache_read = read("cache_read_input_tokens")
    cache_creation = read("cache_creation_input_tokens")
    if cache_read is not None or cache_creation is not None:  # absent (the common case): nothing to convert
        cache_read, cache_creation = _int(cache_read), _int(cache_creation)
    if input_tokens is None:
        input_tokens = _int(read("prompt_tokens"))
        cached = _int(field_of(read("prompt_tokens_details"), "cached_tokens"))
        cache_read = cached if cached is not None else cache_read
    elif cache_read is not None or cache_creation is not None:  # Anthropic: input_tokens is the uncached rest
        input_tokens += (cache_read or 0) + (cache_creation or 0)
    else:
        responses = read("input_tokens_details")  # OpenAI Responses API
        langchain = read("input_token_details")  # LangChain's usage_metadata
        cache_read = _int(field_of(responses, "cached_tokens")) if responses is not None else None
        if langchain is not None:
            cache_read = _int(field_of(langchain, "cache_read"))
            cache_creation = _int(field_of(langchain, "cache_creation"))
    output_tokens = _int(read("output_tokens"))
    if output_tokens is None:
        output_tokens = _int(read("completion_tokens"))
    if input_tokens is None and output_tokens is None and cache_read is None and cache_creation is None:
        return None
    # tuple.__new__ directly: a NamedTuple's own __new__ is Python code.
    return tuple.__new__(Usage, (input_tokens, output_tokens, cache_read, cache_creation))


def usage_attributes(usage: Usage) -> dict[str, int]:
    """The span attributes of ``usage`` (its stated counts): the one place usage attributes are named. The
    cache-write count goes under the name of the GenAI conventions' version in use (``sc.gen_ai_names``)."""
    # Plain tests rather than a comprehension over (name, count) pairs: this runs at every model call.
    attributes: dict[str, int] = {}
    if usage.input_tokens is not None:
        attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = usage.input_tokens
    if usage.output_tokens is not None:
        attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.output_tokens
    if usage.cache_read_input_tokens is not None:
        attributes[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_input_tokens
    if usage.cache_creation_input_tokens is not None:
        attributes[sc.gen_ai_names().cache_write_input_tokens] = usage.cache_creation_input_tokens
    return attributes


def extract_usage(result: Any) -> Usage | None:
    """Token usage found in ``result``, or ``None``."""
    if result is None or isinstance(result, _SCALARS):
        return None
    for key in ("usage_metadata", "usage", "token_usage"):
        usage = usage_from_block(field_of(result, key))
        if usage is not None:
            return usage
    metadata = field_of(result, "response_metadata")
    if metadata is not None:
        return (usage_from_block(field_of(metadata, "token_usage"))
                or usage_from_block(field_of(metadata, "usage")))
    return None


def response_model(result: Any) -> str | None:
    """The model that answered, when the result names it (``model`` or ``response_metadata.model_name``)."""
    if result is None or isinstance(result, _SCALARS):
        return None
    model = field_of(result, "model")
    if isinstance(model, str):
        return model
    metadata = field_of(result, "response_metadata")
    name = field_of(metadata, "model_name") if metadata is not None else None
    return name if isinstance(name, str) else None
