"""``ot.task``: one episode (one orchestration trace), as a decorator or a ``with`` block."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from types import TracebackType
from typing import Any, TypeVar, overload

from opentelemetry.trace import Span

from orchestrace import semconv as sc
from orchestrace.decorators import instrument
from orchestrace.failsafe import failsafe
from orchestrace.invocation import Invocation, WorkflowSpec

F = TypeVar("F", bound=Callable[..., Any])


class TaskRun:
    """The running task a ``with ot.task(...) as run:`` block gets."""

    def __init__(self, invocation: Invocation | None) -> None:
        self._invocation = invocation

    @property
    def span(self) -> Span | None:
        return self._invocation.span if self._invocation else None

    def _attribute(self, key: str) -> str | None:
        value = (getattr(self.span, "attributes", None) or {}).get(key)
        return value if isinstance(value, str) else None

    @property
    def task_id(self) -> str | None:
        """The task: what groups its rollouts (the group of group-relative RL methods)."""
        return self._attribute(sc.ORCH_TASK_ID)

    @property
    def episode_id(self) -> str | None:
        """This rollout: the ``trace_id`` of the orchestration trace it becomes."""
        return self._attribute(sc.ORCH_EPISODE_ID)

    @failsafe(default=None)
    def set_success(self, success: bool | float) -> None:
        """Record the task's outcome (``True``/``1.0`` success): the trace's ``metrics.task_success``."""
        if self._invocation is not None:
            self._invocation.span.set_attribute(sc.ORCH_TASK_SUCCESS, float(success))

    @failsafe(default=None)
    def set_input(self, value: Any) -> None:
        """Record the task's input, for a ``with`` block (a decorated task's is its arguments): its content
        ref, and its content when capture is on."""
        if self._invocation is not None:
            self._invocation.set_input(value)

    @failsafe(default=None)
    def set_result(self, result: Any) -> None:
        """Record the task's output (its content ref; content too when capture is on)."""
        if self._invocation is not None and self._invocation.span.is_recording():
            self._invocation.spec.record_result(self._invocation, result)


class TaskScope:
    """What ``ot.task(...)`` returns: a decorator, and a (sync or async) context manager."""

    def __init__(self, task_id: str | None, topology: str | None, system: str | None, name: str | None,
                 episode_id: str | None = None) -> None:
        self._options = (task_id, topology, system, name)
        self._episode_id = episode_id
        # Per context, so one scope can be entered by concurrent asyncio tasks or threads (and nested).
        self._active: ContextVar[tuple[tuple[Invocation | None, object], ...]] = ContextVar(
            "orchestrace_task_scope", default=())

    def _spec(self, workflow: str | None) -> WorkflowSpec:
        task_id, topology, system, name = self._options
        return WorkflowSpec(name, task_id, topology, system, workflow, self._episode_id)

    def __call__(self, func: F) -> F:
        workflow = getattr(getattr(func, "__func__", func), "__name__", None)
        return instrument(func, self._spec(workflow))

    def __enter__(self) -> TaskRun:
        started = self._spec(self._options[3]).start((), {})
        invocation, token = started if started is not None else (None, None)
        self._active.set((*self._active.get(), (invocation, token)))
        return TaskRun(invocation)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        active = self._active.get()
        if not active:
            return
        self._active.set(active[:-1])
        invocation, token = active[-1]
        if invocation is None:
            return
        if exc is not None:
            invocation.fail(exc, token)
        else:
            invocation.stop(None, token)

    async def __aenter__(self) -> TaskRun:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, traceback)


@overload
def task(task_id: F, /) -> F: ...
@overload
def task(task_id: str | None = None, *, topology: str | None = None, system: str | None = None,
         name: str | None = None, episode_id: str | None = None) -> TaskScope: ...
def task(task_id: Any = None, *, topology: str | None = None, system: str | None = None,
         name: str | None = None, episode_id: str | None = None) -> Any:
    """One rollout = one episode: an ``invoke_workflow {name}`` span whose descendants form one
    orchestration trace, with an id of its own per run (``run.episode_id``; ``episode_id`` sets it, e.g. to
    resume an episode in another process). A task inside another task's episode belongs to that episode.

    ``task_id`` names the task and groups its rollouts (it never merges them; default: the episode id);
    ``topology`` (one of ``semconv.TOPOLOGIES``, e.g.
    ``centralized``) and ``system`` describe the team (the trace's ``topology`` / ``system``). The span
    is named after ``name``, else the given ``task_id``, else the decorated function, else the generated id.
    """
    if task_id is None or isinstance(task_id, str):
        return TaskScope(task_id, topology, system, name, episode_id)
    return TaskScope(None, topology, system, name, episode_id)(task_id)
