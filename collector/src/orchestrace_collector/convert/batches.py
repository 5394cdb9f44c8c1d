"""What an instance did at once (a batch): tool calls asked for together, or agents started together (a
fan-out). Found once for the edges and the turns.

* Tool calls made after the same model call of their caller form a batch (a caller without model calls:
  calls that overlap in time), with their results.
* Agents an instance started one after another, each running before the earlier ones had all returned (or,
  for LangGraph nodes, in the same step: ``langgraph.step``), after the same model call of the instance, form
  a fan-out. Each start is a unit of the timeline: its ``spawn``, with the ``orchestrator_decision`` just
  before it when that decision is its own.

An agent started inside one of its instance's tool calls (an agent called as a tool) follows that call
(``Batches.made_by``), not the other calls of its batch.

Within a batch or a fan-out the order is a race between threads, so no rule may depend on it: the edges fork
before it and join after it (``edges.py``), an event that comes next after a return or a message is every
start of it, a child started in a fan-out returns into what follows the whole fan-out
(``Batches.returns_after``), and a model call's tokens count on the first of its calls or starts by tool
or target and input (``turns.py``). Two runs of one program then give the same trace however the race went.

Reads the instances' timelines (``EventSet``) and their model calls' start times (``turns.turn_starts``).
"""

from __future__ import annotations

from bisect import bisect_right

import orchestrace_semconv as sc

from .actors import Actors, Instance
from .classify import K_TOOL
from .events import Ev, EventSet
from .forest import enclosing


class Batches:
    """Every instance's timeline split into batches and fan-outs, and what comes before and after each."""

    __slots__ = ("after", "before", "calls", "closing", "fanned", "forks", "joins", "made_by", "members")

    def __init__(self, actors: Actors, events: EventSet, turn_starts: list[list[int]]) -> None:
        self.closing = events.closing  # span id -> the event that closes it (a tool span's: its tool_result)
        #: index of the first event of a batch or fan-out -> its calls (or the first event of each start),
        #: in trace order
        self.calls: dict[int, list[Ev]] = {}
        #: tool_call index -> what its batch follows: the caller's event before it, or every end of the
        #: batch or fan-out right before it
        self.before: dict[int, list[Ev]] = {}
        self.after: dict[int, Ev] = {}  # batch member index -> the caller's event after its batch
        #: indices of events in a batch of more than one call, or in a fan-out
        self.members: set[int] = set()
        #: batches of more than one call and fan-outs, followed by an event: (their ends, that event)
        self.joins: list[tuple[list[Ev], Ev]] = []
        #: fan-outs: (what the first start follows, the other starts' first events), which follow it too
        self.forks: list[tuple[list[Ev], list[Ev]]] = []
        #: id() of an instance started in a fan-out -> the fan-out's last event
        self.fanned: dict[int, Ev] = {}
        #: first event of a start made inside one of its instance's tool calls (an agent called as a tool) ->
        #: that tool_call: the start follows it, not the other calls of its batch
        self.made_by: dict[int, Ev] = {}
        for inst, timeline, turns in zip(actors.instances, events.timelines, turn_starts, strict=True):
            self._split(inst, timeline, turns)

    def returns_after(self, ret: Ev) -> Ev:
        """Where the parent's next event after a child's return ``ret`` is looked for: after the return, but
        after the whole fan-out the child was started in (its siblings' starts did not wait for it)."""
        last = self.fanned.get(id(ret.owner))
        return ret if last is None or last.index < ret.index else last

    def _split(self, inst: Instance, timeline: list[Ev], turns: list[int]) -> None:
        """``timeline``: ``inst``'s events; ``turns``: its model calls' start times."""
        ends_at: dict[int, list[Ev]] = {}  # last member's index -> the ends of a batch or fan-out
        i = 0
        while i < len(timeline):
            kind = timeline[i].type
            if kind == "tool_call":
                i = self._batch(timeline, turns, i, ends_at)
            elif kind == "spawn" or kind == "orchestrator_decision":
                i = self._fan_out(inst, timeline, turns, i, ends_at)
            else:
                i += 1

    def _batch(self, timeline: list[Ev], turns: list[int], i: int, ends_at: dict[int, list[Ev]]) -> int:
        """The batch of tool calls that starts at ``timeline[i]``; returns the position after it."""
        first = timeline[i]
        turn = bisect_right(turns, first.t_ns)
        calls = [first]
        called = {id(first)}
        open_calls = 1
        j = i + 1
        while j < len(timeline):
            ev = timeline[j]
            if ev.type == "tool_result" and ev.decision_ev is not None and id(ev.decision_ev) in called:
                open_calls -= 1
            elif ev.type == "tool_call" and (
                bisect_right(turns, ev.t_ns) == turn if turns else open_calls > 0
            ):
                calls.append(ev)
                called.add(id(ev))
                open_calls += 1
            else:
                break
            j += 1
        self.calls[first.index] = calls
        if i > 0:
            prev = timeline[i - 1]
            follows = ends_at.get(prev.index, [prev])
            for ev in calls:
                self.before[ev.index] = follows
        if j < len(timeline):
            for ev in timeline[i:j]:
                self.after[ev.index] = timeline[j]
        if len(calls) > 1:
            batch = timeline[i:j]
            self.members.update(ev.index for ev in batch)
            answered = {id(ev.decision_ev) for ev in batch if ev.type == "tool_result"}
            ends = [ev for ev in batch if ev.type == "tool_result" or id(ev) not in answered]
            self._ends(timeline, j, ends, ends_at)
        return j

    def _fan_out(self, inst: Instance, timeline: list[Ev], turns: list[int], i: int,
                 ends_at: dict[int, list[Ev]]) -> int:
        """The starts at ``timeline[i]`` and after it that form a fan-out (if any); returns the position after
        them."""
        found = _start(timeline, i)
        if found is None:
            return i + 1
        units, first = [found[0]], found[1]
        self._made_by(inst, found[0][0], first)
        j = i + len(found[0])
        turn = bisect_right(turns, timeline[i].t_ns) if turns else 0
        running_until = first.end_ns  # the latest end of the children started so far
        while j < len(timeline) and (not turns or bisect_right(turns, timeline[j].t_ns) == turn):
            found = _start(timeline, j)
            if found is None:
                break
            events, child = found
            if child.start_ns >= running_until and not _same_step(child, first):
                break
            units.append(events)
            self._made_by(inst, events[0], child)
            running_until = max(running_until, child.end_ns)
            j += len(events)
        if len(units) < 2:
            return j
        heads = [unit[0] for unit in units]
        self.calls[heads[0].index] = heads
        for unit in units:
            self.fanned[id(unit[-1].child)] = units[-1][-1]
        self.members.update(ev.index for unit in units for ev in unit)
        if i > 0:
            prev = timeline[i - 1]
            self.forks.append((ends_at.get(prev.index, [prev]), heads[1:]))
        self._ends(timeline, j, [unit[-1] for unit in units], ends_at)
        return j

    def _made_by(self, inst: Instance, head: Ev, child: Instance) -> None:
        """If ``child`` runs inside a tool call of ``inst``, its start ``head`` follows that call."""
        # Through spans that are nobody's (a framework's wrappers), not through another actor.
        around = enclosing(child.node.parent, K_TOOL) if child.node is not None else None
        if around is None:
            return
        result = self.closing.get(around.span.span_id)
        call = result.decision_ev if result is not None else None
        if call is not None and call.owner is inst and call.index < head.index:
            self.made_by[head.index] = call

    def _ends(self, timeline: list[Ev], j: int, ends: list[Ev], ends_at: dict[int, list[Ev]]) -> None:
        """A batch or fan-out ending before ``timeline[j]`` has ``ends``: they lead to that event."""
        ends_at[timeline[j - 1].index] = ends
        if j < len(timeline):
            self.joins.append((ends, timeline[j]))


def _same_step(a: Instance, b: Instance) -> bool:
    """Whether two instances are LangGraph nodes of one step (``langgraph.step``)."""
    if a.node is None or b.node is None:
        return False
    step = a.node.span.attributes.get(sc.LANGGRAPH_STEP)
    return step is not None and step == b.node.span.attributes.get(sc.LANGGRAPH_STEP)


def _start(timeline: list[Ev], i: int) -> tuple[list[Ev], Instance] | None:
    """The start of a child at ``timeline[i]`` (its spawn, after its own decision) and the child, if any."""
    ev = timeline[i]
    if ev.type == "spawn":
        return ([ev], ev.child) if ev.child is not None else None
    if ev.type != "orchestrator_decision" or i + 1 >= len(timeline):
        return None
    spawn = timeline[i + 1]
    if spawn.type != "spawn" or spawn.decision_ev is not ev or spawn.child is None:
        return None
    # A decision carried out by several spawns is what they all follow, not a part of one of them.
    if i + 2 < len(timeline) and timeline[i + 2].decision_ev is ev:
        return None
    return [ev, spawn], spawn.child
