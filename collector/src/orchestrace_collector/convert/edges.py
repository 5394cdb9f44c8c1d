"""Edges between numbered events (see README.md in this package for the rules).

Every rule is linear in the number of events: "the next event of X after e" is a binary search in X's
timeline. ``safety_flow`` edges follow content (``provenance.py``); only a ``safety_event`` naming its source
gets one here.
"""

from __future__ import annotations

from bisect import bisect_right

from .actors import Instance
from .batches import Batches
from .events import Ev, EventSet
from .kinds import EdgeType

EdgeRec = tuple[int, int, EdgeType]  # (src index, dst index, type)


class _Timelines:
    __slots__ = ("positions", "timelines")

    def __init__(self, events: EventSet) -> None:
        self.timelines = events.timelines
        self.positions: dict[int, list[int]] = {}

    def next_after(self, inst: Instance, ev: Ev) -> Ev | None:
        """The first event of ``inst``'s timeline that comes after ``ev`` in trace order."""
        timeline = self.timelines[inst.index]
        if not timeline:
            return None
        pos = self.positions.get(id(inst))
        if pos is None:
            pos = self.positions[id(inst)] = [e.index for e in timeline]
        i = bisect_right(pos, ev.index)
        return timeline[i] if i < len(timeline) else None


def build_edges(
    events_set: EventSet, batches: Batches, flows: list[EdgeRec]
) -> list[EdgeRec]:
    """Every edge once, sorted by source then destination; ``flows``: the ``safety_flow`` edges of content
    (``provenance.py``). The typed rules below never produce the same edge twice; a temporal edge is left out
    where a typed edge already links the same two events.

    Within a batch or a fan-out (``batches.py``) no edge follows the race between threads: every call or
    start follows the event before it (a fork), every result or start leads to the event after it (a join),
    and a return or a message into it leads to each of its calls or starts."""
    # ``edges.append`` where an edge is made, not a bound method kept in a variable or a closure: compiled,
    # those are called generically, the list's own append natively.
    edges: list[EdgeRec] = list(flows)
    timelines = _Timelines(events_set)
    by_instance = events_set.timelines

    for ev in events_set.events:
        kind = ev.type
        if kind == "spawn":
            if ev.decision_ev is not None:
                edges.append((ev.decision_ev.index, ev.index, "spawn"))
            for decision in ev.also_decided or ():
                edges.append((decision.index, ev.index, "spawn"))
            child = by_instance[ev.child.index] if ev.child is not None else None
            if child:  # every call of the batch it opens with
                for first in batches.calls.get(child[0].index, child[:1]):
                    edges.append((ev.index, first.index, "causal"))
        elif kind == "tool_call":
            for dep in batches.before.get(ev.index, ()):
                edges.append((dep.index, ev.index, "tool_dependency"))
        elif kind == "tool_result":
            if ev.decision_ev is not None:
                edges.append((ev.decision_ev.index, ev.index, "return"))
        elif kind == "return":
            parent = ev.owner.parent
            nxt = timelines.next_after(parent, batches.returns_after(ev)) if parent is not None else None
            if nxt is not None:
                _into(ev, nxt, batches, "return", edges)
        elif kind == "message":
            if ev.recipient is not None:
                nxt = timelines.next_after(ev.recipient, ev)
                if nxt is not None:
                    _into(ev, nxt, batches, "message", edges)
        elif kind == "safety_event" and ev.source is not None:
            origin = events_set.tool_calls.get(ev.source) or events_set.closing.get(ev.source)
            if origin is not None and origin.index < ev.index:
                edges.append((origin.index, ev.index, "safety_flow"))
    _aggregate_edges(events_set, edges)
    made_by = batches.made_by
    for head, call in made_by.items():  # an agent called as a tool: its start follows its own call
        edges.append((call.index, head, "causal"))
    # Typed edges by ``src * n + dst``: a number, not a tuple made for every pair looked up.
    n = len(events_set.events)
    typed = {src * n + dst for src, dst, _ in edges}
    members = batches.members
    for timeline in events_set.timelines:  # consecutive events, but none that follows a race inside a batch
        for k in range(1, len(timeline)):
            if timeline[k - 1].index not in members:
                _temporal(timeline[k - 1], timeline[k], n, typed, made_by, edges)
    for ends, nxt in batches.joins:
        for ev in ends:
            _temporal(ev, nxt, n, typed, made_by, edges)
    for follows, starts in batches.forks:
        for ev in follows:
            for start in starts:
                _temporal(ev, start, n, typed, made_by, edges)
    edges.sort()
    return edges


def _temporal(src: Ev, dst: Ev, n: int, typed: set[int], made_by: dict[int, Ev],
              edges: list[EdgeRec]) -> None:
    """A ``temporal`` edge, unless a typed edge links the same two events or ``dst`` starts an agent called as
    a tool (its start follows its own call)."""
    if src.index * n + dst.index not in typed and dst.index not in made_by:
        edges.append((src.index, dst.index, "temporal"))


def _into(src: Ev, nxt: Ev, batches: Batches, kind: EdgeType, edges: list[EdgeRec]) -> None:
    """``src`` -> ``nxt``, the next event of a timeline after it; when ``nxt`` opens a batch or a fan-out,
    -> each of its calls or starts after ``src`` (which of them came first was a race)."""
    calls = batches.calls.get(nxt.index)
    if calls is None:
        edges.append((src.index, nxt.index, kind))
        return
    for dst in calls:
        if dst.index > src.index:
            edges.append((src.index, dst.index, kind))


def _aggregate_edges(events_set: EventSet, edges: list[EdgeRec]) -> None:
    """Linked inputs when the aggregate names them; else the returns of the aggregating instance's children
    that ended since its previous aggregate."""
    pending_returns: dict[int, tuple[list[Ev], list[int]]] = {}
    for agg in sorted(events_set.aggregates, key=lambda e: e.index):
        if agg.inputs:
            sources = {events_set.closing.get(span_id) for span_id in agg.inputs}  # a span linked twice
            for src in sorted((e for e in sources if e is not None and e is not agg), key=lambda e: e.index):
                edges.append((src.index, agg.index, "aggregate"))
            continue
        owner = agg.owner
        state = pending_returns.get(id(owner))
        if state is None:
            returns = (events_set.ret(c) for c in owner.children)
            rets = sorted((ret for ret in returns if ret is not None), key=lambda e: e.index)
            state = pending_returns[id(owner)] = (rets, [0])
        rets, cursor = state
        while cursor[0] < len(rets) and rets[cursor[0]].index < agg.index:
            edges.append((rets[cursor[0]].index, agg.index, "aggregate"))
            cursor[0] += 1
