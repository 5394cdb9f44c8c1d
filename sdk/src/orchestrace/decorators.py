"""``@ot.agent``, ``@ot.tool``, ``@ot.llm``: bare or with arguments, on any kind of callable.

Built on ``wrapt``: the decorated function keeps its signature, docstring and ``inspect`` nature
(coroutine / generator function), and works as a method, classmethod or staticmethod.
Generators and async generators get a span that lasts until they are exhausted, closed, or abandoned and
garbage-collected; it starts at the first iteration, as a child of the context they were created in.
The user's function is never called inside a ``try`` that could swallow its exceptions: they are recorded
and re-raised as they are.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar, cast, overload

import wrapt
from opentelemetry import context as otel_context
from opentelemetry.context import Context

from orchestrace.arguments import CallArguments, ToolArguments
from orchestrace.declared import AGENT, TOOL, declare
from orchestrace.invocation import AgentSpec, LlmSpec, Spec, ToolSpec
from orchestrace.returned import traced

F = TypeVar("F", bound=Callable[..., Any])
Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

def _call(spec: Spec, streams: bool = False) -> Wrapper:
    """``streams``: a model call, whose result may be a stream for its caller to read
    (``returned.py``)."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        started = spec.start(args, kwargs)
        if started is None:
            return wrapped(*args, **kwargs)
        invocation, token = started
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            invocation.fail(exc, token)
            raise
        if streams:
            return traced(invocation, result, token)
        invocation.stop(result, token)
        return result

    return wrapper


def _coroutine(spec: Spec, streams: bool = False) -> Wrapper:
    async def run(wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Started when awaited, so the parent is the awaiting task's context (asyncio.gather, TaskGroup).
        started = spec.start(args, kwargs)
        if started is None:
            return await wrapped(*args, **kwargs)
        invocation, token = started
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            invocation.fail(exc, token)
            raise
        if streams:
            return traced(invocation, result, token)
        invocation.stop(result, token)
        return result

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        return run(wrapped, args, kwargs)

    return wrapper


def _traced_generator(spec: Spec, generator: Generator[Any, Any, Any], args: Sequence[Any],
                      kwargs: Mapping[str, Any], parent: Context) -> Generator[Any, Any, Any]:
    """``yield from generator`` with the span current only while the generator runs, not between yields."""
    invocation = spec.begin(args, kwargs, parent)
    if invocation is None:
        return (yield from generator)
    to_send: Any = None
    to_throw: BaseException | None = None
    while True:
        token = invocation.resume()
        try:
            item = generator.throw(to_throw) if to_throw is not None else generator.send(to_send)
        except StopIteration as stop:
            invocation.stop(stop.value, token)
            return stop.value
        except BaseException as exc:
            invocation.fail(exc, token)
            raise
        invocation.suspend(token)
        invocation.on_item(item)
        to_send, to_throw = None, None
        try:
            to_send = yield item
        except GeneratorExit:  # closed, or abandoned and collected
            token = invocation.resume()
            try:
                generator.close()
            except BaseException as exc:
                invocation.fail(exc, token)
                raise
            invocation.close(token)
            raise
        except BaseException as exc:
            to_throw = exc


def _generator(spec: Spec) -> Wrapper:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        return _traced_generator(spec, wrapped(*args, **kwargs), args, kwargs, otel_context.get_current())

    return wrapper


async def _traced_async_generator(spec: Spec, generator: AsyncGenerator[Any, Any], args: Sequence[Any],
                                  kwargs: Mapping[str, Any], parent: Context) -> AsyncGenerator[Any, Any]:
    """The async twin of :func:`_traced_generator`."""
    invocation = spec.begin(args, kwargs, parent)
    to_send: Any = None
    to_throw: BaseException | None = None
    while True:
        token = invocation.resume() if invocation is not None else None
        try:
            if to_throw is not None:
                item = await generator.athrow(to_throw)
            else:
                item = await generator.asend(to_send)
        except StopAsyncIteration:
            if invocation is not None:
                invocation.stop(None, token)
            return
        except BaseException as exc:
            if invocation is not None:
                invocation.fail(exc, token)
            raise
        if invocation is not None:
            invocation.suspend(token)
            invocation.on_item(item)
        to_send, to_throw = None, None
        try:
            to_send = yield item
        except GeneratorExit:
            token = invocation.resume() if invocation is not None else None
            try:
                await generator.aclose()
            except BaseException as exc:
                if invocation is not None:
                    invocation.fail(exc, token)
                raise
            if invocation is not None:
                invocation.close(token)
            raise
        except BaseException as exc:
            to_throw = exc


def _async_generator(spec: Spec) -> Wrapper:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        return _traced_async_generator(spec, wrapped(*args, **kwargs), args, kwargs,
                                       otel_context.get_current())

    return wrapper


def _function_of(func: Any) -> Callable[..., Any]:
    """The plain function under a classmethod / staticmethod object."""
    return getattr(func, "__func__", func)


def instrument(func: F, spec: Spec) -> F:
    """Wrap ``func`` so that each call records ``spec``'s span."""
    target = inspect.unwrap(_function_of(func))
    if inspect.isasyncgenfunction(target):
        wrapper = _async_generator(spec)
    elif inspect.iscoroutinefunction(target):
        wrapper = _coroutine(spec, isinstance(spec, LlmSpec))
    elif inspect.isgeneratorfunction(target):
        wrapper = _generator(spec)
    else:
        wrapper = _call(spec, isinstance(spec, LlmSpec))
    return cast(F, wrapt.decorator(wrapper)(func))


def _name_of(func: Any) -> str:
    return str(getattr(_function_of(func), "__name__", None) or type(func).__name__)


def _first_doc_line(func: Any) -> str | None:
    doc = inspect.getdoc(_function_of(func))
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


@overload
def agent(name: F, /) -> F: ...
@overload
def agent(name: str | None = None, *, role: str | None = None,
          agent_id: str | None = None) -> Callable[[F], F]: ...
def agent(name: Any = None, *, role: str | None = None, agent_id: str | None = None) -> Any:
    """Trace each call as one agent invocation: an ``invoke_agent {name}`` span.

    ``name`` defaults to the function's name; ``agent_id`` fixes ``gen_ai.agent.id`` (by default every call
    is a fresh instance ``{name}-{12 hex}``). Called inside another agent, it records a delegation with a
    return (``orchestrace.agent.parent_id``).
    """

    def decorate(func: F, agent_name: str | None = None) -> F:
        resolved = agent_name or _name_of(func)
        spec = AgentSpec(resolved, role, agent_id)
        declare(_function_of(func), AGENT, spec)
        return instrument(func, spec)

    if name is None or isinstance(name, str):
        return lambda func: decorate(func, name)
    return decorate(name)


@overload
def tool(name: F, /) -> F: ...
@overload
def tool(name: str | None = None, *, description: str | None = None,
         trusted: bool = False) -> Callable[[F], F]: ...
def tool(name: Any = None, *, description: str | None = None, trusted: bool = False) -> Any:
    """Trace each call as one tool execution: an ``execute_tool {name}`` span.

    ``description`` defaults to the docstring's first line. The result is an untrusted tool result unless
    ``trusted=True``. A ``tool_call_id`` keyword argument, when the function takes one, is the call id.
    The arguments are recorded by parameter name, defaults filled in (see
    :class:`orchestrace.arguments.ToolArguments`); a generator tool's result is the list of its items.
    """

    def decorate(func: F, tool_name: str | None = None) -> F:
        spec = ToolSpec(tool_name or _name_of(func), description or _first_doc_line(func), trusted,
                        arguments=ToolArguments(inspect.unwrap(_function_of(func))))
        declare(_function_of(func), TOOL, spec)
        return instrument(func, spec)

    if name is None or isinstance(name, str):
        return lambda func: decorate(func, name)
    return decorate(name)


@overload
def llm(model: F, /) -> F: ...
@overload
def llm(model: str | None = None, *, provider: str | None = None,
        messages: str | None = None) -> Callable[[F], F]: ...
def llm(model: Any = None, *, provider: str | None = None, messages: str | None = None) -> Any:
    """Trace each call as one model call (a turn): a ``chat {model}`` CLIENT span.

    ``model`` defaults to a ``model=`` keyword argument of the call. The prompt is the argument named
    ``messages`` (this decorator's argument), else ``messages`` / ``prompt`` / ``input`` / ``contents``, else
    the first; sampling parameters and tools among the other arguments are recorded (see
    :mod:`orchestrace.arguments`). The reply may be any common client library's (see
    :mod:`orchestrace.replies`), or a stream of its chunks: yielded (a generator) or returned for the caller
    to read (see :mod:`orchestrace.returned`; a stream left before its end is flagged incomplete).
    Usage, response model and id and finish reason are read from it (usage may also be set with
    ``ot.set_usage``); with content capture on, the messages are recorded in the GenAI shape.
    """

    def decorate(func: F) -> F:
        arguments = CallArguments(inspect.unwrap(_function_of(func)), messages)
        return instrument(func, LlmSpec(model if isinstance(model, str) else None, provider, arguments))

    if model is None or isinstance(model, str):
        return decorate
    return decorate(model)
