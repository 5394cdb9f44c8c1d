"""Every model call a Runner makes is a turn, whether or not its ``Model`` opens a span of its own.

OpenAI's models (and LiteLLM's) open a ``response_span`` or ``generation_span`` per call, which the processor
records; a ``Model`` of one's own (any custom or scripted model) opens none, though the Runner holds its
``ModelResponse`` with usage. So the Runner's model is wrapped where the run loop gets it
(``agents.run_internal.run_loop.get_model``, the one internal this module uses, detected at ``instrument``
time): each ``get_response`` / ``stream_response`` call opens a model-call span. A model span the call opens
itself *claims* that span (:func:`claim`), and the processor fills and ends it as before: one turn, never two.
Otherwise the call's own arguments and ``ModelResponse`` fill it: model (its ``model`` attribute when it has
one), system instructions and input as messages (when the run includes sensitive data), model settings, the
output, usage. The tools and handoffs offered come from the call's arguments in both cases (a Chat
Completions ``generation_span`` does not list them).

The wrapper goes on the model *instance* (an attribute shadowing its class's method), so the Runner keeps the
very object it was given (``isinstance`` checks, its tool-use tracker); it passes every call straight through
while the instrumentation is off or the run is not traced.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

from agents import Model, ModelResponse
from agents.models.openai_responses import Converter
from opentelemetry import context as otel_context
from orchestrace.instrumentation import log_once

from orchestrace_openai_agents import _telemetry as telemetry
from orchestrace_openai_agents.items import chat_messages

#: The internal the run loop gets its model from (both the plain and the streamed turn call it).
RUN_LOOP_MODULE = "agents.run_internal.run_loop"
GET_MODEL = "get_model"
_WRAPPED = "_orchestrace_wrapped"
_SIGNATURE = inspect.signature(Model.get_response)


class _Call:
    """One model call in flight: its span, until a model span claims it."""

    __slots__ = ("claimed", "invocation")

    def __init__(self, invocation: telemetry.Invocation) -> None:
        self.invocation = invocation
        self.claimed = False


_IN_FLIGHT: ContextVar[_Call | None] = ContextVar("orchestrace_openai_agents_model_call", default=None)


def claim() -> telemetry.Invocation | None:
    """The span of the model call in flight here, for the model span it opens (once; else ``None``)."""
    call = _IN_FLIGHT.get()
    if call is None or call.claimed:
        return None
    call.claimed = True
    return call.invocation


#: Told of every traced call's input items (as chat messages) and its reply (``None`` for a failed call,
#: or a run that hides its data): how the agents around it show their input and output.
Replied = Callable[[list[dict[str, Any]], Any], None]


class ModelCalls:
    """The ``get_model`` wrapper; ``recorder()`` gives the current recorder (``None`` while off), ``replied``
    is told of each call that returned (see :data:`Replied`)."""

    def __init__(self, recorder: Callable[[], telemetry.Recorder | None], replied: Replied) -> None:
        self.recorder = recorder
        self.replied = replied

    def get_model(self, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        model = wrapped(*args, **kwargs)
        self._wrap(model)
        return model

    @telemetry.failsafe(default=None)
    def _wrap(self, model: Any) -> None:
        if not isinstance(model, Model) or getattr(model, _WRAPPED, False):
            return
        try:
            model.get_response = self._get_response(model, model.get_response)  # type: ignore[method-assign]
            model.stream_response = self._stream_response(  # type: ignore[method-assign]
                model, model.stream_response)
            setattr(model, _WRAPPED, True)
        except (AttributeError, TypeError) as exc:  # __slots__, a frozen model: its calls stay unrecorded
            log_once(f"wrapping the calls of model {type(model).__qualname__}", exc)

    def _begin(self, args: Any, kwargs: Any) -> tuple[_Call, dict[str, Any], object] | None:
        recorder = self.recorder()
        if recorder is None:
            return None
        try:
            bound = _SIGNATURE.bind(None, *args, **kwargs).arguments
        except TypeError:
            return None
        tracing = bound.get("tracing")
        if tracing is None or tracing.is_disabled():
            return None  # the Agents SDK traces nothing of this run: neither do we
        call = _Call(recorder.model_call(otel_context.get_current()))
        _offered(call.invocation, bound)
        return call, bound, _IN_FLIGHT.set(call)

    def _get_response(self, model: Model, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        async def get_response(*args: Any, **kwargs: Any) -> Any:
            begun = self._begin(args, kwargs)
            if begun is None:
                return await original(*args, **kwargs)
            call, bound, token = begun
            try:
                response = await original(*args, **kwargs)
            except BaseException as exc:
                _reset(token)
                _failed(call, exc)
                raise
            _reset(token)
            _finished(call, model, bound, response, None, self.replied)
            return response

        return get_response

    def _stream_response(self, model: Model, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        async def stream_response(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            begun = self._begin(args, kwargs)
            if begun is None:
                async for event in original(*args, **kwargs):
                    yield event
                return
            call, bound, token = begun
            completed = None
            try:
                async for event in original(*args, **kwargs):
                    if getattr(event, "type", None) == "response.completed":
                        completed = getattr(event, "response", None)
                    yield event
            except BaseException as exc:  # GeneratorExit too: the consumer stopped half way
                _reset(token)
                _failed(call, exc)
                raise
            _reset(token)
            _finished(call, model, bound, None, completed, self.replied)

        return stream_response


def _reset(token: object) -> None:
    try:
        _IN_FLIGHT.reset(token)  # type: ignore[arg-type]
    except ValueError:  # a stream closed from another context than the one it started in
        _IN_FLIGHT.set(None)


@telemetry.failsafe(default=None)
def _offered(invocation: telemetry.Invocation, bound: dict[str, Any]) -> None:
    """The tools and handoffs offered, from the call's arguments: a model's own span may lack them (a Chat
    Completions ``generation_span`` has none)."""
    tools = Converter.convert_tools(list(bound.get("tools") or ()), list(bound.get("handoffs") or ())).tools
    if tools:
        invocation.set_request(None, {"tools": tools})


@telemetry.failsafe(default=None)
def _failed(call: _Call, exc: BaseException) -> None:
    if call.claimed:
        return  # the model's own span says how it ended
    if isinstance(exc, GeneratorExit):
        telemetry.Recorder.end(call.invocation)
    else:
        telemetry.Recorder.fail(call.invocation, type(exc).__qualname__, None, exc)


@telemetry.failsafe(default=None)
def _finished(call: _Call, model: Model, bound: dict[str, Any], response: ModelResponse | None,
              completed: Any, replied: Replied) -> None:
    """Tell ``replied`` of the call (claimed or not), and record a call no model span claimed, from its
    arguments and what it returned (a ``ModelResponse``, or a stream's completed ``Response``)."""
    tracing = bound["tracing"]
    result: Any = completed
    if response is not None:
        result = {"object": "response", "id": response.response_id, "status": "completed",
                  "output": list(response.output)}
    items = chat_messages(bound.get("input")) if tracing.include_data() else None
    if items is not None:
        replied(items, result)
    if call.claimed:
        return
    messages = None
    if items is not None:
        instructions = bound.get("system_instructions")
        system = [{"role": "system", "content": instructions}] if isinstance(instructions, str) else []
        messages = system + items
    settings = bound.get("model_settings")
    request: dict[str, Any] = dict(settings.to_traceable_dict()) if settings is not None else {}
    name = getattr(model, "model", None)
    usage = telemetry.usage_of(response.usage) if response is not None else None
    telemetry.Recorder.model_request(call.invocation, name if isinstance(name, str) else None, messages,
                                      request, usage)
    telemetry.Recorder.finish(call.invocation, result)
