"""What a turn keeps of a model call besides its messages: the tools offered, the sampling parameters, the
response's id / model / finish reason, token ids and logprobs, the cached parts of the prompt's tokens, what
the size limit cut, and whether the reply stream was left before its end.

Read from the GenAI attributes (``gen_ai.tool.definitions``, ``gen_ai.request.*``, ``gen_ai.response.*``,
``gen_ai.usage.cache_*``, and the other vocabularies' cache counts) and
orchestrace's own (``orchestrace.request.*``, ``orchestrace.prompt.token_ids``, ``orchestrace.completion.*``,
``orchestrace.policy.version``,
``orchestrace.content.*_cut_bytes``), so any instrumentation that sets them gets them on its turns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

import orchestrace_semconv as sc
from orchestrace_semconv.tool_definitions import openai_tool

from ..spans import Attributes
from .chat import FINISH_REASON_KEYS, output_finish_reason
from .vocabularies import VOCABULARIES

#: The parts of the input tokens read from the prompt cache and written to it, by vocabulary.
CACHE_READ_INPUT_TOKENS: Final = tuple(key for v in VOCABULARIES for key in v.cache_read_tokens)
CACHE_WRITE_INPUT_TOKENS: Final = tuple(key for v in VOCABULARIES for key in v.cache_write_tokens)

#: Turn field -> attribute holding how many bytes were cut from it.
_CUTS: Final = (("prompt", sc.ORCH_INPUT_CUT_BYTES), ("completion", sc.ORCH_OUTPUT_CUT_BYTES))
_REQUEST_PREFIXES: Final = (sc.GEN_AI_REQUEST_PREFIX, sc.ORCH_REQUEST_PREFIX)
#: Every attribute ``details`` reads but the request's: most model calls have none of them.
_KEYS: Final = frozenset({
    sc.GEN_AI_TOOL_DEFINITIONS, sc.ORCH_INPUT_CUT_BYTES, sc.ORCH_OUTPUT_CUT_BYTES,
    sc.ORCH_PROMPT_TOKEN_IDS, sc.ORCH_COMPLETION_TOKEN_IDS, sc.ORCH_COMPLETION_LOGPROBS,
    sc.ORCH_POLICY_VERSION,
    sc.GEN_AI_RESPONSE_ID, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_RESPONSE_FINISH_REASONS, *FINISH_REASON_KEYS,
    *CACHE_READ_INPUT_TOKENS, *CACHE_WRITE_INPUT_TOKENS, sc.ORCH_COMPLETION_INCOMPLETE,
})
#: A bound method, called as it is: compiled, ``frozenset.isdisjoint`` is otherwise looked up on every call.
_none_of_the_keys: Final = _KEYS.isdisjoint


def details(attrs: Attributes) -> dict[str, Any] | None:
    """The turn's fields read here that the call has, in ``model.Turn``'s order (``None`` when none)."""
    params = request(attrs)
    if _none_of_the_keys(attrs):
        return {"request": params} if params is not None else None
    incomplete = attrs.get(sc.ORCH_COMPLETION_INCOMPLETE) is True
    found = {
        "tools": tools(attrs),
        "truncated": truncated(attrs),
        "prompt_token_ids": numbers(attrs, sc.ORCH_PROMPT_TOKEN_IDS, int),
        "completion_token_ids": numbers(attrs, sc.ORCH_COMPLETION_TOKEN_IDS, int),
        "completion_logprobs": numbers(attrs, sc.ORCH_COMPLETION_LOGPROBS, float),
        "request": params,
        "response_id": text(attrs, sc.GEN_AI_RESPONSE_ID),
        "response_model": text(attrs, sc.GEN_AI_RESPONSE_MODEL),
        "policy_version": text(attrs, sc.ORCH_POLICY_VERSION),
        # A cut reply's output message says "stop" (the GenAI shape needs a word): the model's own word only.
        "finish_reason": explicit_finish_reason(attrs) if incomplete else finish_reason(attrs),
        "cache_read_input_tokens": first_count(attrs, CACHE_READ_INPUT_TOKENS),
        "cache_creation_input_tokens": first_count(attrs, CACHE_WRITE_INPUT_TOKENS),
        "completion_incomplete": True if incomplete else None,
    }
    return {key: value for key, value in found.items() if value is not None} or None


#: The fields ``details`` returns, in ``model.Turn``'s order.
_ORDER: Final[tuple[str, ...]] = (
    "tools", "truncated", "prompt_token_ids", "completion_token_ids", "completion_logprobs", "request",
    "response_id", "response_model", "policy_version", "finish_reason", "cache_read_input_tokens",
    "cache_creation_input_tokens", "completion_incomplete",
)
#: What the engine returned beside the text, and the policy version that served it: a gateway recording
#: the same call inside the app's record of it (``orchestrace proxy``) saw them; the app's record often not.
_ENGINE_FIELDS: Final[tuple[str, ...]] = (
    "prompt_token_ids", "completion_token_ids", "completion_logprobs", "policy_version",
)


def with_token_ids(outer: dict[str, Any] | None, inner: dict[str, Any] | None) -> dict[str, Any] | None:
    """``outer`` (a turn's details) with the token ids, logprobs and policy version of ``inner`` (those of the
    same call recorded inside it), which win: they are the engine's own."""
    taken = {key: inner[key] for key in _ENGINE_FIELDS if inner and key in inner}
    if not taken:
        return outer
    merged = {**(outer or {}), **taken}
    return {key: merged[key] for key in _ORDER if key in merged}  # the written order, as ``details``'s


def tools(attrs: Attributes) -> list[dict[str, Any]] | None:
    raw = attrs.get(sc.GEN_AI_TOOL_DEFINITIONS)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if not isinstance(raw, list | tuple):
        return None
    found = [t for t in map(openai_tool, raw) if t is not None]
    return found or None


def truncated(attrs: Attributes) -> dict[str, int] | None:
    cuts = {name: int(attrs[key]) for name, key in _CUTS if _count(attrs.get(key))}
    return cuts or None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def count(attrs: Attributes, key: str) -> int | None:
    """A token count attribute (``None`` when absent or no count)."""
    value = attrs.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def first_count(attrs: Attributes, keys: Iterable[str]) -> int | None:
    """The count under the first of ``keys`` holding one."""
    for key in keys:
        value = count(attrs, key)
        if value is not None:
            return value
    return None


def numbers(attrs: Attributes, key: str, kind: type) -> list[Any] | None:
    """An int or float array attribute as a list (``None`` when absent or of another type)."""
    value = attrs.get(key)
    if not isinstance(value, list | tuple) or not value:
        return None
    if kind is float:
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        return [float(v) for v in value] if ok else None
    return list(value) if all(isinstance(v, int) and not isinstance(v, bool) for v in value) else None


def request(attrs: Attributes) -> dict[str, Any] | None:
    params: dict[str, Any] = {}
    for key in attrs:  # the keys only: most are no request parameter (no item tuple made for them)
        if not key.startswith(_REQUEST_PREFIXES) or key == sc.GEN_AI_REQUEST_MODEL:
            continue
        short = key[len(sc.GEN_AI_REQUEST_PREFIX if key.startswith(sc.GEN_AI_REQUEST_PREFIX)
                        else sc.ORCH_REQUEST_PREFIX):]
        value = attrs[key]
        params[short] = list(value) if isinstance(value, tuple) else value
    return params or None


def finish_reason(attrs: Attributes) -> str | None:
    return explicit_finish_reason(attrs) or output_finish_reason(attrs)


def explicit_finish_reason(attrs: Attributes) -> str | None:
    reasons = attrs.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
    if isinstance(reasons, list | tuple) and reasons:
        return str(reasons[0])
    if isinstance(reasons, str) and reasons:
        return reasons
    return None


def text(attrs: Attributes, key: str) -> str | None:
    value = attrs.get(key)
    return str(value) if value else None
