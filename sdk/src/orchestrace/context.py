"""Who is running now, and carrying that across tasks, threads and processes.

The current agent and task live in the OpenTelemetry ``Context`` next to the current span, so whatever
carries the span (asyncio tasks, ``contextvars.copy_context``, W3C propagation) carries them too.
Across processes the span travels as W3C ``traceparent`` and the agent as W3C ``baggage``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping
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


def with_span(span: Span, parent: Context, values: Mapping[str, object] | None = None) -> Context:
    """``parent`` with ``span`` current and ``values`` set: one copy of the context, where
    ``set_span_in_context`` and each ``set_value`` would copy it whole."""
    return Context({**parent, SPAN_KEY: span, **values} if values else {**parent, SPAN_KEY: span})


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


# --- threads ------------------------------------------------------------------------------------------------
def wrap_context(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """``func`` bound to the caller's current context: pass it to any executor or ``threading.Thread``.

    Plain ``ThreadPoolExecutor`` workers do not inherit context variables, so without this their spans
    would start new traces.
    """
    ctx = contextvars.copy_context()

    @functools.wraps(func)
    def run_in_context(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        # A copy per call: one Context cannot be entered by two threads at once.
        return ctx.copy().run(func, *args, **kwargs)

    return run_in_context


class ThreadPoolExecutor(concurrent.futures.ThreadPoolExecutor):
    """A ``concurrent.futures.ThreadPoolExecutor`` whose tasks run in the submitter's context."""

    def submit(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[_R]:
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)
