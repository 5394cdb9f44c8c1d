"""LangGraph's control flow as orchestration events on the span of the node (or graph run) that decided.

* ``Send`` packets (from a conditional edge or ``Command(goto=[Send, ...])``): one spawn decision, then one
  spawn per packet, naming the target node.
* ``Command(goto=node)`` returned by a node, or a conditional edge choosing a node: a delegate decision,
  with its options (``orchestrace.decision.options``) where the graph declares them: the conditional edge's
  path map, the node's ``destinations`` (or its ``Command[Literal[...]]`` annotation).
* A fixed edge of the graph (``add_edge``, also from ``START``), after its source node completed: a delegate
  decision of the graph run itself (reason ``edge``), once per target and step: the graph's wiring chose.
  A transition a node chose is its decision alone: the collector links the target's start to it.
* A conditional edge or ``Command`` choosing ``END``: a stop.
* A top-level run that ends because its last node has no next node (no explicit ``END`` route, no
  interrupt): a stop on the run, naming that node (langgraph-supervisor's final answer ends a run this way);
  reason ``edge`` when that node's fixed edge to ``END`` took it (the graph's wiring, like any fixed edge).
* ``Command(graph=Command.PARENT)`` (the ``ParentCommand`` exception; ``transfer_to_*`` tools of
  langgraph-supervisor and langgraph-swarm): a handoff delegate from the handing-off node to the target,
  recorded on that node of the parent graph, with its options where the parent graph declares the node's
  ``destinations``.
* ``interrupt()`` (``GraphInterrupt``): a human intervention of kind ``interrupt``; a static breakpoint
  (``breakpoints.py``): one of kind ``interrupt_before`` / ``interrupt_after``. The resume: one of kind
  ``resume`` on the resumed run, and the graph's delegate (reason ``resume``) to each node that asked, which
  runs again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langgraph.constants import END
from langgraph.errors import GraphInterrupt, ParentCommand
from langgraph.types import Command, Send
from orchestrace import semconv as sc
from orchestrace.instrumentation import failsafe

from orchestrace_langgraph import compat
from orchestrace_langgraph.actors import (
    Actor,
    InterruptLog,
    NamespaceIndex,
    Node,
    Run,
    current_actor,
    current_run,
)
from orchestrace_langgraph.content import content_ref
from orchestrace_langgraph.values import handed_off

#: ``orchestrace.reason`` of a stop: how the route to ``END`` was taken.
REASON_CONDITIONAL_EDGE = "conditional_edge"
REASON_COMMAND = "command"
#: ``orchestrace.reason`` of a delegate along a fixed edge of the graph (the graph's, not a node's choice).
REASON_EDGE = "edge"
#: ``orchestrace.reason`` of a delegate to a node that asked a human and runs again on the resume.
REASON_RESUME = "resume"
#: ``orchestrace.reason`` of the stop of a run whose last node had no next node.
REASON_NO_NEXT_NODE = "no_next_node"
#: ``orchestrace.reason`` of a handoff delegate.
REASON_PARENT_COMMAND = "command_parent"
HUMAN_INTERRUPT = "interrupt"
HUMAN_RESUME = "resume"

_MAX_OPTIONS = 32

def _goto_list(goto: Any) -> list[Any]:
    return list(goto) if isinstance(goto, (list, tuple)) else [goto]


def record_sends(actor: Actor, sends: Sequence[Send], run: Run | None = None) -> None:
    """A spawn decision and a spawn per packet; ``run`` (the graph run the packets' tasks belong to) keeps
    each payload's ref for the task it starts."""
    if not sends:
        return
    targets = sorted({s.node for s in sends})
    events = actor.events
    events.decide(sc.DECISION_SPAWN, target=targets[0] if len(targets) == 1 else None,
                  options=targets[:_MAX_OPTIONS])
    for send in sends:
        ref = content_ref(send.arg)
        if run is not None:
            run.sent(send.arg, ref)
        events.spawn(send.node, content=send.arg, ref=ref)


def flush_wiring(run: Run, step: object = None) -> None:
    """Record the fixed routes taken before ``step`` (every one when ``None``): when the step they lead to
    begins, or the run ends. LangGraph follows them once the step that took them has ended, so they come
    after every return of that step, whichever node took them first."""
    for target in run.take_wiring(step):
        run.events.decide(sc.DECISION_DELEGATE, target=target, reason=REASON_EDGE)


def record_routes(actor: Actor, destinations: Iterable[Any], reason: str,
                  options: Sequence[str] = ()) -> None:
    """Routes to named nodes (``Send`` packets are recorded from the task's writes, not here)."""
    for dest in destinations:
        if not isinstance(dest, str):
            continue
        if dest == END:
            actor.events.stop(reason, sender=actor.name)
            run = current_run()
            if run is not None:
                run.routed_to_end = True
        else:
            actor.events.decide(sc.DECISION_DELEGATE, target=dest, reason=reason,
                                options=list(options)[:_MAX_OPTIONS] if options else None)


@failsafe(None)
def record_run_abandoned(run: Run) -> None:
    """A run that failed or was abandoned (or that ended: then nothing is left): the routes taken so far."""
    flush_wiring(run)


def record_run_end(run: Run) -> None:
    """A run that finished: the fixed routes its last nodes took, and for a top-level run its stop, unless a
    route to END said it or a human was asked (its caller, the run's end, is guarded)."""
    flush_wiring(run)
    last = run.last_node
    if run.parent is None and not run.routed_to_end and not run.interrupted and last is not None:
        # A fixed edge to END is the graph's wiring; a node with no next node chose to finish.
        run.events.stop(REASON_EDGE if END in run.edges.get(last, ()) else REASON_NO_NEXT_NODE, sender=last)


def record_commands(actor: Actor, value: Any) -> None:
    """Routes of the ``Command``s a node returned; their options are the node's declared destinations."""
    run = current_run()
    options = run.destinations.get(actor.name, ()) if run is not None and isinstance(actor, Node) else ()
    for command in compat.commands_in(value):
        if command.graph is None:
            record_routes(actor, _goto_list(command.goto), REASON_COMMAND, options)


def record_handoff(exc: ParentCommand, namespaces: NamespaceIndex, fallback: Actor | None) -> None:
    """Record a ``Command.PARENT`` once, on the node of the parent graph that the command is for.

    ``run_with_retry`` has already rewritten ``command.graph`` to that node's checkpoint namespace when the
    exception leaves the task that raised it; later wrappers see the same exception and skip it.
    """
    if getattr(exc, "_orchestrace_seen", False):
        return
    exc._orchestrace_seen = True  # type: ignore[attr-defined]
    command = compat.handoff_command(exc)
    if command is None:
        return
    actor = namespaces.get(str(command.graph)) or fallback
    if actor is None:
        return
    options: Sequence[str] | None = None
    if actor.invocation is not None:  # the node of the parent graph: LangGraph ends its task without raising
        handed_off(actor.invocation, command)
        # Its options: the destinations the parent graph declares for it, as for a Command it returns.
        run = current_run(actor.invocation.context) if isinstance(actor, Node) else None
        declared = run.destinations.get(actor.name) if run is not None else None
        options = list(declared)[:_MAX_OPTIONS] if declared else None
    targets = [g.node if isinstance(g, Send) else str(g) for g in _goto_list(command.goto) if g != ()]
    for target in targets or [""]:
        actor.events.delegate(target, reason=REASON_PARENT_COMMAND, handoff=True, sender=actor.name,
                              options=options)


def record_interrupt(actor: Actor, exc: GraphInterrupt, log: InterruptLog, thread_id: str | None) -> None:
    for interrupt in compat.interrupts_of(exc):
        interrupt_id = str(getattr(interrupt, "id", id(interrupt)))
        if not log.first_time(interrupt_id):
            continue  # already recorded by the node that asked, deeper in a subgraph
        if thread_id is not None:
            task = actor.namespace.split("|", 1)[0] if isinstance(actor, Node) else None
            log.asked(thread_id, actor.span.get_span_context(), task or None)
        actor.events.human_intervention(HUMAN_INTERRUPT, actor=actor.name,
                                        content=getattr(interrupt, "value", None))


def record_breakpoint(run: Run, kind: str, nodes: Sequence[str], log: InterruptLog) -> None:
    """A static breakpoint paused ``run`` (the run of the graph that has it) at ``nodes``."""
    run.top().interrupted = True
    if run.thread_id is not None:
        log.asked(run.thread_id, run.span.get_span_context())
    run.events.human_intervention(kind, reason=f"{kind}: {', '.join(nodes)}")


def record_resume(actor: Actor, value: Any, again: Sequence[str] = ()) -> None:
    """A run that continues a paused one: ``value`` is ``Command.resume`` (None after a breakpoint);
    ``again``: the nodes that asked (``interrupt()``) and run again, the graph's doing (reason ``resume``)."""
    actor.events.human_intervention(HUMAN_RESUME, content=value)
    for node in again:
        actor.events.decide(sc.DECISION_DELEGATE, target=node, reason=REASON_RESUME)


def channel_write(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    """Wrapper of ``_assemble_writes`` (called by ``ChannelWrite.do_write``): the ``Command`` a node returned,
    seen where its writers turn it into writes (every execution mode passes here; streaming modes do not
    return the node's value to the task runner)."""
    # The read is guarded itself and finds no Command in most writes: the recording's guard only then.
    commands = compat.returned_commands(args[0] if args else kwargs.get("writes"))
    if commands:
        _record_written_commands(commands)
    return wrapped(*args, **kwargs)


@failsafe(None)
def _record_written_commands(commands: list[Command]) -> None:
    actor = current_actor()
    if actor is None:
        return
    for command in commands:
        if actor.first_sight(command):
            record_commands(actor, command)


def branch_finish(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    """Wrapper of ``BranchSpec._finish``: a conditional edge's choice, recorded on the node it follows."""
    out = wrapped(*args, **kwargs)
    _record_branch(instance, args[2] if len(args) > 2 else kwargs.get("result"))
    return out


@failsafe(None)
def _record_branch(branch: Any, result: Any) -> None:
    actor = current_actor()
    if actor is None:
        return
    ends = compat.branch_ends(branch)
    chosen = _goto_list(result)
    if ends:
        chosen = [ends.get(r, r) if isinstance(r, str) else r for r in chosen]
    record_routes(actor, chosen, REASON_CONDITIONAL_EDGE, [str(v) for v in ends.values()])
