"""The spans that own orchestration events (graph runs and node executions) and how code finds them.

A graph run and the node execution around the current code travel in the OpenTelemetry ``Context`` (so they
cross thread pools and asyncio tasks exactly as span parents do): each is an SDK invocation
(:mod:`orchestrace.instrumentation`) whose context carries it. Node executions are also indexed by their
checkpoint namespace, which is how a ``Command.PARENT`` handoff raised deep in a subgraph finds the node of
the parent graph that hands off.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanContext
from orchestrace import semconv as sc
from orchestrace.instrumentation import SPAN_KEY, Events, Invocation, resume_link

_RUN_KEY = otel_context.create_key("orchestrace_langgraph.run")
_NODE_KEY = otel_context.create_key("orchestrace_langgraph.node")
_OWN_KEY = otel_context.create_key("orchestrace_langgraph.own")

#: LangChain callback tracers that attach their spans to the context (OpenLLMetry's). Their spans follow
#: LangChain's run tree, which ends at their own graph span, not at our node spans.
_CALLBACK_TRACER_SCOPES = frozenset({"opentelemetry.instrumentation.langchain",
                                     "openinference.instrumentation.langchain"})


class Own:
    """A span of ours (a run, a node, a tool call): what code inside it finds as our innermost span."""

    __slots__ = ("invocation",)

    def __init__(self) -> None:
        #: Set once the span started (the holder goes into the invocation's context first).
        self.invocation: Invocation | None = None

    @property
    def span(self) -> Span:
        return self.invocation.span if self.invocation is not None else INVALID_SPAN


@dataclass(slots=True)
class Actor:
    name: str
    own: Own = field(default_factory=Own, kw_only=True)
    #: id() of the ``Command`` objects already recorded for this actor (its writers may see one twice).
    _commands: set[int] | None = field(default=None, kw_only=True)

    @property
    def invocation(self) -> Invocation | None:
        return self.own.invocation

    @property
    def span(self) -> Span:
        return self.own.span

    @property
    def events(self) -> Events:
        invocation = self.own.invocation
        assert invocation is not None  # actors are found through contexts built after their span started
        return invocation.events

    def first_sight(self, command: object) -> bool:
        seen = self._commands
        if seen is None:
            seen = self._commands = set()
        if id(command) in seen:
            return False
        seen.add(id(command))
        return True


@dataclass(slots=True)
class SendResult:
    """A finished pushed task (a ``Send`` target) and the channels it wrote, for the node aggregating them."""

    span_context: SpanContext
    channels: frozenset[str]


@dataclass(slots=True)
class Run(Actor):
    """One graph run (``invoke_workflow``)."""

    thread_id: str | None = None
    #: The run this one is nested in (a subgraph's parent run), ``None`` for a top-level run.
    parent: Run | None = None
    #: The nodes of this run's own graph that completed in its latest step (the run ended after them).
    _last_step: object = None
    _last_nodes: set[str] = field(default_factory=set)
    #: A node routed to END explicitly (that route is the stop decision already).
    routed_to_end: bool = False
    #: A node asked a human (``interrupt()``): the run pauses, it does not stop.
    interrupted: bool = False
    #: The graph's fixed edges (its wiring): source node -> the nodes it always leads to.
    edges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: ``edges`` without ``END``: source node -> the nodes its completion leads to.
    routes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Node -> the nodes a ``Command`` it returns may go to, where the graph declares them.
    destinations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    _wired: set[tuple[object, str]] = field(default_factory=set)  # (step, target) fixed routes taken
    #: Fixed routes taken by completed nodes and not recorded yet: (step, target).
    pending_wiring: list[tuple[object, str]] = field(default_factory=list)
    #: The earliest step of ``pending_wiring`` when every one is a step number, else ``None``: a node
    #: starting in that step or before (a fan-out's other workers) takes none of them.
    _pending_from: int | None = None
    #: Finished ``Send`` tasks not yet handed to the node aggregating them (see :meth:`aggregate_links`).
    send_results: list[SendResult] = field(default_factory=list)
    #: id() of a Send's payload -> (the payload, its content ref), until the task it starts reads it.
    _packets: dict[int, tuple[Any, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def top(self) -> Run:
        run = self
        while run.parent is not None:
            run = run.parent
        return run

    def node_completed(self, name: str, step: object) -> None:
        """A node of this run's graph completed in ``step`` (``langgraph_step``; ``None`` if unknown)."""
        with self._lock:
            if step is None or step != self._last_step:
                self._last_step = step
                self._last_nodes = set()
            self._last_nodes.add(name)

    @property
    def last_node(self) -> str | None:
        """The node whose completion ended the run; when its last step ran several, the first by name (which
        finished last was a race between threads: two runs of one program must name the same node)."""
        with self._lock:
            return min(self._last_nodes, default=None)

    def add_wiring(self, step: object, targets: Iterable[str]) -> None:
        """A node that completed in ``step`` takes the fixed routes to ``targets`` (each once per step)."""
        with self._lock:
            for target in targets:
                if (step, target) not in self._wired:
                    self._wired.add((step, target))
                    self._pending_from = _earliest(self._pending_from if self.pending_wiring else step, step)
                    self.pending_wiring.append((step, target))

    def take_wiring(self, before: object = None) -> list[str]:
        """The targets of the fixed routes taken in steps before ``before`` (all of them when it is not a
        step number) not recorded yet, by name: which node of a step completed first was a race."""
        if not self.pending_wiring:  # most node starts: no lock
            return []
        bound = before if isinstance(before, int) else None
        pending_from = self._pending_from
        if bound is not None and pending_from is not None and pending_from >= bound:
            return []  # every pending route leads to a step not begun yet: no lock
        taken: list[str] = []
        later: list[tuple[object, str]] = []
        with self._lock:
            pending_from = None
            for route in self.pending_wiring:  # a route to a step not begun yet (see ``before``) waits
                step = route[0]
                if bound is not None and isinstance(step, int) and step >= bound:
                    pending_from = _earliest(pending_from if later else step, step)
                    later.append(route)
                else:
                    taken.append(route[1])
            self.pending_wiring = later
            self._pending_from = pending_from
        taken.sort()
        return taken

    def add_send_result(self, result: SendResult) -> None:
        with self._lock:
            self.send_results.append(result)

    def sent(self, packet: Any, ref: str) -> None:
        """A ``Send``'s payload was hashed for its spawn: the task it starts takes that ref (the same object
        reaches it) instead of hashing it again. Bounded: a payload whose task never reads it (a ToolNode's)
        is dropped with the others past ``_MAX_PACKETS``."""
        packets = self._packets
        if len(packets) >= _MAX_PACKETS:
            packets.clear()
        packets[id(packet)] = (packet, ref)

    def packet_ref(self, packet: Any) -> str | None:
        """The ref :meth:`sent` recorded for this very object, once (single dict operations: no lock)."""
        found = self._packets.pop(id(packet), None)
        return found[1] if found is not None and found[0] is packet else None

    def aggregate_links(self, triggers: Collection[str]) -> list[Link]:
        """Links to the pushed tasks whose writes trigger a node (each is handed out once); its caller
        checks :attr:`send_results` first (most nodes of most runs: no call)."""
        wanted = frozenset(triggers)
        with self._lock:
            hits = [s for s in self.send_results if s.channels & wanted]
            if hits:
                self.send_results = [s for s in self.send_results if not (s.channels & wanted)]
        return [Link(s.span_context, _LINK_AGGREGATE) for s in hits]


#: The attributes of a link from an aggregating node to a pushed task it aggregates.
_LINK_AGGREGATE = {sc.ORCH_LINK_TYPE: sc.LINK_AGGREGATE_INPUT}

def _earliest(pending_from: object, step: object) -> int | None:
    """The earliest step of the pending routes once one of ``step`` joins them (``None``: not all numbers)."""
    if isinstance(pending_from, int) and isinstance(step, int):
        return min(pending_from, step)
    return None


#: Send payloads a run keeps for the tasks they start (see ``Run.sent``).
_MAX_PACKETS = 1024


@dataclass(slots=True)
class Node(Actor):
    """One node execution (a LangGraph task)."""

    namespace: str = ""
    agent_id: str | None = None  # set when the node is an agent


def run_values(run: Run) -> dict[str, object]:
    """Context values of a graph run's invocation (no node execution around code in it yet)."""
    return {_RUN_KEY: run, _NODE_KEY: None, _OWN_KEY: run.own}


def node_values(node: Node) -> dict[str, object]:
    return {_NODE_KEY: node, _OWN_KEY: node.own}


def own_values(own: Own) -> dict[str, object]:
    return {_OWN_KEY: own}


def parent_context(namespaces: NamespaceIndex | None = None, metadata: Mapping[str, Any] | None = None,
                   context: otel_context.Context | None = None) -> otel_context.Context | None:
    """Parent of a span we start inside a graph (a node, a model call, a tool): ``context`` (default: the
    current one), unless its span was attached by a LangChain callback tracer; then the node the call belongs
    to (found in ``namespaces`` by the checkpoint namespace in LangGraph's run ``metadata``) or our innermost
    span, so that our spans keep their tree (nodes under runs, model calls and tools under nodes) whatever
    else is installed. The common case (the current span is ours, or there is none) costs two dict lookups."""
    ctx = otel_context.get_current() if context is None else context
    current = ctx.get(SPAN_KEY)  # what trace.get_current_span reads, without its two calls
    own = ctx.get(_OWN_KEY)
    own_span: Span | None = None
    if type(own) is Own:  # ``own.span``, without the property's call
        own_span = own.invocation.span if own.invocation is not None else INVALID_SPAN
    if current is None or current is INVALID_SPAN or current is own_span:
        return None
    scope = getattr(current, "instrumentation_scope", None)
    if scope is None or getattr(scope, "name", None) not in _CALLBACK_TRACER_SCOPES:
        return None
    node = None
    if namespaces is not None and metadata is not None:
        node = namespaces.get(str(metadata.get("langgraph_checkpoint_ns", "")))
    if node is not None:
        own_span = node.span
    return trace.set_span_in_context(own_span) if own_span is not None else None


def current_run(context: otel_context.Context | None = None) -> Run | None:
    run = (otel_context.get_current() if context is None else context).get(_RUN_KEY)
    return run if type(run) is Run else None


def current_node(context: otel_context.Context | None = None) -> Node | None:
    node = (otel_context.get_current() if context is None else context).get(_NODE_KEY)
    return node if type(node) is Node else None


def current_actor() -> Actor | None:
    """The innermost node execution, else the graph run, around the calling code."""
    ctx = otel_context.get_current()
    return current_node(ctx) or current_run(ctx)


class NamespaceIndex:
    """Node executions in progress, by checkpoint namespace.

    No lock: a namespace names one task execution (it ends with the task id), so only that execution's
    thread writes its key; single dict operations are atomic."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}

    def add(self, node: Node) -> None:
        self._nodes[node.namespace] = node

    def remove(self, node: Node) -> None:
        if self._nodes.get(node.namespace) is node:
            self._nodes.pop(node.namespace, None)

    def get(self, namespace: str) -> Node | None:
        return self._nodes.get(namespace)


class InterruptLog:
    """Interrupts already recorded (one event per interrupt however many graphs it bubbles through), and the
    span that last asked a human on each thread, so that the resume can link to it."""

    def __init__(self, size: int = 4096) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._by_thread: OrderedDict[str, tuple[SpanContext, tuple[str, ...]]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def first_time(self, interrupt_id: str) -> bool:
        with self._lock:
            if interrupt_id in self._seen:
                return False
            self._seen[interrupt_id] = None
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
            return True

    def asked(self, thread_id: str, span_context: SpanContext, task: str | None = None) -> None:
        """A human was asked on ``thread_id``, by ``span_context``'s span; ``task``: the top-level task that
        asked (``interrupt()``, its namespace ``node:task id``), which runs again when the thread resumes."""
        with self._lock:
            _, tasks = self._by_thread.pop(thread_id, (None, ()))
            self._by_thread[thread_id] = (span_context, (*tasks, task) if task is not None else tasks)
            while len(self._by_thread) > self._size:
                self._by_thread.popitem(last=False)

    def resumed(self, thread_id: str | None) -> tuple[list[Link], tuple[str, ...]]:
        """The link of a resume to the span that last asked on its thread, and the node of each task that
        runs again: once per task (``Send`` workers of one node asking at once run again each), however
        many of its subgraph's nodes asked."""
        with self._lock:
            asked = self._by_thread.pop(thread_id, None) if thread_id is not None else None
        if asked is None:
            return [], ()
        return [resume_link(asked[0])], tuple(task.split(":", 1)[0] for task in dict.fromkeys(asked[1]))
