"""Every use of LangGraph's internals, in one place: what is patched, and every read of an internal object.

LangGraph's public API does not show what orchestration needs (a node execution's task, the branch a
conditional edge chose, the ``Command`` a node returned, a static breakpoint), so the integration wraps a few
private functions and reads fields of LangGraph's internal objects. When LangGraph changes them:

* :func:`resolve` runs at ``instrument()``: a patch target that is gone is skipped with a ``RuntimeWarning``
  naming what is no longer recorded; everything else is still instrumented and the graphs run as before.
* Every read below returns a default (``None``, empty) when the object no longer has the expected shape:
  a read never raises into the user's program (the span it served is then recorded with less, or not).

Public LangGraph API (``Pregel``, ``langgraph.types``, ``langgraph.errors``, ``langgraph.constants``,
``ToolNode``) is imported where it is used, not here.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from langgraph.constants import END
from langgraph.types import Command, Send

_SWARM_STATE: object = None  # langgraph-swarm's graphs' state schema, when it is installed
with contextlib.suppress(ImportError):  # without langgraph-swarm no graph is a swarm
    from langgraph_swarm import SwarmState as _SWARM_STATE

try:  # constants LangGraph keeps in a private module; the values they have had since langgraph 1.0 otherwise
    from langgraph._internal._constants import (
        CONF,
        CONFIG_KEY_CHECKPOINT_NS,
        CONFIG_KEY_CHECKPOINTER,
        CONFIG_KEY_TASK_ID,
        PUSH,
        TASKS,
    )
except ImportError:  # pragma: no cover - only when LangGraph moved them
    CONF, CONFIG_KEY_CHECKPOINT_NS, CONFIG_KEY_TASK_ID = "configurable", "checkpoint_ns", "__pregel_task_id"
    CONFIG_KEY_CHECKPOINTER, PUSH, TASKS = "__pregel_checkpointer", "__pregel_push", "__pregel_tasks"


@dataclass(frozen=True)
class Patch:
    """A function the integration wraps: ``module[.owner].attribute``, and what is lost without it."""

    module: str
    owner: str | None
    attribute: str
    records: str

    @property
    def path(self) -> str:
        return ".".join(part for part in (self.module, self.owner, self.attribute) if part)


STREAM = Patch("langgraph.pregel", "Pregel", "stream", "graph runs (invoke_workflow spans) under invoke")
ASTREAM = Patch("langgraph.pregel", "Pregel", "astream", "graph runs under ainvoke/astream/astream_events")
RUN_WITH_RETRY = Patch("langgraph.pregel._runner", None, "run_with_retry", "node executions (sync)")
ARUN_WITH_RETRY = Patch("langgraph.pregel._runner", None, "arun_with_retry", "node executions (async)")
BRANCH_FINISH = Patch("langgraph.graph._branch", "BranchSpec", "_finish", "conditional edges' choices")
ASSEMBLE_WRITES = Patch("langgraph.pregel._write", None, "_assemble_writes", "the Command a node returned")
TICK = Patch("langgraph.pregel._loop", "PregelLoop", "tick", "interrupt_before breakpoints")
AFTER_TICK = Patch("langgraph.pregel._loop", "PregelLoop", "after_tick", "interrupt_after breakpoints")
CONFIG_CONTEXT = Patch("langgraph._internal._runnable", None, "_set_config_context",
                       "user spans in node code beside a LangChain callback tracer (OpenLLMetry)")
TOOL_RUN = Patch("langchain_core.tools", "BaseTool", "run", "tool calls (sync)")
TOOL_ARUN = Patch("langchain_core.tools", "BaseTool", "arun", "tool calls (async)")


def resolve(patch: Patch) -> Any | None:
    """The object whose ``patch.attribute`` is wrapped, or ``None`` (with a warning) when it is gone."""
    try:
        owner: Any = importlib.import_module(patch.module)
        if patch.owner is not None:
            owner = getattr(owner, patch.owner)
        found = callable(getattr(owner, patch.attribute))
    except (ImportError, AttributeError):
        found = False
    if not found:
        warnings.warn(f"orchestrace_langgraph: {patch.path} is not in this LangGraph version; "
                      f"{patch.records} are not recorded", RuntimeWarning, stacklevel=3)
        return None
    return owner


def _safe(default: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A read of LangGraph's internals: ``default`` when the object does not have the expected shape."""

    def decorate(read: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any) -> Any:
            try:
                return read(*args)
            except Exception:
                return default

        guarded.__doc__, guarded.__name__ = read.__doc__, read.__name__
        return guarded

    return decorate


@_safe(False)
def is_swarm(graph: Any) -> bool:
    """A langgraph-swarm graph (``create_swarm``, or a ``StateGraph`` of its ``SwarmState``): the framework,
    not the application, steers it, by handoffs between its agents."""
    # A TypedDict keeps the schemas it extends in ``__orig_bases__`` only (no issubclass).
    pending = [graph.builder.state_schema]
    while pending and _SWARM_STATE is not None:
        schema = pending.pop()
        if schema is _SWARM_STATE:
            return True
        pending.extend(getattr(schema, "__orig_bases__", ()))
    return False


# --- configs ------------------------------------------------------------------------------------------------
def configurable(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``configurable`` part of a run's or task's config (read several times a run: guarded inline)."""
    try:
        return config.get(CONF) or {}
    except Exception:
        return {}


def is_subgraph_run(conf: Mapping[str, Any]) -> bool:
    """A run started by a node of another graph (a subgraph): its config names the task running it."""
    return CONFIG_KEY_TASK_ID in conf


def checkpoint_ns(conf: Mapping[str, Any]) -> str:
    return str(conf.get(CONFIG_KEY_CHECKPOINT_NS, ""))


@_safe(True)
def saves_checkpoints(graph: Any, conf: Mapping[str, Any]) -> bool:
    """Whether a run of ``graph`` with this ``configurable`` writes checkpoints (its own saver, or one the
    config lends it, as LangGraph resolves them); ``True`` when that cannot be told."""
    own = graph.checkpointer
    return own is not False and (CONFIG_KEY_CHECKPOINTER in conf or own is not None)


def checkpoint_config(thread_id: object) -> dict[str, Any]:
    """The config that reads a thread's latest top-level checkpoint."""
    return {CONF: {"thread_id": thread_id, "checkpoint_ns": ""}}


# --- node executions (PregelExecutableTask) -----------------------------------------------------------------
class Task(NamedTuple):
    """What a node execution's task tells, read once."""

    name: str
    id: str
    config: Mapping[str, Any]
    metadata: Mapping[str, Any]
    input: Any
    triggers: tuple[str, ...]
    pushed: bool  # scheduled by a Send (or a functional-API call) rather than by channel triggers
    runs_graph: bool  # the node runs a compiled graph (LangGraph found it among the task's subgraphs)
    first_step: Any  # what the node runs (its runnable, before its writers)
    namespace: str  # its checkpoint namespace (``checkpoint_ns`` of its ``configurable``)
    step: object  # ``langgraph_step`` of its metadata (an int; ``None`` when absent)


def read_task(task: Any) -> Task | None:
    """The task a node execution runs, or ``None`` when ``task`` is not one LangGraph's runner passes."""
    # One read per node execution, in as few calls as it takes (each costs as much as several reads): guarded
    # inline, the tuple made without the named tuple's Python ``__new__``, plain tuples for isinstance (a
    # union type is the slower check).
    try:
        config = task.config
        proc = task.proc
        steps = getattr(proc, "steps", None)
        path = task.path
        metadata = config.get("metadata") or {}
        return tuple.__new__(Task, (
            str(task.name), str(task.id), config, metadata, task.input, tuple(map(str, task.triggers)),
            bool(path) and path[0] == PUSH, bool(task.subgraphs),
            steps[0] if isinstance(steps, (list, tuple)) and steps else proc,
            str((config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINT_NS, "")), metadata.get("langgraph_step")))
    except Exception:
        return None


def written(task: Any, channels: bool) -> tuple[list[Send], frozenset[str]]:
    """The ``Send`` packets a node execution wrote, and (``channels``: for a ``Send`` task, which its
    aggregating node reads) the channels it wrote."""
    # Every node execution's writes pass here: one loop, guarded inline (a comprehension and a guard are a
    # call each, and most executions write no Send).
    sends: list[Send] = []
    names: set[str] = set()
    try:
        for channel, value in task.writes:
            if channel == TASKS and isinstance(value, Send):
                sends.append(value)
            if channels:
                names.add(str(channel))
    except Exception:
        return [], frozenset()
    return sends, frozenset(names)


def node_functions(first_step: Any) -> tuple[Any, Any]:
    """The node's sync and async functions (a ``RunnableCallable``'s), when it has them."""
    return getattr(first_step, "func", None), getattr(first_step, "afunc", None)


# --- graphs -------------------------------------------------------------------------------------------------
_Edges = Mapping[str, tuple[str, ...]]


class Wiring(NamedTuple):
    """What a compiled graph's builder says about its routes."""

    #: Fixed edges, source -> targets (a join's edge from each of its sources).
    edges: _Edges
    #: Node -> the nodes a ``Command`` it returns may go to, where declared (``add_node(destinations=...)``
    #: or the ``Command[Literal[...]]`` return annotation): a ``Command``'s options.
    destinations: _Edges
    #: ``edges`` without ``END``: the routes to nodes a source's completion takes (read per node execution).
    routes: _Edges
    #: The graph is a langgraph-swarm graph (:func:`is_swarm`).
    swarm: bool = False


NO_WIRING = Wiring({}, {}, {})
#: Compiled graph -> (its builder, the wiring read from it): a compiled graph's edges (and state schema) do
#: not change (LangGraph warns that an edge added after ``compile`` is not reflected), and every run reads
#: them.
_WIRING: weakref.WeakKeyDictionary[Any, tuple[Any, Wiring]] = weakref.WeakKeyDictionary()


@_safe(NO_WIRING)
def graph_wiring(graph: Any) -> Wiring:
    """A compiled ``StateGraph``'s fixed edges, declared ``Command`` destinations, and whether it is a
    swarm."""
    builder = getattr(graph, "builder", None)
    try:
        cached = _WIRING.get(graph)
    except TypeError:  # not weakly referable, or unhashable: read every time
        cached = None
    if cached is not None and cached[0] is builder:
        return cached[1]
    edges = _read_fixed_edges(builder)
    routes = {source: kept for source, targets in edges.items()
              if (kept := tuple(target for target in targets if target != END))}
    wiring = Wiring(edges, _read_destinations(builder), routes, is_swarm(graph))
    with contextlib.suppress(TypeError):
        _WIRING[graph] = (builder, wiring)
    return wiring


def _read_fixed_edges(builder: Any) -> dict[str, tuple[str, ...]]:
    edges = getattr(builder, "edges", None)
    if not isinstance(edges, set):
        return {}
    out: dict[str, list[str]] = {}
    for start, end in edges:
        out.setdefault(start, []).append(end)
    for starts, end in getattr(builder, "waiting_edges", None) or ():
        for start in starts:
            out.setdefault(start, []).append(end)
    return {start: tuple(sorted(set(ends))) for start, ends in out.items()}


def _read_destinations(builder: Any) -> dict[str, tuple[str, ...]]:
    nodes = getattr(builder, "nodes", None)
    if not isinstance(nodes, Mapping):
        return {}
    out = {}
    for name, spec in nodes.items():
        ends = getattr(spec, "ends", None)  # a tuple of nodes, or a dict node -> edge label
        if isinstance(ends, tuple | dict) and ends:
            out[str(name)] = tuple(str(end) for end in ends)
    return out


@_safe({})
def branch_ends(branch: Any) -> Mapping[Any, Any]:
    """A conditional edge's path map (the value its function returned -> the node)."""
    return getattr(branch, "ends", None) or {}


def returned_commands(writes: Any) -> list[Command]:
    """The ``Command`` objects among a node's writes (itself, or inside a list such as a ToolNode's output),
    as its writers see them (entries with a mapper)."""
    # Every write of every node passes here: guarded inline, the value read only behind a mapper.
    found: list[Command] = []
    try:
        if isinstance(writes, (list, tuple)):
            for write in writes:
                if getattr(write, "mapper", None) is not None:
                    value = getattr(write, "value", None)
                    if isinstance(value, (Command, list, tuple)):  # what commands_in finds in: most are not
                        found.extend(commands_in(value))
    except Exception:
        return []
    return found


def commands_in(value: Any) -> list[Command]:
    if isinstance(value, Command):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Command)]
    return []


@_safe(None)
def handoff_command(exc: BaseException) -> Command | None:
    """The ``Command`` a ``ParentCommand`` carries, with ``graph`` rewritten by LangGraph's runner to the
    checkpoint namespace of the parent graph's node it is for."""
    command = exc.args[0]
    return command if isinstance(command, Command) and isinstance(command.graph, str) else None


@_safe(())
def interrupts_of(exc: BaseException) -> Collection[Any]:
    """The interrupts a ``GraphInterrupt`` carries (none for a static breakpoint's)."""
    return exc.args[0] if exc.args and isinstance(exc.args[0], list | tuple) else ()


# --- the loop (static breakpoints) --------------------------------------------------------------------------
def may_interrupt_after(loop: Any) -> bool:
    """Whether the loop has ``interrupt_after`` nodes (else ``after_tick`` never pauses); ``True`` when that
    cannot be told. Read at every step: guarded inline."""
    try:
        return bool(loop.interrupt_after)
    except Exception:
        return True


@_safe({})
def loop_tasks(loop: Any) -> Mapping[str, Any]:
    return dict(loop.tasks)


@_safe(None)
def breakpoint_nodes(loop: Any, tasks: Mapping[str, Any], before: str, after: str,
                     ) -> tuple[str, list[str]] | None:
    """(``before`` or ``after``, the nodes) when the loop paused at a static breakpoint, else ``None``."""
    status = getattr(loop, "status", None)
    if status not in (before, after):
        return None
    where = loop.interrupt_before if status == before else loop.interrupt_after
    return status, sorted({task.name for task in tasks.values() if where == "*" or task.name in where})

