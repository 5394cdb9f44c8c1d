"""The episode's spans as one repaired tree: duplicates dropped, parents resolved, cycles broken, orphans
attached.

Spans that tell again what another library's spans tell are set aside, their children attached to their
parent: the spans of LangChain callback tracers (OpenInference, OpenLLMetry) in an episode that orchestrace's
LangGraph integration recorded (each vocabulary's ``retold_under``), and a model call inside a model call (an
SDK-level instrumentation's span under the framework's span of the same call, or a gateway's such as
``orchestrace proxy``: its token ids complete the outer turn), so that nothing counts twice.

Every span is classified and named here, once (``classify``): each node carries its kind and names, which
later stages read. Every later stage walks these nodes instead of raw spans. Repairs never fail the
conversion; they mark the affected nodes ``incomplete`` so the written trace says it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import orchestrace_semconv as sc

from ..spans import Span, continued_link
from .classify import (
    EMBEDDING,
    K_ACTOR,
    K_CREATE_AGENT,
    K_MODEL,
    K_OTHER,
    K_TOOL,
    MODEL_LIKE,
    NODE,
    TOOL_NODE,
    WORKFLOW,
    Kind,
    actor_name,
    agent_id,
    classify,
    created_agent_name,
    model_name,
    provider_name,
    tool_name,
)
from .vocabularies import VOCABULARIES

_IN_PROGRESS_COPY: Final = tuple(v.in_progress_copy for v in VOCABULARIES if v.in_progress_copy is not None)
_PLUMBING_KEYS: Final = tuple(key for v in VOCABULARIES for key in v.plumbing_keys)
#: Scope -> the scopes whose spans tell its spans again (see ``Vocabulary.retold_under``).
_RETOLD_UNDER: Final = {
    scope: frozenset(s for v in VOCABULARIES for s in v.retold_under.get(scope, ()))
    for scope in {scope for v in VOCABULARIES for scope in v.retold_under}
}



@dataclass(slots=True, eq=False, init=False)
class Node:
    span: Span
    start_ns: int
    end_ns: int  # never before start_ns
    parent: Node | None
    children: list[Node]
    depth: int
    pre: int  # position in the depth-first order of the forest
    post: int  # the last position of its subtree in that order
    kind: Kind
    sub_kind: str
    incomplete: bool
    #: For a model call, the first model call recorded inside it (the same call told again: a gateway's span,
    #: e.g. ``orchestrace proxy``, or an SDK-level instrumentation's): its token ids complete the turn.
    inner_model: Node | None
    #: Its names, by its kind once the forest is built: an actor's agent name (a tool node's node name), a
    #: tool's name, the agent a ``CREATE_AGENT`` span spawns or hands off to (``""``: not said); an actor's
    #: raw id; a model call's model and provider.
    name: str
    agent_id: str | None
    model: str | None
    provider: str | None

    def __init__(self, span: Span, start_ns: int, end_ns: int) -> None:
        # Written out, as ``events.Ev``'s: mypyc compiles this one, where the dataclass's runs interpreted
        # (a seventh of a compiled conversion: one node per span).
        self.span = span
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.parent = None
        self.children = []
        self.depth = 0
        self.pre = 0
        self.post = 0
        self.kind = K_OTHER
        self.sub_kind = ""
        self.incomplete = False
        self.inner_model = None
        self.name = ""
        self.agent_id = None
        self.model = None
        self.provider = None


@dataclass(slots=True)
class Forest:
    nodes: list[Node]  # parents before children, siblings by start time
    roots: list[Node]
    incomplete: bool
    #: Spans of models used without generating (``classify.EMBEDDING``): their tokens are a cost of their own.
    embeddings: list[Node] = field(default_factory=list)


def _plumbing(span: Span) -> bool:
    attrs = span.attributes
    return any(key in attrs for key in _PLUMBING_KEYS)


def _under_continued(node: Node, by_id: dict[tuple[str, str], Node]) -> None:
    """A root continuing another trace of the episode (``spans.continued_link``) runs under the span it links
    to, as if the context had been passed along."""
    link = continued_link(node.span)
    parent = by_id.get(link) if link is not None else None
    if parent is not None and parent is not node:
        node.parent = parent


def build_forest(spans: Sequence[Span]) -> Forest:
    by_id: dict[tuple[str, str], Node] = {}
    ordered: list[Node] = []
    again = _described_again(spans)
    aside: dict[tuple[str, str], str | None] = {}  # spans set aside -> their parent span id
    for span in spans:
        if span.end_ns == span.start_ns and any(copy(span.attributes) for copy in _IN_PROGRESS_COPY):
            continue  # a copy of a span in progress (a leaf): the span itself is there too
        if again and span.scope in again:
            aside.setdefault((span.trace_id, span.span_id), span.parent_span_id)
            continue
        key = (span.trace_id, span.span_id)
        if key in by_id:
            continue  # a duplicate (retried export): the first copy wins
        end = span.end_ns if span.end_ns >= span.start_ns else span.start_ns
        node = Node(span, span.start_ns, end)
        by_id[key] = node
        ordered.append(node)
    ordered.sort(key=lambda n: (n.start_ns, n.span.trace_id, n.span.span_id))
    for i, node in enumerate(ordered):
        node.pre = i  # for now its place in that order (the depth-first position is set below)

    orphans: list[Node] = []
    maybe_cycles = False
    for node in ordered:
        span = node.span
        pid = span.parent_span_id
        if not pid:
            if span.links:
                _under_continued(node, by_id)
                maybe_cycles |= node.parent is not None and node.parent.pre > node.pre
            continue
        if aside:
            hops = 0
            while pid and (span.trace_id, pid) in aside and hops <= len(aside):
                pid = aside[(span.trace_id, pid)]
                hops += 1
            if not pid:
                continue
        parent = by_id.get((span.trace_id, pid))
        if parent is None or parent is node:
            orphans.append(node)
        else:
            node.parent = parent
            # Around a loop of parent pointers some parent must come after its child in that order.
            maybe_cycles |= parent.pre > node.pre
    if maybe_cycles:
        orphans.extend(_break_cycles(ordered))
    incomplete = bool(orphans)
    for orphan in orphans:
        orphan.incomplete = True
    roots = [n for n in ordered if n.parent is None and not n.incomplete]
    if roots:
        first_root_of_trace: dict[str, Node] = {}
        for root in roots:
            first_root_of_trace.setdefault(root.span.trace_id, root)
        for orphan in orphans:
            orphan.parent = first_root_of_trace.get(orphan.span.trace_id, roots[0])
    else:
        for orphan in orphans:
            orphan.parent = None
        roots = [n for n in ordered if n.parent is None]

    for node in ordered:
        if node.parent is not None:
            node.parent.children.append(node)
    nodes: list[Node] = []
    embeddings: list[Node] = []
    model_like = False
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        parent = node.parent
        node.depth = 0 if parent is None else parent.depth + 1
        kind, node.sub_kind = classify(node.span, parent.span if parent is not None else None)
        outer = enclosing(parent, K_MODEL) if kind is K_MODEL else None
        if outer is not None:
            kind = K_OTHER
            if outer.inner_model is None:
                outer.inner_model = node
        elif kind is K_TOOL:
            node.name = tool_name(node.span)
            if _same_tool_around(node, parent):
                kind = K_OTHER  # one call told twice (an MCP client's span inside the framework's)
        if node.sub_kind == MODEL_LIKE:
            model_like = True
        elif node.sub_kind == EMBEDDING:
            embeddings.append(node)
        elif parent is None and kind is K_OTHER and not _plumbing(node.span):
            # A root span of no known kind (an HTTP request, a script's main span) is the run's orchestrator.
            # A messaging one is a runtime's plumbing, named after a queue or topic: the service's stand-in
            # owns it (see actors), as it owns a root tool span.
            kind, node.sub_kind = K_ACTOR, WORKFLOW
        node.kind = kind
        node.pre = node.post = len(nodes)
        nodes.append(node)
        if node.children:  # most nodes are leaves: no call for them (compiled, ``reversed`` was one each)
            stack.extend(node.children[::-1])
    if model_like:
        _decide_model_like(nodes)
    for node in nodes:
        if node.kind is K_MODEL and node.span.attributes.get(sc.ORCH_MODEL_CALL_GATEWAY) is True:
            _join_app_record(node)
    for node in reversed(nodes):
        if node.parent is not None and node.post > node.parent.post:
            node.parent.post = node.post
        # Its names, by its final kind (a tool's is set when it is classified).
        kind = node.kind
        span = node.span
        if kind is K_ACTOR:
            node.name = actor_name(span, node.sub_kind)
            node.agent_id = agent_id(span)
        elif kind is K_MODEL:
            node.model = model_name(span)
            node.provider = provider_name(span)
        elif kind is K_CREATE_AGENT:
            node.name = created_agent_name(span, node.sub_kind)
        elif node.sub_kind == TOOL_NODE:
            node.name = actor_name(span, NODE)
    return Forest(nodes, roots, incomplete, embeddings)


def _decide_model_like(nodes: list[Node]) -> None:
    """A model-like span is a model call unless a model call runs inside it (the inner one is the precise
    record: a wrapper reporting its calls' total) or it runs inside one (a model call's own HTTP span). One
    that stays none is an ordinary span, or, as a root, the run's orchestrator like any root of no kind."""
    model_below = [False] * len(nodes)  # by position: a model call among the node's descendants
    for node in reversed(nodes):  # descendants before their ancestors
        below = model_below[node.pre]
        if node.sub_kind == MODEL_LIKE:
            node.sub_kind = ""
            if not below and enclosing(node.parent, K_MODEL) is None:
                node.kind = K_MODEL
            elif node.parent is None:
                node.kind, node.sub_kind = K_ACTOR, WORKFLOW
        if node.parent is not None and (below or node.kind is K_MODEL):
            model_below[node.parent.pre] = True


def _join_app_record(gateway: Node) -> None:
    """A gateway's record of a model call (``orchestrace proxy``) beside the app's record of the same call (a
    sibling model call whose time holds it: the app recorded the call from callbacks, so its span was not the
    gateway's parent) is that call told again: no turn of its own, its token ids the app's turn's. Among
    several, the innermost one not yet joined (parallel calls of one agent)."""
    parent = gateway.parent
    if parent is None:
        return
    holders = [
        sibling for sibling in parent.children
        if sibling is not gateway and sibling.kind is K_MODEL and sibling.inner_model is None
        and sibling.span.attributes.get(sc.ORCH_MODEL_CALL_GATEWAY) is not True
        and sibling.start_ns <= gateway.start_ns and gateway.end_ns <= sibling.end_ns
    ]
    if holders:
        app_record = min(holders, key=lambda n: (n.end_ns - n.start_ns, n.span.span_id))
        gateway.kind = K_OTHER
        app_record.inner_model = gateway


def _same_tool_around(node: Node, parent: Node | None) -> bool:
    """Whether the nearest tool span around ``node`` (up to its actor) runs the same tool."""
    outer = enclosing(parent, K_TOOL)
    return outer is not None and outer.name == node.name


def _described_again(spans: Sequence[Span]) -> frozenset[str]:
    """Scopes whose spans this episode holds a second description of (see ``Vocabulary.retold_under``)."""
    scopes = {span.scope for span in spans}
    found: set[str] = set()
    for scope, others in _RETOLD_UNDER.items():
        if scope in scopes:
            found |= others
    return frozenset(found)


def enclosing(node: Node | None, kind: Kind) -> Node | None:
    """The nearest span of ``kind`` among ``node`` and its ancestors, up to the nearest actor."""
    while node is not None and node.kind is not K_ACTOR:
        if node.kind is kind:
            return node
        node = node.parent
    return None


def _break_cycles(nodes: list[Node]) -> list[Node]:
    """Cut parent pointers that loop back (corrupt input); the node that closes a loop becomes an orphan."""
    state: dict[int, int] = {}  # id(node) -> 1 on the current walk, 2 known to reach a root
    broken: list[Node] = []
    for start in nodes:
        walk: list[Node] = []
        node: Node | None = start
        while node is not None and state.get(id(node)) is None:
            state[id(node)] = 1
            walk.append(node)
            node = node.parent
        if node is not None and state[id(node)] == 1:
            node.parent = None  # the loop closes here
            broken.append(node)
        for seen in walk:
            state[id(seen)] = 2
    return broken
