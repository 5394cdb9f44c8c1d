"""Provenance by content: where untrusted content went (see README.md in this package, ``safety_flow``).

An untrusted ``tool_result`` (``trusted: false``) is a *carrier* of its content. Content is followed by its
ref, and, where it was captured, by its text:

- an event whose content is a carrier's (a message or a spawn payload passing the result on, a tool call
  whose arguments are it or hold it as one argument, an agent returning it) is untrusted and the carrier
  of that content from then on, linked by ``safety_flow`` from the carrier it came from;
- a model call whose prompt holds a carrier's content (its input ref, or one message's text) is
  ``tainted``; what it said (its completion) carries the same taint, and the events it led to (its
  ``Turn.event_ids``: the calls it asked for, messages, spawns, its agent's return) are untrusted, linked
  from the carriers its prompt held that its instance had not read before (else from that instance's last
  untrusted event: the taint stayed in its context). Their own content is not tainted by that alone (an
  agent's fixed "done" says nothing of the page): only the content of untrusted results and of tainted
  replies is followed;
- a model call whose prompt was not captured is assumed to hold what its agent received since its previous
  call: its own untrusted tool results and untrusted messages to it.

Nothing follows event order alone: a tool call after an untrusted result that neither holds its content nor
was asked for by a model call that read it is not linked. Each consumer gets edges from at most
``SAFETY_FLOW_FANOUT`` carriers, and each tainted call links at most that many events, so the edges stay
linear in the events. A result's own trust is its tool's: results and despawns are never marked, and a
``safety_event`` gets its edge from the source it names (``edges.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from .events import Ev
from .kinds import EdgeType, EventType
from .turns import TurnIndex, TurnRec

#: At most this many carriers link into one event, and this many events of one tainted model call.
SAFETY_FLOW_FANOUT: Final = 32
#: Events whose trust is not their agent's content: a tool's result, a parent's bookkeeping, a human's act,
#: a finding (linked from the source it names).
_NOT_CONSUMERS: Final[frozenset[EventType]] = frozenset(
    {"tool_result", "despawn", "human_intervention", "safety_event"})

FlowRec = tuple[int, int, EdgeType]


@dataclass(frozen=True, slots=True)
class Provenance:
    flows: list[FlowRec]  # the ``safety_flow`` edges, sorted
    untrusted: frozenset[int]  # positions of the events found untrusted (beside the untrusted tool results)
    tainted: frozenset[int]  # positions of the tainted turns


_NONE = Provenance([], frozenset(), frozenset())


class _Taint:
    """The carriers of each tainted content, by ref and by captured text."""

    __slots__ = ("by_ref", "by_text", "contents")

    def __init__(self, contents: dict[str, str]) -> None:
        self.contents = contents
        self.by_ref: dict[str, list[Ev]] = {}
        self.by_text: dict[str, list[Ev]] = {}

    def carry(self, ref: str | None, texts: Iterable[str], carriers: list[Ev]) -> None:
        if ref:
            self.by_ref[ref] = carriers
            text = self.contents.get(ref)
            if text:
                self.by_text[text] = carriers
        for text in texts:
            if text:
                self.by_text[text] = carriers

    def of_event(self, ev: Ev) -> list[Ev]:
        ref = ev.content_ref
        if not ref:
            return []
        found = self.by_ref.get(ref)
        if found is not None:
            return found
        text = self.contents.get(ref)
        if not text or not self.by_text:
            return []
        found = self.by_text.get(text)
        if found is not None:
            return found
        if ev.type == "tool_call":  # one argument passed on as it was
            return _first([self.by_text.get(v, []) for v in _arguments(text)])
        return []

    def of_turn(self, turn: TurnRec) -> list[Ev]:
        assert turn.prompt is not None
        found = [self.by_ref.get(turn.input_ref, [])] if turn.input_ref else []
        if self.by_text:
            for message in turn.prompt:
                content = message.get("content")
                if isinstance(content, str) and content:
                    found.append(self.by_text.get(content, []))
        return _first(found)


def _first(groups: list[list[Ev]]) -> list[Ev]:
    """The carriers of ``groups``, each once, in trace order (the latest ``SAFETY_FLOW_FANOUT``). Every list
    of carriers ``_Taint`` holds is already that (one event, or made here): one such alone is only sliced."""
    seen: dict[int, Ev] = {}
    for group in groups:
        for ev in group:
            seen[ev.index] = ev
    return [seen[i] for i in sorted(seen)[-SAFETY_FLOW_FANOUT:]]


def _arguments(text: str) -> list[str]:
    """The string values of a tool call's JSON arguments (an object's values, an array's items)."""
    if not text or text[0] not in "{[":
        return []
    try:
        parsed = json.loads(text)
    except ValueError:
        return []
    values = parsed.values() if isinstance(parsed, dict) else parsed if isinstance(parsed, list) else ()
    return [v for v in values if isinstance(v, str) and v]


def trace_provenance(events: list[Ev], turns: list[TurnRec], linked: TurnIndex,
                     contents: dict[str, str]) -> Provenance:
    """The untrusted events, the tainted turns and the ``safety_flow`` edges (``(src, dst, type)`` by
    position). ``events`` sorted and numbered, ``turns`` in start order, ``linked`` their events."""
    if not any(ev.trusted is False for ev in events):
        return _NONE
    untrusted: set[int] = set()
    tainted: set[int] = set()
    taint = _Taint(contents)
    flows: set[tuple[int, int]] = set()
    influenced: dict[int, list[Ev]] = {}  # event index -> carriers of the tainted call that led to it
    pending: dict[int, list[Ev]] = {}  # id(instance) -> untrusted results and messages it received
    seen: dict[int, set[int]] = {}  # id(instance) -> carriers its model calls have read
    last: dict[int, Ev] = {}  # id(instance) -> its latest untrusted event
    k = 0
    for ev in events:
        while k < len(turns) and turns[k].node.start_ns <= ev.t_ns:
            if _turn(turns[k], linked.events[k], taint, pending, seen, last, influenced):
                tainted.add(k)
            k += 1
        if ev.type == "tool_result":
            if ev.trusted is False:
                taint.carry(ev.content_ref, (), [ev])
                pending.setdefault(id(ev.owner), []).append(ev)
            continue
        if ev.type in _NOT_CONSUMERS:
            continue
        held = taint.of_event(ev)
        influencing = influenced.pop(ev.index, None)
        if not held and not influencing:
            continue  # carries nothing (most events): no ``_first`` call
        # ``held`` is carriers as ``_first`` gives them; ``influencing`` gathers several calls' sources.
        carriers = _first([held, influencing]) if influencing else held[-SAFETY_FLOW_FANOUT:]
        if not carriers:
            continue
        untrusted.add(ev.index)
        for src in carriers:
            if src.index < ev.index:
                flows.add((src.index, ev.index))
        if held:  # it carries the content on (what an influenced event says is its own: "done" is no page)
            taint.carry(ev.content_ref, (), [ev])
        last[id(ev.owner)] = ev
        if ev.type == "message" and ev.recipient is not None:
            pending.setdefault(id(ev.recipient), []).append(ev)
    for after in range(k, len(turns)):  # calls after the last event: tainted or not, they lead to nothing
        if _turn(turns[after], linked.events[after], taint, pending, seen, last, influenced):
            tainted.add(after)
    return Provenance([(src, dst, "safety_flow") for src, dst in sorted(flows)], frozenset(untrusted),
                      frozenset(tainted))


def _turn(turn: TurnRec, events: list[Ev], taint: _Taint, pending: dict[int, list[Ev]],
          seen: dict[int, set[int]], last: dict[int, Ev], influenced: dict[int, list[Ev]]) -> bool:
    """Follows a model call (``events``: those it links); whether it is tainted."""
    owner = id(turn.owner)
    received = pending.pop(owner, [])
    # ``received``: appended in trace order, each event once (``_first`` of it is its latest ones).
    carriers = taint.of_turn(turn) if turn.prompt is not None else received[-SAFETY_FLOW_FANOUT:]
    if not carriers:
        return False
    read = seen.setdefault(owner, set())
    new = [c for c in carriers if c.index not in read]
    read.update(c.index for c in new)
    sources = new or ([last[owner]] if owner in last else carriers)
    texts = [m["content"] for m in turn.completion or () if isinstance(m.get("content"), str)]
    taint.carry(turn.output_ref, texts, carriers)
    consumers = [ev for ev in events if ev.type not in _NOT_CONSUMERS][:SAFETY_FLOW_FANOUT]
    for ev in consumers:
        influenced.setdefault(ev.index, []).extend(sources)
    return True
