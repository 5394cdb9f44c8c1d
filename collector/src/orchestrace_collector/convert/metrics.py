"""Costs and built-in metrics of one episode (definitions in README.md of this package).

- ``parallelism_efficiency`` = T_serial / T_parallel: T_serial is the summed busy time of all work, each
  span's own time (its duration less the union of its children's intervals, so an agent's work between its
  tool and model calls counts; where the span recorded its waits for work it handed out, less those and its
  children that did not run beside it, so its own work while they ran counts too); T_parallel is the active
  wall clock, the union of all spans' intervals (a long pause between an interrupt and its resume, or before
  a late span, is not counted; it is also ``costs.wall_clock_s``). About 1 = sequential, N = N branches busy
  at once.
- ``critical_steps``: the number of events on the longest edge path (forward edges only).
- ``protocol_overhead``: orchestration events (decisions, spawns, despawns, messages, returns, aggregates)
  over orchestration events plus work units (tool calls, tool results, model calls).
- ``message_redundancy``: the share of messages whose content ref repeats an earlier message's (only when the
  episode has messages).
- ``agent_utilization``: agent instances with an event on the causal path to the final answer over all
  instances.
- ``task_success``: ``orchestrace.task.success`` when a span records it.
- ``incomplete``: 1 when spans were missing or repaired (orphans, parent cycles), else 0.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Final

import orchestrace_semconv as sc

from .edges import EdgeRec
from .events import Ev
from .forest import Forest, Node
from .kinds import EventType

ORCHESTRATION_TYPES: Final[frozenset[EventType]] = frozenset(
    {"orchestrator_decision", "spawn", "despawn", "message", "return", "aggregate"}
)
WORK_TYPES: Final[frozenset[EventType]] = frozenset({"tool_call", "tool_result"})
_START: Final = attrgetter("start_ns")
#: A span's ``(start_ns, end_ns)``, read in C: no Python frame per child.
_INTERVAL: Final[Callable[[Node], tuple[int, int]]] = attrgetter("start_ns", "end_ns")


def active_wall_clock_ns(forest: Forest) -> int:
    """The time something ran: the union of every span's interval. Idle gaps are not counted: the pause
    between an interrupt and its resume (two roots), nor the wait before a late span (a child that started
    after its parent ended)."""
    total = 0
    cur_start = cur_end = None
    for node in sorted(forest.nodes, key=_START):
        if cur_end is None or node.start_ns > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = node.start_ns, node.end_ns
        elif node.end_ns > cur_end:
            cur_end = node.end_ns
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def serial_work_ns(forest: Forest) -> int:
    """The summed own time of every span: its duration less the union of its children's intervals; for a
    span that recorded when it waited for work it handed out (``orchestrace.waits``), less those waits and
    its children that did not run beside it (``orchestrace.concurrent``): it worked while they ran."""
    total = 0
    for node in forest.nodes:
        recorded = node.span.attributes.get(sc.ORCH_WAITS)  # read here: most spans record none
        waits = recorded_waits(recorded) if recorded is not None else None
        if not node.children and not waits:
            total += node.end_ns - node.start_ns
            continue
        if waits is None:
            # The children come in start order (``forest``), and the sweep below needs no more: no sort, and
            # no getter called per child.
            elsewhere = [(child.start_ns, child.end_ns) for child in node.children]
        else:
            elsewhere = sorted(waits + [
                _INTERVAL(child)
                for child in node.children
                if child.span.attributes.get(sc.ORCH_CONCURRENT) is not True
            ])
        covered = 0
        node_start, node_end = node.start_ns, node.end_ns
        cur_start = cur_end = node_start
        for child_start, child_end in elsewhere:
            # Clipped to the span: comparisons, not max()/min() (two calls per child).
            start = child_start if child_start > node_start else node_start
            end = child_end if child_end < node_end else node_end
            if end <= start:
                continue
            if start > cur_end:
                covered += cur_end - cur_start
                cur_start, cur_end = start, end
            elif end > cur_end:
                cur_end = end
        covered += cur_end - cur_start
        total += node_end - node_start - covered
    return total


def recorded_waits(value: object) -> list[tuple[int, int]] | None:
    """A span's recorded waits (``orchestrace.waits``) as (start, end) pairs (none: it handed work out and
    never blocked on it); ``None`` when they are not pairs."""
    if not isinstance(value, list | tuple) or len(value) % 2:
        return None
    try:
        bounds = [int(v) for v in value]
    except (TypeError, ValueError):
        return None
    return list(zip(bounds[::2], bounds[1::2], strict=True))


def critical_steps(n_events: int, edges: list[EdgeRec]) -> int:
    """Longest path, counted in events; ``edges`` sorted by source (as ``build_edges`` returns them): every
    edge into an event has a smaller source, so its length is final before the event's own edges are read."""
    longest = [1] * n_events
    for src, dst, _ in edges:
        if src < dst and longest[src] + 1 > longest[dst]:
            longest[dst] = longest[src] + 1
    return max(longest) if longest else 0


def structural_metrics(
    forest: Forest, events: list[Ev], edges: list[EdgeRec], n_turns: int, wall: int
) -> dict[str, float]:
    """``wall``: the active wall clock (``active_wall_clock_ns``)."""
    metrics: dict[str, float] = {}
    if wall > 0:
        metrics["parallelism_efficiency"] = serial_work_ns(forest) / wall
    metrics["critical_steps"] = float(critical_steps(len(events), edges))
    orchestration = sum(1 for ev in events if ev.type in ORCHESTRATION_TYPES)
    work = sum(1 for ev in events if ev.type in WORK_TYPES) + n_turns
    if orchestration + work:
        metrics["protocol_overhead"] = orchestration / (orchestration + work)
    refs = [ev.content_ref for ev in events if ev.type == "message"]
    if refs:
        seen: set[str] = set()
        repeats = 0
        for ref in refs:
            if ref is not None and ref in seen:
                repeats += 1
            elif ref is not None:
                seen.add(ref)
        metrics["message_redundancy"] = repeats / len(refs)
    metrics["incomplete"] = 1.0 if forest.incomplete else 0.0
    # Spans whose clocks say they ended before they started (their time is taken as zero): counted, so a
    # trace built from skewed or hostile timestamps says so.
    backwards = sum(1 for n in forest.nodes if 0 < n.span.end_ns < n.span.start_ns)
    if backwards:
        metrics["end_before_start"] = float(backwards)
    return metrics
