"""Random LangGraph apps from a seed, and a log of what each run really did (the ground truth the random-shape
tests compare the written trace with).

A graph is a chain of segments built from the end backwards (each knows the node it hands over to): a
plain edge, a ``Command(goto)``, a conditional edge choosing one of two nodes, a ``Send`` fan-out (from a
conditional edge or from a ``Command``) joined by a reducer, two parallel branches joined by one node, a
loop bounded by a counter in the state, a compiled subgraph used as a node (an agent) and a node marked
agent by metadata. Node names come from a hostile pool (unicode, spaces, ``#``, ``/``, ``tools``, the
graph's own name, a long name). Some nodes call a (fake) model: a turn.
"""

from __future__ import annotations

import itertools
import operator
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from episodes import MODES
from fakes import ScriptedChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from opentelemetry import trace
from orchestrace_langgraph import AGENT_METADATA_KEY

# LangGraph refuses ':' and '|' in node names (its checkpoint namespace separators); graph names may.
NAMES = (
    "tools", "agent", "model", "a b", " leading space", "trailing space ", "ünïcødé ✓", "日本語ノード",
    "emoji 🚀", "x", "x#1", "x#2", "#", "##", "node#2#1", "path/to/node", "a/b#3", "supervisor", "Send",
    "__x__", "END", "worker", "L" * 300,
)
GRAPH_NAMES = ("graph", "g:v1", "tools", "x", "x#1", "team/a#b", "ünï:graph", "agent")
SEGMENTS = ("plain", "command", "conditional", "send", "send_command", "parallel", "join_edge",
            "parallel_command", "loop", "subgraph", "handoff", "agent")


def merge_counts(left: dict[str, int], right: dict[str, int]) -> dict[str, int]:
    return {**left, **right}


def keep_last(left: int, right: int) -> int:
    return right


class State(TypedDict, total=False):
    packet: Annotated[int, keep_last]  # parallel subgraphs hand their whole state back
    parts: Annotated[list[str], operator.add]
    counts: Annotated[dict[str, int], merge_counts]


@dataclass(frozen=True)
class Execution:
    """One execution of a node: its name, the span it ran in (hex), the agent it ran inside (its inner
    working) when it is a subgraph's node, and whether it called a model (one turn)."""

    name: str
    span_id: str
    inner_of: str | None = None
    called_model: bool = False


@dataclass
class Log:
    executions: list[Execution] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, name: str, inner_of: str | None, called_model: bool) -> None:
        span_id = format(trace.get_current_span().get_span_context().span_id, "016x")
        with self.lock:  # parallel branches run in threads
            self.executions.append(Execution(name, span_id, inner_of, called_model))


@dataclass
class RandomApp:
    """A compiled graph, what it should do, and the log its runs append to."""

    graph: Any
    name: str
    log: Log
    #: The top-level nodes that are agents (subgraphs, nodes marked by metadata).
    agents: frozenset[str]
    #: Send target -> packets sent per run of the fan-out (each is one spawn).
    sends: dict[str, int]
    #: Subgraph agent -> the node it hands off to with ``Command.PARENT``.
    handoffs: dict[str, str]
    #: Subgraph agent inside a subgraph agent -> the agent it runs in.
    enclosing: dict[str, str]
    #: Subgraph agent -> its first inner node (which runs once per run of the agent).
    first_inner: dict[str, str]
    #: How it is run (``episodes.MODES``: invoke, ainvoke, stream, astream, batch, abatch, astream_events).
    mode: str
    shape: list[str]
    #: Whether tasks run at once (Send fan-outs, parallel branches): the order of their events is a race.
    parallel: bool
    #: Whether the run's last step runs two nodes at once: which one ends the run (the one its stop names,
    #: the integration's "last node": the one whose completion ended the run) is a race.
    racing_end: bool


class Builder:
    def __init__(self, rng: random.Random, log: Log, graph_name: str) -> None:
        self.rng = rng
        self.log = log
        self.graph = StateGraph(State)
        self.used: set[str] = set()
        # A node named like the graph (its run's actor shares the name), when LangGraph allows it.
        self.pool = [*NAMES, *([graph_name] if not set(graph_name) & set(":|") else [])]
        self.agents: set[str] = set()
        self.sends: dict[str, int] = {}
        self.first_inner: dict[str, str] = {}
        self.handoffs: dict[str, str] = {}
        self.enclosing: dict[str, str] = {}
        self.shape: list[str] = []
        self.parallel = False
        self.racing_end = False

    def fresh(self, pool: list[str] | None = None, used: set[str] | None = None) -> str:
        pool = self.pool if pool is None else pool
        used = self.used if used is None else used
        free = [n for n in pool if n not in used]
        name = self.rng.choice(free) if free else f"n{len(used)}"
        used.add(name)
        return name

    def logger(self, name: str, inner_of: str | None = None,
               then: Callable[[State], Any] | None = None) -> Callable[[State], Any]:
        model = ScriptedChatModel(replies=[AIMessage("ok")]) if self.rng.random() < 0.3 else None

        def node(state: State) -> Any:
            self.log.record(name, inner_of, model is not None)
            if model is not None:
                model.invoke([HumanMessage(name)])
            return then(state) if then is not None else {"parts": [name]}

        return node

    def add(self, name: str, then: Callable[[State], Any] | None = None, **kwargs: Any) -> None:
        self.graph.add_node(name, self.logger(name, then=then), **kwargs)

    def worker(self, name: str) -> None:
        """Add a node that does work: a plain node, or an agent (marked by metadata, or a subgraph)."""
        flavour = self.rng.choice(("plain", "plain", "agent", "subgraph"))
        if flavour == "plain":
            self.add(name)
        elif flavour == "agent":
            self.agents.add(name)
            self.add(name, metadata={AGENT_METADATA_KEY: True})
        else:
            self.subgraph(name)

    def subgraph(self, name: str, handoff_to: str | None = None, parent: StateGraph | None = None) -> None:
        """A compiled subgraph as node ``name`` of ``parent`` (an agent): a chain of inner nodes, maybe with a
        ``Send`` fan-out of its own or a subgraph agent of its own (``parent``: inside one already), or whose
        last node hands off to ``handoff_to`` (``Command.PARENT``). Inner names may repeat outer ones (and the
        subgraph's name the graph's): they are the agent's inner working, never actors."""
        self.agents.add(name)
        inner = StateGraph(State)
        used: set[str] = set()
        names = [self.fresh(self.pool, used) for _ in range(self.rng.randint(1, 3))]
        self.first_inner[name] = names[0]
        for inner_name in names[:-1] if handoff_to else names:
            inner.add_node(inner_name, self.logger(inner_name, inner_of=name))
        if handoff_to:
            self.handoffs[name] = handoff_to
            inner.add_node(names[-1], self.logger(names[-1], name, lambda state: Command(
                graph=Command.PARENT, goto=handoff_to, update={"parts": ["handoff"]})))
        inner.add_edge(START, names[0])
        for a, b in itertools.pairwise(names):
            inner.add_edge(a, b)
        if not handoff_to and self.rng.random() < 0.3:
            self.parallel = True
            target, packets = self.fresh(self.pool, used), self.rng.randint(1, 3)
            inner.add_node(target, self.logger(target, inner_of=name))
            inner.add_conditional_edges(names[-1], lambda state: [Send(target, {"packet": i})
                                                                 for i in range(packets)], [target])
        if not handoff_to and parent is None and self.rng.random() < 0.3:
            nested = self.fresh([n for n in self.pool if n not in used])  # an agent in it stays an agent
            self.enclosing[nested] = name
            self.subgraph(nested, parent=inner)
            inner.add_edge(names[-1], nested)
        (self.graph if parent is None else parent).add_node(
            name, inner.compile(name=self.rng.choice(self.pool)),
            destinations=(handoff_to,) if handoff_to else None)

    def segment(self, kind: str, nxt: str) -> str:
        """Add one segment handing over to ``nxt`` (a node or END); return its entry node."""
        self.shape.append(kind)
        node = self.fresh()
        if kind == "plain":
            self.add(node)
            self.graph.add_edge(node, nxt)
        elif kind == "command":
            self.add(node, lambda state: Command(goto=nxt, update={"parts": ["c"]}), destinations=(nxt,))
        elif kind == "conditional":
            options = [self.fresh(), self.fresh()]
            for option in options:
                self.worker(option)
                self.graph.add_edge(option, nxt)
            self.add(node)
            how = self.rng.choice(("one", "path_map", "both"))
            if how == "one":
                choice = self.rng.choice(options)
                self.graph.add_conditional_edges(node, lambda state: choice, options)
            elif how == "path_map":  # the router returns a key, not a node name
                key = self.rng.choice(("left", "right"))
                self.graph.add_conditional_edges(node, lambda state: key, dict(zip(("left", "right"), options,
                                                                                   strict=True)))
            else:  # both: parallel branches, joined by nxt
                self.parallel = True
                self.racing_end |= nxt == END
                self.graph.add_conditional_edges(node, lambda state: options, options)
        elif kind == "handoff":
            if nxt == END:
                self.subgraph(node)
                self.graph.add_edge(node, nxt)
            else:
                self.subgraph(node, handoff_to=nxt)
        elif kind in ("send", "send_command"):
            target, reducer = self.fresh(), self.fresh()
            packets = self.rng.randint(1, 5)
            self.parallel = True
            self.sends[target] = packets
            self.worker(target)
            self.add(reducer)
            self.graph.add_edge(target, reducer)
            self.graph.add_edge(reducer, nxt)

            def fan_out(state: State) -> list[Send]:
                return [Send(target, {"packet": i}) for i in range(packets)]

            if kind == "send":
                self.add(node)
                self.graph.add_conditional_edges(node, fan_out, [target])
            else:
                self.add(node, lambda state: Command(goto=fan_out(state)), destinations=(target,))
        elif kind in ("parallel", "join_edge", "parallel_command"):
            left, right, join = self.fresh(), self.fresh(), self.fresh()
            self.parallel = True
            self.worker(left)
            self.worker(right)
            self.add(join)
            if kind == "parallel_command":
                self.add(node, lambda state: Command(goto=[left, right]), destinations=(left, right))
            else:
                self.add(node)
                self.graph.add_edge(node, left)
                self.graph.add_edge(node, right)
            if kind == "join_edge":
                self.graph.add_edge([left, right], join)  # a waiting edge: the join runs once both ran
            else:
                self.graph.add_edge(left, join)
                self.graph.add_edge(right, join)
            self.graph.add_edge(join, nxt)
        elif kind == "loop":
            body, bound = self.fresh(), self.rng.randint(1, 3)

            def count(state: State) -> dict[str, Any]:
                return {"counts": {node: state.get("counts", {}).get(node, 0) + 1}}

            def again(state: State) -> str:
                return body if state["counts"][node] <= bound else nxt

            self.add(node, count)
            self.worker(body)
            self.graph.add_edge(body, node)
            self.graph.add_conditional_edges(node, again, [body, nxt])
        elif kind == "subgraph":
            self.subgraph(node)
            self.graph.add_edge(node, nxt)
        elif kind == "agent":
            self.agents.add(node)
            self.add(node, metadata={AGENT_METADATA_KEY: True})
            self.graph.add_edge(node, nxt)
        else:
            raise ValueError(kind)
        return node


def random_app(seed: int) -> RandomApp:
    rng = random.Random(seed)
    name = rng.choice(GRAPH_NAMES)
    log = Log()
    builder = Builder(rng, log, name)
    entry: str = END
    for kind in [rng.choice(SEGMENTS) for _ in range(rng.randint(1, 5))]:
        entry = builder.segment(kind, entry)
    if rng.random() < 0.5:
        builder.graph.add_edge(START, entry)
    else:
        first = entry
        builder.graph.add_conditional_edges(START, lambda state: first, [first])  # the run decides
    return RandomApp(builder.graph.compile(name=name), name, log, frozenset(builder.agents), builder.sends,
                     builder.handoffs, builder.enclosing, builder.first_inner, mode=rng.choice(MODES),
                     shape=builder.shape[::-1], parallel=builder.parallel,
                     racing_end=builder.racing_end)
