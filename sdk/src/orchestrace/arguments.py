"""The arguments of a decorated call, bound by the function's signature.

``@ot.llm``: the messages, the sampling parameters (span attributes under their GenAI names) and the tools
offered. ``@ot.tool``: the arguments by parameter name (:class:`ToolArguments`).

The messages are the argument named by the decorator (``@ot.llm(messages="history")``), else the one named
``messages``, ``prompt``, ``input`` or ``contents``, else the first positional one. Any other argument that is
a known sampling parameter, directly or inside ``extra_body`` (how OpenAI-compatible servers take extra
ones), becomes ``gen_ai.request.<name>`` (or ``orchestrace.request.<name>`` when GenAI has no name for it).
Other arguments (clients, API keys, callbacks) are never recorded.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrace import semconv as sc
from orchestrace.content import call_input
from orchestrace.tool_definitions import tool_definitions

MESSAGE_PARAMETERS = ("messages", "prompt", "input", "contents")
TOOL_PARAMETERS = ("tools", "functions")

_GENAI_REQUEST = {
    "temperature": sc.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": sc.GEN_AI_REQUEST_TOP_P,
    "top_k": sc.GEN_AI_REQUEST_TOP_K,
    "max_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "max_output_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "max_new_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "seed": sc.GEN_AI_REQUEST_SEED,
    "stop": sc.GEN_AI_REQUEST_STOP_SEQUENCES,
    "stop_sequences": sc.GEN_AI_REQUEST_STOP_SEQUENCES,
    "frequency_penalty": sc.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": sc.GEN_AI_REQUEST_PRESENCE_PENALTY,
    "n": sc.GEN_AI_REQUEST_CHOICE_COUNT,
}
_OTHER_REQUEST = frozenset({"repetition_penalty", "min_p", "min_tokens", "reasoning_effort", "logprobs",
                            "top_logprobs", "return_token_ids", "thinking_budget", "parallel_tool_calls"})


#: Tuples rather than ``X | Y`` unions, which are built anew at each call (every model call's path).
_SCALARS = (bool, int, float, str)
_SEQUENCES = (list, tuple)


def _attribute_value(value: Any) -> Any:
    """``value`` as an attribute value (a scalar or a list of strings), else ``None``."""
    if value is None:
        return None
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, _SEQUENCES) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _request_attribute(attributes: dict[str, Any], name: str, value: Any) -> None:
    key = _GENAI_REQUEST.get(name) or (sc.ORCH_REQUEST_PREFIX + name if name in _OTHER_REQUEST else None)
    if key is None:
        return
    if key == sc.GEN_AI_REQUEST_STOP_SEQUENCES and isinstance(value, str):
        value = [value]
    value = _attribute_value(value)
    if value is not None:
        attributes[key] = value


class CallArguments:
    """Reads one decorated function's calls; built once, from its signature."""

    __slots__ = ("messages", "positional")

    def __init__(self, func: Callable[..., Any] | None, messages: str | None = None) -> None:
        try:
            parameters = list(inspect.signature(func).parameters.values()) if func is not None else []
        except (TypeError, ValueError):  # builtins and the like
            parameters = []
        if parameters and parameters[0].name in ("self", "cls"):
            parameters = parameters[1:]  # a method's calls come without it (wrapt binds it)
        self.positional = [p.name for p in parameters
                           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in parameters]
        found = [m for m in MESSAGE_PARAMETERS if m in names]
        #: Where the messages are; ``None``: a candidate name among keyword arguments, else the first one.
        self.messages = messages or (found[0] if found else self.positional[0] if self.positional else None)

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(the messages, the other arguments by name)."""
        bound = dict(zip(self.positional, args, strict=False))
        bound.update(kwargs)
        for name in (self.messages, *MESSAGE_PARAMETERS):
            if name is not None and name in bound:
                return bound.pop(name), bound
        if args:
            return args[0], bound
        return call_input(args, kwargs), bound


def request_attributes(arguments: Mapping[str, Any], capture_content: bool) -> dict[str, Any]:
    """Span attributes for a call's arguments other than its messages: sampling parameters, and with
    content capture the tool definitions (JSON)."""
    attributes: dict[str, Any] = {}
    for name, value in arguments.items():
        if name == "extra_body" and isinstance(value, Mapping):
            for inner, inner_value in value.items():
                _request_attribute(attributes, str(inner), inner_value)
        elif name in TOOL_PARAMETERS:
            if capture_content:
                definitions = tool_definitions(value)
                if definitions:
                    attributes[sc.GEN_AI_TOOL_DEFINITIONS] = json.dumps(definitions, ensure_ascii=False,
                                                                        default=str)
        else:
            _request_attribute(attributes, name, value)
    return attributes


class ToolArguments:
    """A tool call's arguments by the function's signature: ``{parameter: value}``, the same however the call
    was written (``add(2, 1)``, ``add(2, b=1)``, ``add(a=2, b=1)`` and, when ``b`` defaults to 1, ``add(2)``
    are all ``{"a": 2, "b": 1}``): defaults are filled in, so a call is recorded as the function ran it.
    ``*args`` is a list under its name, ``**kwargs`` are merged in; the ``tool_call_id`` keyword (the call's
    id, not an argument) is left out. Built once per decorated function."""

    __slots__ = ("_names", "_plain", "signature")

    def __init__(self, func: Callable[..., Any]) -> None:
        try:
            signature: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):  # builtins and the like: arguments as given (``call_input``)
            signature = None
        if signature is not None:
            parameters = list(signature.parameters.values())
            if parameters and parameters[0].name in ("self", "cls"):  # a method's calls come without it
                signature = signature.replace(parameters=parameters[1:])
        self.signature = signature
        # Plain parameters only (no *args, **kwargs, positional- or keyword-only, nor one named tool_call_id):
        # a call is bound by position and name directly, as Signature.bind would (which costs about as much
        # as the rest of the span).
        params = list(signature.parameters.values()) if signature is not None else []
        plain = signature is not None and "tool_call_id" not in signature.parameters and all(
            p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
        self._plain = tuple((p.name, p.default) for p in params) if plain else None
        self._names = frozenset(p.name for p in params)

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if self.signature is None:
            return call_input(args, kwargs)
        plain = self._plain
        if plain is not None and len(args) <= len(plain):
            return self._bind_plain(plain, args, kwargs)
        given = {name: value for name, value in kwargs.items() if name != "tool_call_id"}
        try:
            bound = self.signature.bind(*args, **given)
        except TypeError:  # a call the function will refuse itself: recorded as it was made
            return call_input(args, kwargs)
        bound.apply_defaults()
        arguments: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if name == "tool_call_id":
                continue
            kind = self.signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                arguments.update(value)
            else:
                arguments[name] = list(value) if kind is inspect.Parameter.VAR_POSITIONAL else value
        return arguments

    def _bind_plain(self, plain: tuple[tuple[str, Any], ...], args: Sequence[Any],
                    kwargs: Mapping[str, Any]) -> Any:
        arguments = dict(zip((name for name, _ in plain), args, strict=False))
        for name, value in kwargs.items():
            if name == "tool_call_id":
                continue
            if name in arguments or name not in self._names:  # refused by the function: as it was made
                return call_input(args, kwargs)
            arguments[name] = value
        if len(arguments) < len(plain):
            for name, default in plain:
                if name not in arguments:
                    if default is inspect.Parameter.empty:  # missing: refused by the function
                        return call_input(args, kwargs)
                    arguments[name] = default
        return {name: arguments[name] for name, _ in plain}  # the signature's order, as bind gives it
