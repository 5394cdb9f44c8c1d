"""One episode's spans -> one orchestration ``Trace`` plus its ``Turn`` samples and captured contents."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orchestrace_semconv as sc

from ..spans import Span
from .actors import Actors, assign_instances
from .batches import Batches
from .classify import K_ACTOR
from .content import ContentStore
from .credit import Credit, Shape, assign, causal_path, check_strategy, uncredited
from .edges import EdgeRec, build_edges
from .events import Ev, EventSet, build_events
from .forest import Forest, build_forest
from .gcpause import gc_paused
from .kinds import Decision, EventType
from .metrics import active_wall_clock_ns, recorded_waits, structural_metrics
from .provenance import Provenance, trace_provenance
from .rewards import RewardSet, collect_rewards, rejected_metrics, reward_value
from .topology import infer_topology
from .turns import TurnIndex, TurnRec, build_turns, embedding_tokens, link_turns, turn_starts
from .written import Episode, MessageRecord, TraceRecord, TurnRecord, message_record

_NS: Final = 1e9


def convert_episode(spans: Sequence[Span], *, task_id: str | None = None, credit: str = "causal") -> Episode:
    """Convert the spans of one episode (one or several OTel traces, possibly incomplete) to a trace.

    Raises ``ValueError`` when the spans yield no event (a trace needs at least one).
    """
    with gc_paused():  # see gcpause.py: why, and why it is safe with other threads
        return _convert(spans, task_id, credit)


def _convert(spans: Sequence[Span], task_id: str | None, credit: str) -> Episode:
    check_strategy(credit)
    if not spans:
        raise ValueError("no spans: a trace needs at least one event")
    forest = build_forest(spans)
    actors = assign_instances(forest, _service_name(forest))
    try:
        return _stages(forest, actors, task_id, credit)
    finally:
        _release(forest, actors)


def _release(forest: Forest, actors: Actors) -> None:
    """Break the span tree's and the actor tree's reference cycles (parent <-> children), so that reference
    counting frees them when the conversion returns instead of a pass of the cyclic collector over all of
    them (the other stages' values hold no cycle)."""
    for node in forest.nodes:
        node.parent = None
        node.children.clear()
    for inst in actors.instances:
        inst.parent = None
        inst.children.clear()


def _stages(forest: Forest, actors: Actors, task_id: str | None, credit: str) -> Episode:
    """The stages after the forest of classified spans and its actor assignment, in order: each takes values
    earlier ones returned and returns a new one; none writes into another's records. (``store`` collects
    the captured contents the events and the turns refer to.)"""
    store = ContentStore()
    events = build_events(forest, actors, store)  # sorted and numbered, with each instance's timeline
    if not events.events:
        raise ValueError(
            f"{len(forest.nodes)} span(s) yielded no orchestration event (no actor, tool or orchestration "
            "span): a trace needs at least one event"
        )
    turns = build_turns(events.model_nodes, actors, store)  # the model calls, in start order
    batches = Batches(actors, events, turn_starts(turns, len(actors.instances)))
    linked = link_turns(turns, events, batches)  # each turn's events, each event's tokens
    provenance = trace_provenance(events.events, turns, linked, store.contents)
    edges = build_edges(events, batches, provenance.flows)
    rewards = collect_rewards(events, actors, turns, linked)
    types, decisions = [ev.type for ev in events.events], [ev.decision for ev in events.events]
    on_path = causal_path(edges, types, decisions)
    credited = assign(_credit_shape(types, decisions, events.events, edges, turns, linked), on_path,
                      rewards.channels.values(), credit) if rewards.channels else uncredited(len(turns))
    return _written(_Stages(forest, actors, events, turns, linked, provenance, edges, rewards, on_path,
                            credited, store.contents), task_id)


@dataclass(frozen=True, slots=True)
class _Stages:
    """What the stages returned, which the written trace and turns are made of."""

    forest: Forest
    actors: Actors
    events: EventSet
    turns: list[TurnRec]
    linked: TurnIndex
    provenance: Provenance
    edges: list[EdgeRec]
    rewards: RewardSet
    on_path: set[int]  # positions of the events the answer depends on
    credited: Credit
    contents: dict[str, str]


def _credit_shape(types: list[EventType], decisions: list[Decision | None], events: list[Ev],
                  edges: list[EdgeRec], turns: list[TurnRec], linked: TurnIndex) -> Shape:
    """What the credit engine reads of the episode, as it is written."""
    return Shape(
        types,
        decisions,
        [ev.actor.name if ev.actor is not None else ev.agent for ev in events],
        edges,
        [{ev.index for ev in linked_events} for linked_events in linked.events],
        [(t.owner.name, t.owner.activation or None) for t in turns],
    )


def _written(st: _Stages, task_id: str | None) -> Episode:
    """The trace's and the turns' records (the fields of ``model.Trace`` and ``model.Turn``)."""
    forest, events, turn_recs, edges, credited = st.forest, st.events.events, st.turns, st.edges, st.credited
    t0 = min(n.start_ns for n in forest.nodes)
    root_attrs = _episode_attributes(forest)
    trace_id = str(root_attrs.get(sc.ORCH_EPISODE_ID) or forest.roots[0].span.trace_id)
    task = task_id or root_attrs.get(sc.ORCH_TASK_ID) or trace_id
    system = root_attrs.get(sc.ORCH_SYSTEM) or _service_name(forest)
    active = active_wall_clock_ns(forest)
    metrics = structural_metrics(forest, events, edges, len(turn_recs), active)
    metrics.update(rejected_metrics(st.rewards.rejected))
    success = reward_value(root_attrs.get(sc.ORCH_TASK_SUCCESS))
    if success is not None:
        metrics["task_success"] = success
    agents = {ev.agent for ev in events if ev.type == "return"}
    if agents:
        # The agents the events on the path count for (a tool result for the tool's caller), read inline: a
        # call less per event.
        on_path = [events[i] for i in st.on_path]
        counted = {ev.owner.label if ev.type == "tool_result" else ev.agent for ev in on_path}
        metrics["agent_utilization"] = len(counted & agents) / len(agents)

    ids = [ev.id for ev in events]
    trace: TraceRecord = {"trace_id": trace_id, "task_id": str(task)}
    if system:
        trace["system"] = str(system)
    trace["topology"] = infer_topology(st.actors, events, root_attrs.get(sc.ORCH_TOPOLOGY))
    event_rewards, untrusted = st.rewards.event_rewards, st.provenance.untrusted
    tokens, shares = st.linked.tokens, credited.events  # by event position, as ``events``
    trace["events"] = [
        _event(ev, t0, tokens[i], event_rewards.get(ev.index) if event_rewards else None,
               shares[i] if shares else None, False if untrusted and ev.index in untrusted else ev.trusted)
        for i, ev in enumerate(events)  # compiled, a native loop (a zip is iterated generically)
    ]
    trace["edges"] = [{"src": ids[s], "dst": ids[d], "type": kind} for s, d, kind in edges]
    trace["rewards"] = {**credited.channels, **credited.agents}
    trace["costs"] = {
        "tokens": float(sum(t.tokens for t in turn_recs)),
        "wall_clock_s": active / _NS,  # active time: idle gaps (a resume's wait, a late span's) left out
        "tool_calls": float(sum(1 for ev in events if ev.type == "tool_call")),
        "messages": float(sum(1 for ev in events if ev.type == "message")),
    }
    embedded = embedding_tokens(forest.embeddings) if forest.embeddings else 0
    if embedded:
        trace["costs"]["embedding_tokens"] = float(embedded)
    trace["metrics"] = metrics
    shared: dict[int, MessageRecord] = {}
    tainted, linked = st.provenance.tainted, st.linked.events
    turns = [
        _turn(t, trace_id, str(task), t0, linked[k], credited.turns[k], k in tainted, shared)
        for k, t in enumerate(turn_recs)
    ]
    return Episode(trace, turns, st.contents)


def _service_name(forest: Forest) -> str:
    for node in forest.roots or forest.nodes:
        name = node.span.resource.get(sc.SERVICE_NAME)
        if name:
            return str(name)
    return "agent"


def _episode_attributes(forest: Forest) -> dict[str, object]:
    """Task-level attributes (task id, topology, success, ...): the roots' first, then other actors'."""
    keys = (sc.ORCH_EPISODE_ID, sc.ORCH_TASK_ID, sc.ORCH_SYSTEM, sc.ORCH_TOPOLOGY, sc.ORCH_TASK_SUCCESS)
    found: dict[str, object] = {}
    for node in [*forest.roots, *(n for n in forest.nodes if n.kind is K_ACTOR)]:
        attrs = node.span.attributes
        for key in keys:
            if key not in found and attrs.get(key) is not None:
                found[key] = attrs[key]
        if len(found) == len(keys):
            break
    return found


def _seconds(t_ns: int, t0: int) -> float:
    t = (t_ns - t0) / _NS
    return t if t > 0.0 else 0.0  # clock skew between processes never makes t negative


#: The events that stand for a span's time: what ``examples/recompute_trace.py`` rebuilds busy time from.
_LASTING: Final[frozenset[EventType]] = frozenset({"return", "tool_call", "aggregate"})


def _activation_waits(ev: Ev, t0: int) -> list[float] | None:
    """A ``return``'s activation's recorded waits for work it handed out (its spans' ``orchestrace.waits``),
    flat ``[start, end, ...]`` seconds; None when none of its spans records them."""
    first, last = ev.owner.node, ev.owner.last
    if (first is None or sc.ORCH_WAITS not in first.span.attributes) and (
            last is None or sc.ORCH_WAITS not in last.span.attributes):
        return None  # most returns: no span of theirs handed work out (no call, list or generator made)
    nodes = [n for n in dict.fromkeys((first, last)) if n is not None]
    waits = (recorded_waits(n.span.attributes.get(sc.ORCH_WAITS)) for n in nodes)
    recorded = [w for w in waits if w is not None]
    if not recorded:
        return None
    return [_seconds(t, t0) for pairs in recorded for pair in pairs for t in pair]


def _event(ev: Ev, t0: int, tokens: int | None, reward: float | None, credit: float | None,
           trusted: bool | None) -> dict[str, Any]:
    """The event's record: ``model.Event``'s fields in declaration order, those with a value (``tokens`` of
    the turns, ``reward`` and ``credit``, ``trusted`` after provenance: the later stages')."""
    actor = ev.actor
    # Seconds since ``t0``, inline (no call per event), never negative: a span event's time may come before
    # every span's start (another process's clock). The span starts and ends below never do: ``t0`` is the
    # earliest start, and a span's end is never before its start (``forest``).
    t = (ev.key[0] - t0) / _NS
    out: dict[str, Any] = {
        "id": ev.id,
        "t": t if t > 0.0 else 0.0,
        "type": ev.type,
        "agent": actor.name if actor is not None else ev.agent,
    }
    if ev.role is not None:
        out["role"] = ev.role
    if ev.frm is not None:
        out["from"] = ev.frm
    if ev.to is not None:
        out["to"] = ev.to
    if ev.tool is not None:
        out["tool"] = ev.tool
    if ev.content_ref is not None:
        out["content_ref"] = ev.content_ref
    if trusted is not None:
        out["trusted"] = trusted
    if actor is not None:
        out["activation"] = actor.activation
    if ev.frm_act is not None:
        out["from_activation"] = ev.frm_act
    if ev.to_act is not None:
        out["to_activation"] = ev.to_act
    if ev.decision is not None:
        out["decision"] = ev.decision
    if ev.options is not None:
        out["options"] = ev.options
    if ev.label is not None:
        out["label"] = ev.label
    if ev.reason is not None:
        out["reason"] = ev.reason
    if ev.handoff is not None:
        out["handoff"] = ev.handoff
    if ev.severity is not None:
        out["severity"] = ev.severity
    if ev.source is not None:
        out["source"] = ev.source
    if ev.agent_id is not None:
        out["agent_id"] = ev.agent_id
    if ev.t_end_ns is not None:
        out["t_end"] = (ev.t_end_ns - t0) / _NS
    if ev.type == "return":
        out["t_start"] = (ev.owner.start_ns - t0) / _NS
        waits = _activation_waits(ev, t0)
        if waits is not None:
            out["waits"] = waits
    node = ev.node
    if ev.type in _LASTING:
        # Its span ran beside its parent (handed to a worker): not time its parent spent on it. Read inline,
        # as for a turn: no call per event.
        lasting = ev.owner.node if ev.type == "return" else node
        if lasting is not None and lasting.span.attributes.get(sc.ORCH_CONCURRENT) is True:
            out["concurrent"] = True
    if node is not None:
        out["span_id"] = node.span.span_id
        out["otel_trace_id"] = node.span.trace_id
    if tokens is not None:
        out["tokens"] = tokens
    if reward is not None:
        out["reward"] = reward
    if credit is not None:
        out["credit"] = credit
    if node is not None and node.incomplete:
        out["incomplete"] = True
    if ev.error is not None:
        out["error"] = ev.error
    if ev.error_type is not None:
        out["error_type"] = ev.error_type
    return out


def _record(message: dict[str, Any], shared: dict[int, MessageRecord]) -> MessageRecord:
    found = shared.get(id(message))  # the messages are alive (in the turns) as long as ``shared``
    if found is None:
        found = shared[id(message)] = message_record(message)
    return found


def _turn(rec: TurnRec, trace_id: str, task_id: str, t0: int, events: list[Ev], credit: dict[str, float],
          tainted: bool,
          shared: dict[int, MessageRecord]) -> TurnRecord:
    """The turn's record: ``model.Turn``'s fields in declaration order, those with a value. ``shared``: the
    records of the messages seen so far, by identity: a message of a history stored once is in the prompt of
    every later turn, and stays one record (the turns of a long conversation are not copies of it)."""
    owner = rec.owner
    out: TurnRecord = {
        "trace_id": trace_id,
        "task_id": task_id,
        "turn_id": rec.node.span.span_id,
        "agent": owner.name,
    }
    if owner.activation:
        out["activation"] = owner.activation
    if owner.agent_id is not None:
        out["agent_id"] = owner.agent_id
    if rec.model is not None:
        out["model"] = rec.model
    if rec.provider is not None:
        out["provider"] = rec.provider
    out["t"] = (rec.node.start_ns - t0) / _NS  # its span's: at or after t0 (see ``_event``)
    out["t_end"] = (rec.node.end_ns - t0) / _NS
    if rec.node.span.attributes.get(sc.ORCH_CONCURRENT) is True:  # ran beside its parent (see ``_event``)
        out["concurrent"] = True
    if rec.input_tokens is not None:
        out["input_tokens"] = rec.input_tokens
    if rec.output_tokens is not None:
        out["output_tokens"] = rec.output_tokens
    if rec.input_ref is not None:
        out["input_ref"] = rec.input_ref
    if rec.output_ref is not None:
        out["output_ref"] = rec.output_ref
    out["event_ids"] = [ev.id for ev in events]
    if credit:
        out["reward"] = sum(credit.values())
        out["credit"] = credit
    if rec.prompt is not None:
        out["prompt"] = [_record(m, shared) for m in rec.prompt]
    if rec.completion is not None:
        out["completion"] = [_record(m, shared) for m in rec.completion]
    if rec.prompt_incomplete:
        out["prompt_incomplete"] = True
    if tainted:
        out["tainted"] = True
    if rec.error is not None:
        out["error"] = rec.error
    if rec.error_type is not None:
        out["error_type"] = rec.error_type
    if rec.details:
        out.update(rec.details)  # the remaining fields, in declaration order (see ``turns._details``)
    return out
