"""Actor instances and their labels.

An instance is one actor span (one agent invocation, one node execution, one workflow run), with two merges: a
wrapper span that holds nothing but an actor span of the same name is one instance with it (OpenLLMetry's
``invoke_agent X`` around ``X.workflow``: a workflow, the graph run it wraps; never a graph run and one of its
node executions, which may share its name, nor an agent and the call it makes to itself, which names its
caller in ``orchestrace.agent.parent_id``); so is an agent span of the same name as the workflow run it is
directly in, whatever else runs in that run (ADK names its run after its root agent, whose sub-agents run
beside it: they are the root agent's), and top-level actors of the same name in different OTel traces of
one episode are one instance (a LangGraph run and its resume after an interrupt).

An agent's inner working is not an actor: a graph node or graph run (``node`` / ``workflow`` span) whose
nearest enclosing actor is an agent (directly or through such inner spans) belongs to that agent, like any
non-actor span (the ``agent`` and ``tools`` nodes of a prebuilt ReAct agent, the supervisor node of a team
subgraph). Node spans directly under a workflow actor (a plain graph's nodes) stay actors.

Identity: ``name`` is the stable name (the policy a trainer groups by), ``activation`` = k, the 1-based start
order of the instance among the episode's instances of that name. What is written names agents by ``name``
only (``agent``, ``to``, ``from``, reward and credit keys), the activation always in a field of its own.
``label`` (the name when the episode has one instance of it and holds no ``#``, else ``name#k``) is an
internal handle of one instance, and what a reward's target may name to mean one activation.
``agent_id`` keeps the raw id (``gen_ai.agent.id``, node instance id).

A tool node (``orchestrace.operation=tool_node``: LangGraph's ``ToolNode``) is not an actor: its tool calls
are those of the node that routed to it (the latest sibling that recorded a decision or spawn naming it before
it started), else its enclosing actor's; inside an agent it is one of the agent's inner nodes. Routing to a
tool node is no orchestration decision (``Actors.tool_nodes`` names them).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final, cast

import orchestrace_semconv as sc

from .classify import AGENT, K_ACTOR, K_OTHER, K_TOOL, NODE, TOOL_NODE, WORKFLOW, graph_run
from .forest import Forest, Node


@dataclass(slots=True, eq=False, init=False)
class Instance:
    name: str
    sub_kind: str
    node: Node | None  # the first (outermost) span; None for the stand-in owner of actor-less spans
    start_ns: int
    end_ns: int
    parent: Instance | None
    label: str
    activation: int
    index: int  # position in ``Actors.instances`` (start order)
    role: str | None
    agent_id: str | None
    children: list[Instance]
    last: Node | None  # the span that ended last (its output is the instance's result)
    incomplete: bool
    #: Names of the graph nodes that ran inside this agent as its inner working (routing between them is
    #: the agent's own control flow, not orchestration).
    inner_nodes: set[str]

    def __init__(self, name: str, sub_kind: str, node: Node | None, start_ns: int, end_ns: int,
                 parent: Instance | None = None) -> None:
        # Written out, as ``events.Ev``'s: mypyc compiles this one, where the dataclass's runs interpreted.
        self.name = name
        self.sub_kind = sub_kind
        self.node = node
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.parent = parent
        self.label = ""
        self.activation = 0
        self.index = 0
        self.role = None
        self.agent_id = None
        self.children = []
        self.last = None
        self.incomplete = False
        self.inner_nodes = set()


#: How many earlier-started instances of a name ``resolve`` checks for one still running (bounds the cost).
RESOLVE_LOOKBACK: Final = 16


@dataclass(slots=True)
class Actors:
    instances: list[Instance]  # in start order
    by_name: dict[str, list[Instance]]
    by_label: dict[str, Instance]
    #: By span (``Node.pre``): for an actor span, the instance it belongs to; for any other span, the nearest
    #: enclosing actor's instance (``of``).
    owners: list[Instance]
    tool_nodes: frozenset[str] = frozenset()  # names of tool nodes (not actors: nobody delegates to them)

    starts: dict[str, list[int]] = field(default_factory=dict)  # by name, filled on first use

    def of(self, node: Node) -> Instance:
        """The instance a span belongs to (see ``owners``)."""
        return self.owners[node.pre]

    def resolve(self, name: str, t_ns: int, *, started: bool = False) -> Instance | None:
        """The instance a name (or label) refers to at time ``t_ns``: one running then (among the last
        ``RESOLVE_LOOKBACK`` started), else the next to start, else the last one. ``started``: an instance
        that has already started (the one running, else the last started before ``t_ns``), as for the node
        whose end a stop records."""
        candidates = self.by_name.get(name)
        if not candidates:
            return self.by_label.get(name)
        if len(candidates) == 1:
            return candidates[0]
        starts = self.starts.get(name)
        if starts is None:
            starts = self.starts[name] = [c.start_ns for c in candidates]
        i = bisect_right(starts, t_ns)
        for k in range(i - 1, max(-1, i - 1 - RESOLVE_LOOKBACK), -1):
            if candidates[k].end_ns >= t_ns:
                return candidates[k]
        if started and i > 0:
            return candidates[i - 1]
        return candidates[i] if i < len(candidates) else candidates[-1]

    def with_id(self, name: str, agent_id: str) -> Instance | None:
        """The instance of that name with that raw id (``gen_ai.agent.id``), if any."""
        return next((inst for inst in self.by_name.get(name, ()) if inst.agent_id == agent_id), None)

    def decider(self, recorder: Instance, name: str, t_ns: int) -> Instance | None:
        """The node that decided a stop ``recorder`` recorded at ``t_ns``: the last child of that name it
        started (a graph run naming its last node, which may share the run's name), else the instance of
        that name as :meth:`resolve` finds it (a node naming itself)."""
        # Children are in depth-first span order, not start order.
        named = [c for c in recorder.children[-RESOLVE_LOOKBACK:] if c.name == name and c.start_ns <= t_ns]
        last = max(named, key=attrgetter("start_ns"), default=None)
        return last if last is not None else self.resolve(name, t_ns, started=True)


def assign_instances(forest: Forest, fallback_name: str) -> Actors:
    instances: list[Instance] = []
    top_level: dict[str, Instance] = {}
    stand_in: Instance | None = None
    tool_nodes: set[str] = set()
    # id(run instance) -> the tool calls of the agents directly in it, by lower-cased tool name (a run holds
    # few names and may hold thousands of calls: each agent looks only at the names it could be).
    tools_in_run: dict[int, dict[str, list[Node]]] = {}
    # By node.pre, the nodes' position in forest.nodes: each set in the loop below, in that order (an
    # assignment, no call per span).
    owners = cast("list[Instance]", [None] * len(forest.nodes))
    for node in forest.nodes:  # parents before children
        parent = node.parent
        enclosing = owners[parent.pre] if parent is not None else None
        if node.kind is not K_ACTOR:
            if node.kind is K_TOOL and enclosing is not None:
                run = enclosing.parent
                if run is not None and run.sub_kind == WORKFLOW:
                    tools_in_run.setdefault(id(run), {}).setdefault(node.name.lower(), []).append(node)
            if node.sub_kind == TOOL_NODE and enclosing is not None:
                name = node.name
                tool_nodes.add(name)
                if enclosing.sub_kind == AGENT:
                    enclosing.inner_nodes.add(name)
                else:
                    enclosing = _router(enclosing, name, node.start_ns) or enclosing
            if enclosing is None:
                if stand_in is None:
                    stand_in = Instance(fallback_name, "", None, node.start_ns, node.end_ns)
                    instances.append(stand_in)
                enclosing = stand_in
                stand_in.end_ns = max(stand_in.end_ns, node.end_ns)
            owners[node.pre] = enclosing
            continue
        name = node.name
        if node.sub_kind == AGENT and id(enclosing) in tools_in_run:
            assert enclosing is not None  # only instances are keys
            enclosing = _caller_by_tool(tools_in_run[id(enclosing)], owners, node, name) or enclosing
        inst = None
        if (
            enclosing is not None
            and parent is not None
            and parent.kind is K_ACTOR
            and (len(parent.children) == 1 or _named_after_its_root_agent(parent, node))
            and enclosing.name == name
            and not _step_of_run(parent, node)
            and sc.ORCH_AGENT_PARENT_ID not in node.span.attributes  # an agent calling itself (recursion)
        ):
            inst = enclosing  # a wrapper span around the same actor
            if node.sub_kind == WORKFLOW and graph_run(node.span.attributes):
                # A library's graph run, which it wraps in an agent span of the same name (OpenLLMetry, for
                # every graph run, agent or not): a graph run, whose nodes are actors as in any graph run. (An
                # agent that runs its own graph, recorded by orchestrace, stays an agent.)
                inst.sub_kind = WORKFLOW
        elif enclosing is None:
            inst = top_level.get(name)  # the same run continued in another OTel trace
        elif enclosing.sub_kind == AGENT and node.sub_kind != AGENT:
            # Inner working of that agent: from here on it is an ordinary span of the agent's.
            node.kind = K_OTHER
            owners[node.pre] = enclosing
            if node.sub_kind == NODE:
                enclosing.inner_nodes.add(name)
            continue
        if inst is None:
            inst = Instance(name, node.sub_kind, node, node.start_ns, node.end_ns, parent=enclosing)
            instances.append(inst)
            if enclosing is None:
                top_level[name] = inst
            else:
                enclosing.children.append(inst)
        if node.end_ns >= inst.end_ns:
            inst.end_ns = node.end_ns
            inst.last = node
        attrs = node.span.attributes
        role = attrs.get(sc.ORCH_AGENT_ROLE)
        if role and inst.role is None:
            inst.role = str(role)
        if inst.agent_id is None:
            inst.agent_id = node.agent_id
        inst.incomplete |= node.incomplete
        owners[node.pre] = inst

    instances.sort(key=lambda i: i.start_ns)
    by_name: dict[str, list[Instance]] = {}
    for i, inst in enumerate(instances):
        inst.index = i
        by_name.setdefault(inst.name, []).append(inst)
    by_label: dict[str, Instance] = {}
    sent: _Sent | None = None
    for name, group in by_name.items():
        numbered = group
        if len(group) > 1 and any(_input_ref(inst) is not None for inst in group):
            sent = _payloads_sent(forest) if sent is None else sent
            numbered = sorted(group, key=lambda inst: _numbering_key(inst, sent))
        for k, inst in enumerate(numbered, 1):
            inst.activation = k
            inst.label = instance_label(name, k, len(group))
            by_label[inst.label] = inst
    return Actors(instances, by_name, by_label, owners, frozenset(tool_nodes))


#: (OTel trace, target agent, content ref) -> (time, position among its span's events) of the payload's send.
_Sent = dict[tuple[str, str, object], tuple[int, int]]


def _input_ref(inst: Instance) -> object:
    return inst.node.span.attributes.get(sc.ORCH_INPUT_REF) if inst.node is not None else None


def _payloads_sent(forest: Forest) -> _Sent:
    """When each payload was first sent to an agent: (OTel trace, target, content ref) -> (time, position
    among its span's events), from the explicit spawns and delegations that carry a content ref."""
    sent: _Sent = {}
    for node in forest.nodes:
        for i, event in enumerate(node.span.events):
            if event.name == sc.EVENT_SPAWN or event.name == sc.EVENT_DELEGATE:
                attrs = event.attributes
                ref = attrs.get(sc.ORCH_CONTENT_REF)
                target = attrs.get(sc.ORCH_TARGET_AGENT)
                if ref is not None and isinstance(target, str):
                    sent.setdefault((node.span.trace_id, target, ref), (event.time_ns, i))
    return sent


def _numbering_key(inst: Instance, sent: _Sent) -> tuple[int, int, int]:
    """Instances of a name are numbered in start order, except the workers of a fan-out whose payloads were
    recorded (LangGraph's ``Send``): in the order the payloads were sent, which the program fixes, where
    the order the workers' threads started in is a race."""
    node = inst.node
    ref = _input_ref(inst)
    if node is not None and ref is not None:
        at = sent.get((node.span.trace_id, inst.name, ref))
        if at is not None and at[0] <= inst.start_ns:
            return at[0], at[1], inst.start_ns
    return inst.start_ns, 0, inst.start_ns


def _caller_by_tool(tools: dict[str, list[Node]], owners: list[Instance], node: Node,
                    name: str) -> Instance | None:
    """The agent that called ``node`` (an agent named ``name`` the run holds directly) as a tool: the latest
    tool call named after it that was running the whole time it ran. OpenLLMetry's OpenAI Agents
    instrumentation puts an agent called as a tool (``as_tool``) beside its caller in the run instead of under
    the tool's span."""
    name = name.lower()
    found: Node | None = None
    for tool_name, calls in tools.items():
        if name in tool_name:
            for tool in reversed(calls):
                if tool.start_ns <= node.start_ns and node.end_ns <= tool.end_ns:
                    if found is None or tool.pre > found.pre:
                        found = tool
                    break
    return owners[found.pre] if found is not None else None


def _named_after_its_root_agent(parent: Node, node: Node) -> bool:
    """Whether ``parent`` is another library's workflow run and ``node`` an agent directly in it (the caller
    checks the names match): ADK's run and its root agent. An orchestrace task named like the agents it
    calls holds each call as an activation of its own."""
    own_task = sc.ORCH_TASK_ID in parent.span.attributes
    return parent.sub_kind == WORKFLOW and node.sub_kind == AGENT and not own_task


def _step_of_run(parent: Node, node: Node) -> bool:
    """Whether ``node`` is a node execution of the graph run ``parent``: a step of that run, never a second
    description of it, even when the node is named like the graph (a graph ``x`` whose one node ``x`` ran)."""
    return parent.sub_kind == WORKFLOW and (
        node.sub_kind == NODE or sc.LANGGRAPH_NODE in node.span.attributes
    )


#: Span events that name where control goes next.
_ROUTES: Final = frozenset({sc.EVENT_DECISION, sc.EVENT_SPAWN, sc.EVENT_DELEGATE})


def _router(parent: Instance, target: str, t_ns: int) -> Instance | None:
    """The latest child of ``parent`` that recorded routing to ``target`` before ``t_ns``."""
    for sibling in reversed(parent.children[-RESOLVE_LOOKBACK:]):
        if sibling.start_ns > t_ns or sibling.node is None:
            continue
        for event in sibling.node.span.events:
            if event.name in _ROUTES and event.time_ns <= t_ns:
                attrs = event.attributes
                chosen = attrs.get(sc.ORCH_TARGET_AGENT)
                options = attrs.get(sc.ORCH_DECISION_OPTIONS) if chosen is None else (chosen,)
                if isinstance(options, tuple | list) and target in options:
                    return sibling
    return None


def instance_label(name: str, activation: int, count: int) -> str:
    """The label of activation ``activation`` of ``name`` among ``count`` instances of it. A name that holds
    ``#`` is always numbered: an agent named ``w#2`` would otherwise share its label with the second ``w``."""
    return name if count == 1 and "#" not in name else f"{name}#{activation}"
