"""The span-to-event mapping (see README.md in this package for the table).

Events are built as slotted ``Ev`` records, sorted once by ``key`` and numbered ``e1..eN``; pydantic models
are made only at the very end. The sort key orders equal times deterministically: first the ends of spans that
lasted (inner before outer, then in start order); then, in depth-first span order, starts and point events,
each zero-length span's end coming right after its subtree; ``rank`` (a fixed per-type order) and the creation
order break the remaining ties.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

import orchestrace_semconv as sc

from ..spans import STATUS_ERROR, Attributes, Span, SpanEvent
from . import as_genai
from .actors import Actors, Instance
from .classify import (
    AGENT,
    HANDOFF,
    K_ACTOR,
    K_AGGREGATE,
    K_CREATE_AGENT,
    K_MODEL,
    K_TOOL,
    NODE,
    TOOL_NODE,
    WORKFLOW,
    foreign_send_task,
    foreign_step,
)
from .content import INPUT_CONTENT, OUTPUT_CONTENT, ContentStore
from .forest import Forest, Node
from .kinds import DECISIONS, Decision, EventType

RANK: Final[dict[EventType, int]] = {
    "orchestrator_decision": 0,
    "spawn": 1,
    "aggregate": 2,
    "message": 3,
    "human_intervention": 4,
    "safety_event": 5,
    "tool_call": 6,
    "tool_result": 7,
    "return": 8,
    "despawn": 9,
}
_EVENT_CONTENT: Final = (sc.ORCH_CONTENT,)
#: What another library's handoff span says, as orchestrace's own handoff delegate would.
_HANDOFF: Final[Attributes] = {sc.ORCH_HANDOFF: True, sc.ORCH_REASON: "handoff"}
#: A zero-length span's end sorts after the starts at its subtree's last position.
_AFTER_STARTS: Final = 1 << 30


@dataclass(slots=True, eq=False, init=False)
class Ev:
    key: tuple[int, int, int, int, int, int]  # (t_ns, phase, a, b, rank, seq): see the module docstring
    t_ns: int  # ``key[0]``, a field: read per event by later stages (a property was a call each time)
    type: EventType
    agent: str  # the instance label of ``actor`` (internal: written as its name), else a tool, ``human``
    owner: Instance  # whose timeline the event is on
    node: Node | None
    actor: Instance | None  # the instance whose event it is (written as its name and activation)
    role: str | None
    frm: str | None  # a stable name; ``frm_act`` the activation when it is an actor's
    to: str | None  # a stable name; ``to_act`` the activation when it names one instance
    frm_act: int | None
    to_act: int | None
    tool: str | None
    content_ref: str | None
    trusted: bool | None
    decision: Decision | None
    options: list[str] | None
    label: str | None
    reason: str | None
    handoff: bool | None
    severity: str | None  # safety_event
    agent_id: str | None
    t_end_ns: int | None
    error: bool | None
    error_type: str | None
    id: str
    index: int  # position in the sorted trace
    # --- structure used to build edges
    decision_ev: Ev | None  # spawn: its decision; tool_result: its tool_call
    also_decided: list[Ev] | None  # spawn: further decisions that chose the same activation
    child: Instance | None  # spawn: the instance it started
    recipient: Instance | None  # message
    inputs: list[str] | None  # aggregate: span ids of linked inputs
    source: str | None  # safety_event: tool call id or span id it names

    def __init__(
        self,
        key: tuple[int, int, int, int, int, int],
        type: EventType,
        agent: str,
        owner: Instance,
        node: Node | None,
    ) -> None:
        # Written out: mypyc compiles this one, where the dataclass's runs interpreted (a twentieth of the
        # collector's CPU before: an event or more per span).
        self.key = key
        self.t_ns = key[0]
        self.type = type
        self.agent = agent
        self.owner = owner
        self.node = node
        self.actor = None
        self.role = None
        self.frm = None
        self.to = None
        self.frm_act = None
        self.to_act = None
        self.tool = None
        self.content_ref = None
        self.trusted = None
        self.decision = None
        self.options = None
        self.label = None
        self.reason = None
        self.handoff = None
        self.severity = None
        self.agent_id = None
        self.t_end_ns = None
        self.error = None
        self.error_type = None
        self.id = ""
        self.index = -1
        self.decision_ev = None
        self.also_decided = None
        self.child = None
        self.recipient = None
        self.inputs = None
        self.source = None


#: How many unmatched explicit spawns of a name are searched for one whose content is an instance's input.
MATCH_LOOKAHEAD: Final = 64


@dataclass(slots=True)
class _Spawn:
    """An explicit spawn/delegate (span event or ``create_agent`` span) waiting to be matched to an actor."""

    t_ns: int
    node: Node
    owner: Instance
    name: str
    attrs: Attributes
    decision: Decision
    matched: bool = False
    decision_ev: Ev | None = None  # the routing decision recorded just before it, which it carries out


@dataclass(frozen=True, slots=True)
class EventSet:
    """The events stage's value: the events sorted and numbered, and what later stages look up in them."""

    events: list[Ev]  # sorted by ``key``, ``index`` their position, ``id`` ``e<index + 1>``
    model_nodes: list[Node]
    evaluations: list[tuple[Node, SpanEvent]]
    closing: dict[str, Ev]  # span id -> the event that closes it (return, tool_result, aggregate)
    tool_calls: dict[str, Ev]  # gen_ai.tool.call.id -> tool_result
    aggregates: list[Ev]
    timelines: list[list[Ev]]  # by ``Instance.index``: its own events (``owner``), in trace order
    returns: dict[int, Ev]  # id(instance) -> the ``return`` that closes it

    def ret(self, inst: Instance) -> Ev | None:
        return self.returns.get(id(inst))


def _key(ev: Ev) -> tuple[int, int, int, int, int, int]:
    # A function, not ``attrgetter``: compiled, it reads the field natively (the getter looked it up).
    return ev.key


class _Builder:
    def __init__(self, actors: Actors, store: ContentStore) -> None:
        self.actors = actors
        self.store = store
        self.seq = 0
        self.events: list[Ev] = []
        self.closing: dict[str, Ev] = {}
        self.tool_calls: dict[str, Ev] = {}
        self.aggregates: list[Ev] = []
        self.returns: dict[int, Ev] = {}  # id(instance) -> its return
        # The last orchestrace.decision of kind spawn/delegate on the span being read, with its targets:
        # explicit spawns of those targets that follow it carry it out (one decision, several spawns for a
        # fan-out).
        self.routing: tuple[Node, frozenset[str], str, Ev] | None = None
        self.spawns_of: dict[int, int] = {}  # id(decision) -> spawns it led to
        # Routing decisions naming one target, by target name, in trace order: the decision of the next
        # activation of that target started without an explicit spawn (see ``_chosen``).
        self.routes: dict[str, list[Ev]] = {}
        self.used: set[int] = set()  # id() of routing decisions that led to a spawn
        self.route_start: dict[str, int] = {}  # by target name: routes before this index are all taken

    def add(
        self,
        type_: EventType,
        t_ns: int,
        phase: int,
        a: int,
        b: int,
        owner: Instance,
        node: Node | None,
        agent: str | None = None,
    ) -> Ev:
        """An event whose sort key starts ``(t_ns, phase, a, b)`` (see the module docstring)."""
        self.seq += 1
        ev = Ev((t_ns, phase, a, b, RANK[type_], self.seq), type_, agent or owner.label, owner, node)
        if agent is None:
            ev.actor = owner
            ev.role = owner.role
            ev.agent_id = owner.agent_id
        self.events.append(ev)
        return ev

    def at(self, type_: EventType, t_ns: int, node: Node, owner: Instance, agent: str | None = None) -> Ev:
        """An event at ``t_ns`` among the starts and point events, in ``node``'s depth-first place."""
        return self.add(type_, t_ns, 1, node.pre, 0, owner, node, agent)

    def at_end(self, type_: EventType, node: Node, end_ns: int, start_ns: int, owner: Instance,
               agent: str | None = None) -> Ev:
        """An event at the end of ``node``: before the starts at that time when the span lasted (inner before
        outer, then in start order), else right after the starts of its subtree."""
        if start_ns < end_ns:
            return self.add(type_, end_ns, 0, -node.depth, node.pre, owner, node, agent)
        return self.add(type_, end_ns, 1, node.post, _AFTER_STARTS - node.depth, owner, node, agent)


def build_events(forest: Forest, actors: Actors, store: ContentStore) -> EventSet:
    b = _Builder(actors, store)
    model_nodes: list[Node] = []
    evaluations: list[tuple[Node, SpanEvent]] = []
    spawns: list[_Spawn] = []
    starts: list[int] | None = None  # the instances' start times, when a handoff needs them
    fan_ins = _fan_ins(actors)
    owners = actors.owners  # by node.pre, the node's position in forest.nodes
    for node in forest.nodes:
        owner = owners[node.pre]
        kind = node.kind
        attrs = node.span.attributes
        if kind is K_TOOL:
            _tool(b, node, owner)
        elif kind is K_MODEL:
            model_nodes.append(node)
        elif kind is K_AGGREGATE or (
            kind is K_ACTOR and (_aggregate_links(node) or id(node) in fan_ins)
        ):
            ev = b.at("aggregate", node.start_ns, node, owner)
            ev.t_end_ns = node.end_ns
            ev.content_ref = store.ref(attrs, sc.ORCH_OUTPUT_REF, OUTPUT_CONTENT)
            ev.inputs = _aggregate_links(node) or fan_ins.get(id(node))
            _reason(ev, attrs)
            b.aggregates.append(ev)
            if kind is K_AGGREGATE:
                b.closing[node.span.span_id] = ev
            _error(ev, node)
        elif kind is K_CREATE_AGENT:
            target = node.name
            if node.sub_kind == HANDOFF:
                if not target:
                    starts = starts if starts is not None else [i.start_ns for i in actors.instances]
                    target = _next_beside(actors.instances, starts, owner, node.start_ns)
                spawns.append(_Spawn(node.start_ns, node, owner, target, _HANDOFF, sc.DECISION_DELEGATE))
            else:
                spawns.append(_Spawn(node.start_ns, node, owner, target, attrs, sc.DECISION_SPAWN))
        for event in node.span.events:
            _span_event(b, event, node, owner, spawns, evaluations)

    _spawns_and_returns(b, actors, spawns)
    if not b.events and forest.nodes:
        _stand_in_return(b, model_nodes or forest.nodes)
    events = b.events
    events.sort(key=_key)
    timelines: list[list[Ev]] = [[] for _ in actors.instances]
    for i, ev in enumerate(events):
        ev.index = i
        ev.id = f"e{i + 1}"
        timelines[ev.owner.index].append(ev)
    return EventSet(events, model_nodes, evaluations, b.closing, b.tool_calls, b.aggregates, timelines,
                    b.returns)


def _next_beside(instances: list[Instance], starts: list[int], owner: Instance, t_ns: int) -> str:
    """The name of the first instance to start at or after ``t_ns`` beside ``owner`` (same parent) or under
    it: whom a handoff that does not say it hands over to. ``instances`` are in start order, ``starts``
    their start times."""
    for inst in instances[bisect_left(starts, t_ns):]:
        if inst is not owner and (inst.parent is owner.parent or inst.parent is owner):
            return inst.name
    return ""


def _fan_ins(actors: Actors) -> dict[int, list[str]]:
    """Node spans of other instrumentations that aggregate a fan-out: the nodes that ran in the step right
    after two or more parallel tasks of a ``Send`` fan-out, by ``id(node)``, with the span ids of those tasks
    (orchestrace's own node spans link their inputs instead). A step's fan-out is its tasks that ``Send``
    packets started (their trigger says so), whatever nodes they run; without triggers recorded, its tasks
    of one node that ran two or more times."""
    found: dict[int, list[str]] = {}
    for inst in actors.instances:
        by_step: dict[int, list[Instance]] = {}
        for child in inst.children:
            if child.node is None or child.sub_kind != NODE:
                continue
            step = foreign_step(child.node.span)
            if step is not None:
                by_step.setdefault(step, []).append(child)
        for step, group in by_step.items():
            fanned = [c for c in group if c.node is not None and foreign_send_task(c.node.span)]
            if len(fanned) < 2:
                names: dict[str, list[Instance]] = {}
                for child in group:
                    names.setdefault(child.name, []).append(child)
                fanned = [c for same in names.values() if len(same) >= 2 for c in same]
            inputs = [c.node.span.span_id for c in fanned if c.node is not None]
            for after in by_step.get(step + 1, ()):
                if after.node is not None and inputs:
                    found[id(after.node)] = inputs
    return found


def _aggregate_links(node: Node) -> list[str]:
    return [
        link.span_id
        for link in node.span.links
        if link.attributes.get(sc.ORCH_LINK_TYPE) == sc.LINK_AGGREGATE_INPUT
    ]


def _tool(b: _Builder, node: Node, owner: Instance) -> None:
    attrs = as_genai.tool_call(node.span)
    name = node.name
    call = b.at("tool_call", node.start_ns, node, owner)
    call.tool = name
    call.trusted = True
    call.content_ref = b.store.ref(attrs, sc.ORCH_INPUT_REF, INPUT_CONTENT)
    call.t_end_ns = node.end_ns
    result = b.at_end("tool_result", node, node.end_ns, node.start_ns, owner, agent=name)
    result.tool = name
    result.trusted = attrs.get(sc.ORCH_TOOL_TRUSTED) is True
    result.content_ref = b.store.ref(attrs, sc.ORCH_OUTPUT_REF, OUTPUT_CONTENT)
    result.decision_ev = call
    b.closing[node.span.span_id] = result
    _error(result, node)
    call_id = attrs.get(sc.GEN_AI_TOOL_CALL_ID)
    if call_id:
        b.tool_calls[str(call_id)] = result


def _span_event(
    b: _Builder,
    event: SpanEvent,
    node: Node,
    owner: Instance,
    spawns: list[_Spawn],
    evaluations: list[tuple[Node, SpanEvent]],
) -> None:
    name = event.name
    attrs = event.attributes
    if name == sc.EVENT_SPAWN or name == sc.EVENT_DELEGATE:
        target = attrs.get(sc.ORCH_TARGET_AGENT)
        if _inner_route(owner, node, attrs, (target,)) or _to_tool_node(b, (target,)):
            return
        decision: Decision = sc.DECISION_SPAWN if name == sc.EVENT_SPAWN else sc.DECISION_DELEGATE
        sp = _Spawn(event.time_ns, node, owner, str(target or ""), attrs, decision)
        routing = b.routing
        if routing is not None and routing[0] is node and sp.name in routing[1] and routing[2] == decision:
            sp.decision_ev = routing[3]
        spawns.append(sp)
    elif name == sc.EVENT_MESSAGE:
        sender = attrs.get(sc.ORCH_FROM)
        sender_inst = b.actors.resolve(str(sender), event.time_ns) if sender else owner
        sender_label = sender_inst.label if sender_inst is not None else str(sender)
        ev = b.at("message", event.time_ns, node, owner, agent=sender_label)
        ev.actor = sender_inst
        if sender_inst is not None:
            ev.agent_id = sender_inst.agent_id
        ev.role = owner.role if sender_inst is owner else None
        set_from(ev, sender_inst, str(sender))
        recipient = attrs.get(sc.ORCH_TO)
        if recipient:
            ev.recipient = _addressee(b, str(recipient), attrs, event.time_ns)
            set_to(ev, ev.recipient, str(recipient))
        ev.content_ref = b.store.ref(attrs, sc.ORCH_CONTENT_REF, _EVENT_CONTENT)
        ev.trusted = True
    elif name == sc.EVENT_DECISION:
        target = attrs.get(sc.ORCH_TARGET_AGENT)
        options = (target,) if target else attrs.get(sc.ORCH_DECISION_OPTIONS) or ()
        if _inner_route(owner, node, attrs, options) or _to_tool_node(b, options):
            return
        ev = b.at("orchestrator_decision", event.time_ns, node, owner)
        kind = attrs.get(sc.ORCH_DECISION_KIND)
        ev.decision = DECISIONS.get(kind) if isinstance(kind, str) else None
        if ev.decision is None and kind:
            ev.label = str(kind)
        if target:
            set_to(ev, b.actors.resolve(str(target), event.time_ns), str(target))
        _options(ev, attrs)
        chosen = ev.decision
        if chosen is not None and chosen in (sc.DECISION_SPAWN, sc.DECISION_DELEGATE) and options:
            b.routing = (node, frozenset(str(o) for o in options), chosen, ev)
            if target:
                b.routes.setdefault(str(target), []).append(ev)
        _reason(ev, attrs)
        if attrs.get(sc.ORCH_HANDOFF) is True:
            ev.handoff = True
    elif name == sc.EVENT_STOP:
        if _inner_end(owner, node, attrs):
            return
        ev = b.at("orchestrator_decision", event.time_ns, node, owner)
        ev.decision = sc.DECISION_STOP
        _options(ev, attrs)
        decider = attrs.get(sc.ORCH_FROM)
        if decider:  # the node that decided, when the stop is recorded for it (a graph with no next node)
            set_from(ev, b.actors.decider(owner, str(decider), event.time_ns), str(decider))
        _reason(ev, attrs)
    elif name == sc.EVENT_HUMAN_INTERVENTION:
        actor = attrs.get(sc.ORCH_HUMAN_ACTOR)
        if (
            actor is not None
            and (node.kind is K_ACTOR or _inner(owner, node))
            and str(actor) == node.name
        ):
            # The node that asked (LangGraph's interrupt()): the agent it is, or whose inner working it is.
            ev = b.at("human_intervention", event.time_ns, node, owner)
        else:
            by = str(actor) if actor else "human"
            ev = b.at("human_intervention", event.time_ns, node, owner, agent=by)
        kind = attrs.get(sc.ORCH_HUMAN_KIND)
        ev.label = str(kind) if kind else None
        ev.content_ref = b.store.ref(attrs, sc.ORCH_CONTENT_REF, _EVENT_CONTENT)
        _reason(ev, attrs)
    elif name == sc.EVENT_SAFETY:
        ev = b.at("safety_event", event.time_ns, node, owner)
        category = attrs.get(sc.ORCH_SAFETY_CATEGORY)
        ev.label = str(category) if category else None
        action = attrs.get(sc.ORCH_SAFETY_ACTION)
        ev.reason = (
            str(attrs.get(sc.ORCH_REASON) or action) if (attrs.get(sc.ORCH_REASON) or action) else None
        )
        source = attrs.get(sc.ORCH_SAFETY_SOURCE)
        ev.source = str(source) if source else None
        severity = attrs.get(sc.ORCH_SAFETY_SEVERITY)
        ev.severity = str(severity) if severity else None
        target = attrs.get(sc.ORCH_TARGET_AGENT)
        if target:  # whom the finding concerns
            set_to(ev, _addressee(b, str(target), attrs, event.time_ns), str(target))
    elif name == sc.EVENT_EVALUATION_RESULT:
        evaluations.append((node, event))


def _options(ev: Ev, attrs: Attributes) -> None:
    """The options a decision's event recorded (``orchestrace.decision.options``), if any."""
    recorded = attrs.get(sc.ORCH_DECISION_OPTIONS)
    if isinstance(recorded, tuple | list) and recorded:
        ev.options = [str(o) for o in recorded]


def _addressee(b: _Builder, name: str, attrs: Attributes, t_ns: int) -> Instance | None:
    """The instance an event names: the one with the id ``orchestrace.target.id`` when it names one (a
    handle's), else the one of that name running then, else the next to start, else the last."""
    named = attrs.get(sc.ORCH_TARGET_ID)
    exact = b.actors.with_id(name, str(named)) if named else None
    return exact or b.actors.resolve(name, t_ns)


def _inner(owner: Instance, node: Node) -> bool:
    """Whether ``node`` is part of an agent's inner working (its graph run or one of its graph's nodes, its
    tool node too), as opposed to the agent's own span, whose events are those of the graph around it.
    ``owner``: the instance ``node`` belongs to."""
    return owner.sub_kind == AGENT and node.sub_kind in (NODE, WORKFLOW, TOOL_NODE)


def _inner_route(owner: Instance, node: Node, attrs: Attributes, targets: object) -> bool:
    """A route between an agent's inner nodes (its own control flow, e.g. a ReAct loop's ``tools`` calls)."""
    if not owner.inner_nodes or attrs.get(sc.ORCH_HANDOFF) is True or not isinstance(targets, tuple | list):
        return False
    return bool(targets) and _inner(owner, node) and all(str(t) in owner.inner_nodes for t in targets)


def _to_tool_node(b: _Builder, targets: object) -> bool:
    """Routing to tool nodes only: running the tools a model asked for is no orchestration decision (the
    tool calls say it)."""
    tool_nodes = b.actors.tool_nodes
    return bool(tool_nodes) and isinstance(targets, tuple | list) and bool(targets) and all(
        str(t) in tool_nodes for t in targets
    )


def _inner_end(owner: Instance, node: Node, attrs: Attributes) -> bool:
    """The agent's inner graph reaching its end, recorded by the graph's node or run that took the route
    (``orchestrace.from`` names it): the agent's ``return`` already says it finished. A stop from the user
    (no ``orchestrace.from``) is kept."""
    return _inner(owner, node) and attrs.get(sc.ORCH_FROM) == node.name


def _error(ev: Ev, node: Node) -> None:
    """Mark the event closing a span that ended with status ERROR, with the error's type when recorded."""
    if node.span.status_code == STATUS_ERROR:  # most did not: no further call
        ev.error, ev.error_type = span_error(node.span)


def span_error(span: Span) -> tuple[bool | None, str | None]:
    """``(True, error type or None)`` for a span that ended with status ERROR, else ``(None, None)``."""
    if span.status_code != STATUS_ERROR:
        return None, None
    kind = span.attributes.get(sc.ERROR_TYPE)
    if not kind:
        for event in span.events:
            if event.name == sc.EVENT_EXCEPTION:
                kind = event.attributes.get(sc.EXCEPTION_TYPE)
                break
    return True, str(kind) if kind else None


def _reason(ev: Ev, attrs: Attributes) -> None:
    reason = attrs.get(sc.ORCH_REASON)
    if reason:
        ev.reason = str(reason)


def _spawns_and_returns(b: _Builder, actors: Actors, spawns: list[_Spawn]) -> None:
    for routes in b.routes.values():
        routes.sort(key=_key)
    pending: dict[tuple[str, str], list[_Spawn]] = {}
    for sp in sorted(spawns, key=lambda s: (s.t_ns, s.node.depth)):
        pending.setdefault((sp.node.span.trace_id, sp.name), []).append(sp)
    first_open: dict[tuple[str, str], int] = {}
    for inst in actors.instances:
        node = inst.node
        if node is None:
            continue
        parent = inst.parent
        explicit_spawn = False  # started by an explicit ``orchestrace.spawn``: it gets a despawn
        if parent is not None:
            match = _match(pending, first_open, (node.span.trace_id, inst.name), inst)
            if match is not None:
                spawn = _explicit(b, match, inst)
                explicit_spawn = match.decision == sc.DECISION_SPAWN
            else:
                chosen = _chosen(b, inst, parent)
                if chosen:
                    decision = chosen[0]
                    for ev in chosen:
                        set_to(ev, inst, inst.name)
                else:  # nobody recorded choosing it: the parent's own delegation
                    decision = b.at("orchestrator_decision", inst.start_ns, node, parent)
                    decision.decision = sc.DECISION_DELEGATE
                    set_to(decision, inst, inst.name)
                spawn = b.at("spawn", inst.start_ns, node, parent)
                spawn.decision_ev = decision
                spawn.also_decided = chosen[1:] or None
                set_to(spawn, inst, inst.name)
                spawn.role = inst.role
            spawn.child = inst
        # The span that ended last closes the instance (a resumed run's last part, or a wrapper span).
        last = inst.last or node
        ret = _return(b, inst, last)
        if parent is not None:
            set_to(ret, parent, parent.name)
        ret.content_ref = b.store.ref(last.span.attributes, sc.ORCH_OUTPUT_REF, OUTPUT_CONTENT)
        b.closing[node.span.span_id] = b.closing[last.span.span_id] = ret
        _error(ret, node)
        if last is not node:
            _error(ret, last)
        if explicit_spawn and parent is not None:
            despawn = b.at_end("despawn", last, inst.end_ns, inst.start_ns, parent)
            set_to(despawn, inst, inst.name)
    for group in pending.values():
        for sp in group:
            if not sp.matched:
                _explicit(b, sp, None)


def _stand_in_return(b: _Builder, nodes: list[Node]) -> None:
    """Spans with no actor, tool or orchestration span among them are the stand-in's: model calls (an app
    calling a model directly), or a runtime's messaging spans alone. Its ``return`` at the end of the last
    of ``nodes`` closes the episode, so that it is written (the calls as the single-turn samples they are)
    instead of yielding nothing."""
    last = max(nodes, key=attrgetter("end_ns"))
    _return(b, b.actors.of(last), last)


def set_to(ev: Ev, inst: Instance | None, name: str) -> None:
    """``to`` names the agent, ``to_act`` which activation of it when one instance is meant (``name``: what
    was recorded, when no instance of it ran)."""
    if inst is not None:
        ev.to, ev.to_act = inst.name, inst.activation or None
    else:
        ev.to, ev.to_act = name or None, None


def set_from(ev: Ev, inst: Instance | None, name: str) -> None:
    """``from`` names the agent, ``frm_act`` its activation, as :func:`set_to`."""
    if inst is not None:
        ev.frm, ev.frm_act = inst.name, inst.activation or None
    else:
        ev.frm, ev.frm_act = name or None, None


def _return(b: _Builder, inst: Instance, last: Node) -> Ev:
    """The ``return`` that closes ``inst`` at the end of ``last``, the span of it that ended last."""
    ret = b.at_end("return", last, inst.end_ns, inst.start_ns, inst)
    set_from(ret, inst, inst.name)
    ret.trusted = True
    b.returns[id(inst)] = ret
    return ret


def _chosen(b: _Builder, inst: Instance, parent: Instance) -> list[Ev]:
    """The routing decisions that chose this activation: those naming its name, recorded before it started
    by its parent or a sibling (a graph node's ``Command(goto)``, conditional edge, or the graph's own fixed
    edge) that no earlier activation took. Several when several deciders chose it for one step (a join)."""
    routes = b.routes.get(inst.name)
    if not routes:
        return []
    start = b.route_start.get(inst.name, 0)
    while start < len(routes) and id(routes[start]) in b.used:
        start += 1  # taken decisions at the front are skipped once (linear over a long loop)
    b.route_start[inst.name] = start
    chosen: list[Ev] = []
    for ev in routes[start:]:
        if ev.t_ns > inst.start_ns:
            break
        if id(ev) in b.used or not (ev.owner is parent or ev.owner.parent is parent):
            continue
        if any(c.owner is ev.owner for c in chosen):
            continue  # the same decider again: the next activation's (a resume of parallel workers)
        b.used.add(id(ev))
        chosen.append(ev)
    return chosen


def _match(
    pending: dict[tuple[str, str], list[_Spawn]],
    first_open: dict[tuple[str, str], int],
    key: tuple[str, str],
    inst: Instance,
) -> _Spawn | None:
    """The earliest unmatched explicit spawn of this name before the instance started (target id
    permitting; not one its spawner's own child carries out); of those, the first whose content is the
    instance's input when one is (the payloads of a fan-out are sent in program order, their workers start
    in whatever order their threads do)."""
    candidates = pending.get(key)
    if not candidates:
        return None
    start = first_open.get(key, 0)
    while start < len(candidates) and candidates[start].matched:
        start += 1
    first_open[key] = start
    node = inst.node
    given = node.span.attributes.get(sc.ORCH_INPUT_REF) if node is not None else None
    earliest: _Spawn | None = None
    looked = 0
    for sp in candidates[start:]:
        if sp.t_ns > inst.start_ns:
            break
        if earliest is not None and (given is None or looked >= MATCH_LOOKAHEAD):
            break
        if sp.matched:
            continue
        wanted = sp.attrs.get(sc.ORCH_TARGET_ID)
        if wanted and inst.agent_id and str(wanted) != inst.agent_id:
            continue
        if sp.owner is not inst.parent and _carried_out_by_own_child(sp, inst):
            continue
        looked += 1
        if given is not None and sp.attrs.get(sc.ORCH_CONTENT_REF) == given:
            earliest = sp
            break
        if earliest is None:
            earliest = sp
    if earliest is not None:
        earliest.matched = True
    return earliest


def _carried_out_by_own_child(sp: _Spawn, inst: Instance) -> bool:
    """Whether a child of the spawner's own, of that name, starts after ``inst`` (so not matched yet) and
    after the spawn: it carries the spawn out, not ``inst``, an instance of that name another agent started
    meanwhile (threads). A spawner without such a child may have handed over to an instance that is not its
    child (a handoff to a sibling)."""
    after = max(sp.t_ns, inst.start_ns)
    return any(c is not inst and c.name == inst.name and c.start_ns >= after for c in sp.owner.children)


def _explicit(b: _Builder, sp: _Spawn, child: Instance | None) -> Ev:
    target = child if child is not None else b.actors.resolve(sp.name, sp.t_ns) if sp.name else None
    decision = sp.decision_ev
    if decision is not None:
        b.used.add(id(decision))
    if decision is None:
        decision = b.at("orchestrator_decision", sp.t_ns, sp.node, sp.owner)
        decision.decision = sp.decision
        set_to(decision, target, sp.name)
        _options(decision, sp.attrs)  # a delegate's (a handoff's destinations)
    elif b.spawns_of.get(id(decision)):
        set_to(decision, None, sp.name)  # one decision fanned out to several instances: it names the agent
    else:
        set_to(decision, target, sp.name)
    b.spawns_of[id(decision)] = b.spawns_of.get(id(decision), 0) + 1
    _reason(decision, sp.attrs)
    if sp.attrs.get(sc.ORCH_HANDOFF) is True:
        decision.handoff = True
    spawn = b.at("spawn", sp.t_ns, sp.node, sp.owner)
    spawn.decision_ev = decision
    set_to(spawn, target, sp.name)
    spawn.content_ref = b.store.ref(sp.attrs, sc.ORCH_CONTENT_REF, _EVENT_CONTENT)
    role = sp.attrs.get(sc.ORCH_TARGET_ROLE)
    spawn.role = str(role) if role else (child.role if child is not None else None)
    return spawn
