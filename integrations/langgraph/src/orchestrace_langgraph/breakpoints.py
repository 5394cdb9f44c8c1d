"""Static breakpoints (``interrupt_before`` / ``interrupt_after``, at compile or call time): a human's pause.

LangGraph pauses at a breakpoint by raising an empty ``GraphInterrupt`` from ``PregelLoop.tick`` (before the
nodes run) or ``PregelLoop.after_tick`` (after they ran), having set the loop's ``status``; the run's stream
then ends normally. Wrapping those two methods sees the pause where it happens: it records a human
intervention of kind ``interrupt_before`` / ``interrupt_after`` on the run, naming the nodes, so that the
run's end is not taken for a stop and the resume (``invoke(None, config)``) links back to it.
``interrupt()`` raises a ``GraphInterrupt`` that carries its interrupts; the node that asked records those
(``nodes.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph.errors import GraphInterrupt
from orchestrace.failsafe import failsafe

from orchestrace_langgraph import routing
from orchestrace_langgraph.actors import InterruptLog, current_run

BEFORE = "interrupt_before"
AFTER = "interrupt_after"


class BreakpointTracer:
    def __init__(self, interrupts: InterruptLog) -> None:
        self._interrupts = interrupts

    def tick(self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
        try:
            return wrapped(*args, **kwargs)
        except GraphInterrupt as exc:
            self._record(instance, exc, instance.tasks)
            raise

    def after_tick(self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        ran = instance.tasks  # before an interrupt_after, the loop replaces ``tasks`` with the next step's
        try:
            return wrapped(*args, **kwargs)
        except GraphInterrupt as exc:
            self._record(instance, exc, ran)
            raise

    @failsafe(None)
    def _record(self, loop: Any, exc: GraphInterrupt, tasks: Mapping[str, Any]) -> None:
        status = getattr(loop, "status", None)
        run = current_run()
        if (exc.args and exc.args[0]) or status not in (BEFORE, AFTER) or run is None:
            return
        where = loop.interrupt_before if status == BEFORE else loop.interrupt_after
        nodes = sorted({task.name for task in tasks.values() if where == "*" or task.name in where})
        routing.record_breakpoint(run, status, nodes, self._interrupts)
