"""Who is running now, and carrying that across tasks, threads and processes.

The current agent and task live in the OpenTelemetry ``Context`` next to the current span, so whatever
carries the span (asyncio tasks, ``contextvars.copy_context``, W3C propagation) carries them too.
Across processes the span travels as W3C ``traceparent`` and the agent as W3C ``baggage``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, NamedTuple, ParamSpec, TypeVar

from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import Span

from orchestrace import semconv as sc
from orchestrace.failsafe import failsafe

_P = ParamSpec("_P")
_R = TypeVar("_R")

AGENT_KEY = otel_context.create_key("orchestrace.agent")
TASK_KEY = otel_context.create_key("orchestrace.task")
#: Set inside a ``handle_conversation_turn`` span: a runner entrypoint invoked within the turn (a framework
#: run inside another one's tool or node) is no second turn, as the GenAI conventions require.
TURN_KEY = otel_context.create_key("orchestrace.conversation_turn")
#: The model call in progress (for ``set_usage``).
MODEL_CALL_KEY = otel_context.create_key("orchestrace.model_call")
#: Set by an integration whose own span already traces a call of a decorated function (a LangChain tool
#: made of an ``@ot.tool`` function, a LangGraph agent node of an ``@ot.agent`` one): a one-item list of that
#: function's spec. The first call of that spec in this context takes the item out and adds no span, so the
#: call is not traced twice; calls it makes itself (recursion) are traced as usual.
TRACED_BY_CALLER_KEY = otel_context.create_key("orchestrace.traced_by_caller")


def traced_by_caller(spec: object) -> dict[str, object]:
    """The context values telling ``spec``'s next call that the caller's own span traces it."""
    return {TRACED_BY_CALLER_KEY: [spec]}
#: The key under which ``trace.set_span_in_context`` puts the current span, read from what it does (OTel keeps
#: its name private) so that a context can be built in one copy and read with plain dict lookups.
SPAN_KEY = next(iter(trace.set_span_in_context(trace.INVALID_SPAN, Context())))


class AgentFrame(NamedTuple):
    """An agent instance that is running (a named tuple: made on every agent call, and cheap to make)."""

    name: str
    id: str
    role: str | None = None


def current_agent(ctx: Context | None = None) -> AgentFrame | None:
    """The innermost ``@ot.agent`` invocation running in ``ctx`` (default: the current context)."""
    frame = otel_context.get_value(AGENT_KEY, ctx)
    return frame if isinstance(frame, AgentFrame) else None


def with_agent(frame: AgentFrame, ctx: Context) -> Context:
    return otel_context.set_value(AGENT_KEY, frame, ctx)


class TaskFrame(NamedTuple):
    """The episode running: its task (the group of rollouts) and its own id."""

    task_id: str
    episode_id: str


def current_task(ctx: Context | None = None) -> TaskFrame | None:
    frame = otel_context.get_value(TASK_KEY, ctx)
    return frame if isinstance(frame, TaskFrame) else None


def with_task(frame: TaskFrame, ctx: Context) -> Context:
    return otel_context.set_value(TASK_KEY, frame, ctx)


# --- processes: W3C traceparent + baggage ------------------------------------------------------------------
_BAGGAGE_AGENT = {sc.GEN_AI_AGENT_ID: "id", sc.GEN_AI_AGENT_NAME: "name", sc.ORCH_AGENT_ROLE: "role"}


@failsafe(default={})
def inject(carrier: dict[str, str] | None = None) -> dict[str, str]:
    """Headers carrying the current span, agent and task to another process (``traceparent``, ``baggage``).

    Pass them to the child and call :func:`extract` / :func:`attach` there.
    """
    carrier = {} if carrier is None else carrier
    ctx = otel_context.get_current()
    frame = current_agent(ctx)
    if frame is not None:
        for key, field in _BAGGAGE_AGENT.items():
            value = getattr(frame, field)
            if value is not None:
                ctx = baggage.set_baggage(key, value, ctx)
    task = current_task(ctx)
    if task is not None:
        ctx = baggage.set_baggage(sc.ORCH_TASK_ID, task.task_id, ctx)
        ctx = baggage.set_baggage(sc.ORCH_EPISODE_ID, task.episode_id, ctx)
    propagate.inject(carrier, context=ctx)
    return carrier


@failsafe(default=None)
def _restore(ctx: Context) -> Context:
    values = baggage.get_all(ctx)
    agent_id, name = values.get(sc.GEN_AI_AGENT_ID), values.get(sc.GEN_AI_AGENT_NAME)
    if isinstance(agent_id, str) and isinstance(name, str):
        role = values.get(sc.ORCH_AGENT_ROLE)
        ctx = with_agent(AgentFrame(name, agent_id, role if isinstance(role, str) else None), ctx)
    task_id, episode_id = values.get(sc.ORCH_TASK_ID), values.get(sc.ORCH_EPISODE_ID)
    if isinstance(task_id, str) and isinstance(episode_id, str):
        ctx = with_task(TaskFrame(task_id, episode_id), ctx)
    return ctx


def extract(carrier: Mapping[str, str]) -> Context:
    """The context that :func:`inject` sent (the current one when the carrier holds nothing usable)."""
    try:
        ctx = propagate.extract(dict(carrier))
    except Exception:
        return otel_context.get_current()
    return _restore(ctx) or ctx


@contextlib.contextmanager
def attach(carrier: Mapping[str, str] | Context) -> Iterator[Context]:
    """``with ot.attach(headers):`` runs the block as a child of the process that called :func:`inject`."""
    ctx = carrier if isinstance(carrier, Context) else extract(carrier)
    token = otel_context.attach(ctx)
    try:
        yield ctx
    finally:
        otel_context.detach(token)


# --- threads and tasks: work handed to others, and waiting for it -------------------------------------------
#: Context key: the span whose code handed the work running here to a worker (a thread or an asyncio task):
#: a span started directly under it runs beside it (``orchestrace.concurrent``, see ``Telemetry.start_span``).
BESIDE_KEY = otel_context.create_key("orchestrace.beside")
#: A wait starting this soon after the previous one ended continues it: the bookkeeping between two
#: ``result()`` calls is no work worth an interval (and the list stays short for a long ``map``).
_WAIT_GAP_NS = 1_000_000
_waits_lock = threading.Lock()


def _beside(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """``func``, run in a context saying that it runs beside the caller's current span."""
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return func

    @functools.wraps(func)
    def run_beside(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        token = otel_context.attach(otel_context.set_value(BESIDE_KEY, span))
        try:
            return func(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return run_beside


@contextlib.contextmanager
def _waiting() -> Iterator[None]:
    """The block is the current span waiting for work it handed to others: recorded in its
    ``orchestrace.waits``."""
    span = trace.get_current_span()
    start = time.time_ns()
    try:
        yield
    finally:
        _record_wait(span, start, time.time_ns())


@failsafe(default=None)
def _record_wait(span: Span, start: int | None = None, end: int = 0) -> None:
    """Adds the wait from ``start`` to ``end`` to the span's; ``start=None``: none yet, but the span hands
    out work whose waits are recorded (an empty list: never blocked, its time beside that work its own)."""
    recorded = getattr(span, "attributes", None)  # the SDK's spans read back what they hold
    if not span.is_recording() or not isinstance(recorded, Mapping):
        return
    with _waits_lock:
        waits = list(recorded.get(sc.ORCH_WAITS) or ())
        if start is None:
            if sc.ORCH_WAITS in recorded:
                return
        elif waits and start - waits[-1] <= _WAIT_GAP_NS:
            waits[-1] = max(waits[-1], end)
        else:
            waits += [start, end]
        span.set_attribute(sc.ORCH_WAITS, waits)


def wrap_context(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """``func`` bound to the caller's current context: pass it to any executor or ``threading.Thread``.

    Plain ``ThreadPoolExecutor`` workers do not inherit context variables, so without this their spans
    would start new traces. Its spans run beside the caller's (``orchestrace.concurrent``).
    """
    ctx = contextvars.copy_context()
    beside = _beside(func)

    @functools.wraps(func)
    def run_in_context(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        # A copy per call: one Context cannot be entered by two threads at once.
        return ctx.copy().run(beside, *args, **kwargs)

    return run_in_context


class _Future(concurrent.futures.Future[_R]):
    """A future whose waits are recorded on the span that waits (none when it is already done)."""

    def result(self, timeout: float | None = None) -> _R:
        if self.done():
            return super().result(timeout)
        with _waiting():
            return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self.done():
            return super().exception(timeout)
        with _waiting():
            return super().exception(timeout)


class ThreadPoolExecutor(concurrent.futures.ThreadPoolExecutor):
    """A ``concurrent.futures.ThreadPoolExecutor`` whose tasks run in the submitter's context, beside its
    span; the time the submitter spends blocked on their results (``result()``, ``exception()``, ``map``,
    leaving the ``with`` block) is recorded as its waits, so that its own work meanwhile counts as busy."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._submitted: weakref.WeakSet[concurrent.futures.Future[Any]] = weakref.WeakSet()

    def submit(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[_R]:
        _record_wait(trace.get_current_span())
        future = super().submit(contextvars.copy_context().run, _beside(fn), *args, **kwargs)
        future.__class__ = _Future  # the same object (the pool holds it), its waits recorded
        self._submitted.add(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if not wait or all(future.done() for future in list(self._submitted)):
            return super().shutdown(wait, cancel_futures=cancel_futures)
        with _waiting():  # work still running: leaving the pool waits for it
            return super().shutdown(wait, cancel_futures=cancel_futures)


async def gather(*aws: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
    """``asyncio.gather``: the awaitables run as tasks beside the caller's span, and the caller's wait for
    them is recorded (coroutines not yet started; a task created before runs as it was created)."""
    span = trace.get_current_span()
    _record_wait(span)
    token = otel_context.attach(otel_context.set_value(BESIDE_KEY, span))
    try:
        joined = asyncio.gather(*aws, return_exceptions=return_exceptions)
    finally:
        otel_context.detach(token)
    with _waiting():
        return list(await joined)
