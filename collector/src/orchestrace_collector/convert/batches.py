"""The tool calls one model call asked for at once (a batch), found once for the edges and the turns.

Calls made after the same model call of their caller form a batch (a caller without model calls: calls that
overlap in time), with their results. Within a batch the order of calls and results is a race between
threads, so no rule may depend on it: the edges fork before the batch and join after it (``edges.py``), and
the model call's tokens count on the first of its calls by tool and input (``turns.py``). Two runs of one
program then give the same trace however the race went.

Needs the instances' timelines and their model calls' start times (``Instance.turn_starts``).
"""

from __future__ import annotations

from bisect import bisect_right

from .actors import Actors, Instance
from .events import Ev


class Batches:
    """Every instance's timeline split into batches, and what comes before and after each."""

    __slots__ = ("after", "before", "calls", "joins", "members")

    def __init__(self, actors: Actors) -> None:
        #: index of a batch's first call -> the calls of the batch, in trace order
        self.calls: dict[int, list[Ev]] = {}
        #: tool_call index -> what its batch follows: the caller's event before it, or every result (and
        #: unanswered call) of the batch right before it
        self.before: dict[int, list[Ev]] = {}
        self.after: dict[int, Ev] = {}  # batch member index -> the caller's event after its batch
        self.members: set[int] = set()  # indices of events in a batch of more than one call
        #: batches of more than one call followed by an event: (the results and unanswered calls, that event)
        self.joins: list[tuple[list[Ev], Ev]] = []
        for inst in actors.instances:
            self._split(inst)

    def _split(self, inst: Instance) -> None:
        timeline = inst.timeline
        turns = inst.turn_starts
        ends_at: dict[int, list[Ev]] = {}  # last member's index -> the ends of a batch of several calls
        i = 0
        while i < len(timeline):
            if timeline[i].type != "tool_call":
                i += 1
                continue
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
                ends_at[batch[-1].index] = ends
                if j < len(timeline):
                    self.joins.append((ends, timeline[j]))
            i = j
