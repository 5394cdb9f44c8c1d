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
from orchestrace.instrumentation import failsafe

from orchestrace_langgraph import compat, routing
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
            self._record(instance, exc, compat.loop_tasks(instance))
            raise

    def after_tick(self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        if not compat.may_interrupt_after(instance):  # most graphs: no copy of the step's tasks
            return wrapped(*args, **kwargs)
        ran = compat.loop_tasks(instance)  # before an interrupt_after, the loop replaces its tasks
        try:
            return wrapped(*args, **kwargs)
        except GraphInterrupt as exc:
            self._record(instance, exc, ran)
            raise

    @failsafe(None)
    def _record(self, loop: Any, exc: GraphInterrupt, tasks: Mapping[str, Any]) -> None:
        run = current_run()
        if compat.interrupts_of(exc) or run is None:
            return
        paused = compat.breakpoint_nodes(loop, tasks, BEFORE, AFTER)
        if paused is not None:
            routing.record_breakpoint(run, paused[0], paused[1], self._interrupts)
