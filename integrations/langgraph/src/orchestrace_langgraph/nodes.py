"""One span per node execution, around LangGraph's task runner (``run_with_retry`` / ``arun_with_retry``).

The span's context is attached inside the task, so whatever the node does (model calls, tools, subgraphs,
plain OTel spans) nests under it, also in thread-pool and asyncio parallel branches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from langgraph.constants import START
from langgraph.errors import GraphInterrupt, ParentCommand
from langgraph.prebuilt import ToolNode
from opentelemetry import context as otel_context
from opentelemetry.trace import Link
from opentelemetry.util.types import AttributeValue
from orchestrace import semconv as sc
from orchestrace.instrumentation import (
    Invocation,
    Telemetry,
    already_traced,
    declared_agent,
    failsafe,
    log_once,
    start_agent,
    start_step,
)

from orchestrace_langgraph import compat, routing
from orchestrace_langgraph.actors import (
    InterruptLog,
    NamespaceIndex,
    Node,
    Run,
    SendResult,
    current_actor,
    current_run,
    node_values,
    parent_context,
)
from orchestrace_langgraph.content import content_ref
from orchestrace_langgraph.values import end

#: ``add_node(..., metadata={AGENT_METADATA_KEY: True})`` marks a node as an agent (an ``invoke_agent`` span).
AGENT_METADATA_KEY: Final = "orchestrace.agent"
#: Optional node metadata: the agent's role (``orchestrace.agent.role``).
AGENT_ROLE_METADATA_KEY: Final = sc.ORCH_AGENT_ROLE

_MAX_TRIGGERS = 16


@failsafe(None)
def _packet_ref(packet: Any) -> str | None:
    """A Send's payload's content ref (the node's span starts without it if that fails)."""
    return content_ref(packet)


@dataclass(slots=True)
class _Started:
    task: Any  # LangGraph's task object
    read: compat.Task
    node: Node | None  # None for LangGraph's internal input task, which gets no span
    run: Run | None
    ctx: otel_context.Context
    tool_node: bool = False  # a ToolNode: its results are tool results, not inputs to aggregate


class NodeTracer:
    def __init__(self, telemetry: Telemetry, namespaces: NamespaceIndex, interrupts: InterruptLog) -> None:
        self._telemetry = telemetry
        self._namespaces = namespaces
        self._interrupts = interrupts

    # --- the wrappers (the user's node runs outside every guard) --------------------------------------------
    def run_with_retry(self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> Any:
        started = self._start(args[0] if args else kwargs.get("task"))
        if started is None:
            return wrapped(*args, **kwargs)
        token = otel_context.attach(started.ctx)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            self._finish(started, None, exc)
            raise
        finally:
            otel_context.detach(token)
        self._finish(started, result, None)
        return result

    def arun_with_retry(self, wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Awaitable[Any]:
        return self._arun(wrapped, args, kwargs)

    async def _arun(self, wrapped: Callable[..., Awaitable[Any]], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        started = self._start(args[0] if args else kwargs.get("task"))
        if started is None:
            return await wrapped(*args, **kwargs)
        token = otel_context.attach(started.ctx)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            self._finish(started, None, exc)
            raise
        finally:
            otel_context.detach(token)
        self._finish(started, result, None)
        return result

    # --- our own code: never raises ------------------------------------------------------------------------
    # Guarded inline rather than by @failsafe: every node execution passes here, and a call costs as much as
    # several of the reads below.
    def _start(self, task: Any) -> _Started | None:
        try:
            return self._started(task)
        except Exception as exc:
            log_once(_WHERE_START, exc)
            return None

    def _started(self, task: Any) -> _Started | None:
        read = compat.read_task(task)
        if read is None:
            return None
        ctx = otel_context.get_current()  # read once: the run, the parent span and the node's context
        run = current_run(ctx)
        if read.name == START:
            return _Started(task, read, None, run, ctx)
        namespace = read.namespace
        # The run's thread id is on its workflow span; the collector names the actor from langgraph.node.
        attrs: dict[str, AttributeValue] = {
            sc.LANGGRAPH_NODE: read.name,
            sc.LANGGRAPH_TASK_ID: read.id,
            sc.LANGGRAPH_CHECKPOINT_NS: namespace,
        }
        triggers: tuple[str, ...] = ()
        if not read.pushed:  # a pushed task's only trigger is the Send (its spawn event says so already)
            triggers = read.triggers
            attrs[sc.LANGGRAPH_TRIGGERS] = triggers[:_MAX_TRIGGERS]
        elif not isinstance(read.first_step, ToolNode):
            # What its Send gave it (the Send's spawn has the same ref): the collector gives each spawn of a
            # fan-out to the task that took its payload, whichever started first.
            packet = (run.packet_ref(read.input) if run is not None else None) or _packet_ref(read.input)
            if packet is not None:
                attrs[sc.ORCH_INPUT_REF] = packet
        step = read.step
        if isinstance(step, int):
            attrs[sc.LANGGRAPH_STEP] = step
        links: list[Link] | None = None
        if run is not None:
            if run.pending_wiring:  # most node starts: no call
                routing.flush_wiring(run, step)  # the routes that led here, before this node's span starts
            if run.send_results and not read.pushed:
                links = run.aggregate_links(triggers)
        parent = parent_context(context=ctx) or ctx
        node = Node(read.name, namespace=namespace)
        invocation: Invocation
        tool_node = False
        # An agent: a node that runs a compiled graph (a prebuilt react agent, the agents of
        # langgraph-supervisor and langgraph-swarm: LangGraph finds them as the task's subgraphs), or one
        # marked as such.
        if read.runs_graph or read.metadata.get(AGENT_METADATA_KEY):
            role = read.metadata.get(AGENT_ROLE_METADATA_KEY)
            # The SDK sees the node as the running agent (ot.message, ot.spawn, nested @ot.agent inside it),
            # and an @ot.agent node function adds no second agent span.
            values = {**node_values(node),
                      **already_traced(declared_agent(compat.node_functions(read.first_step)))}
            invocation = start_agent(self._telemetry, read.name, agent_id=read.id,
                                     role=role if isinstance(role, str) else None, context=parent,
                                     attributes=attrs, links=links, values=values)
            node.agent_id = read.id
            # An agent's input (a plain node's repeats the state): its messages, with capture on.
            invocation.set_input(read.input, ref=False)
        else:
            tool_node = isinstance(read.first_step, ToolNode)
            operation = sc.OPERATION_TOOL_NODE if tool_node else sc.OPERATION_NODE
            invocation = start_step(self._telemetry, read.name, operation=operation, context=parent,
                                    attributes=attrs, links=links, values=node_values(node))
        node.own.invocation = invocation
        self._namespaces.add(node)
        return _Started(task, read, node, run, invocation.context, tool_node)

    def _finish(self, started: _Started, result: Any, exc: BaseException | None) -> None:
        try:
            self._finished(started, result, exc)
        except Exception as error:
            log_once(_WHERE_FINISH, error)

    def _finished(self, started: _Started, result: Any, exc: BaseException | None) -> None:
        read, node, run = started.read, started.node, started.run
        actor = node or current_actor()
        invocation = node.own.invocation if node is not None else None
        ended = False
        try:
            # A Send task's channels (for the node aggregating it), read in the same pass as the packets.
            sends, channels = compat.written(started.task, read.pushed and not started.tool_node)
            if sends and actor is not None:
                routing.record_sends(actor, sends, run)
            if exc is None and run is not None:
                targets = run.routes.get(read.name)
                if targets:  # the graph's fixed edges out of it, recorded by routing.flush_wiring
                    run.add_wiring(read.step, targets)
            if isinstance(exc, ParentCommand):
                routing.record_handoff(exc, self._namespaces, actor)
            elif isinstance(exc, GraphInterrupt):
                if run is not None:
                    run.top().interrupted = True
                if actor is not None:
                    thread_id = compat.configurable(read.config).get("thread_id")
                    routing.record_interrupt(actor, exc, self._interrupts,
                                             str(thread_id) if thread_id is not None else None)
            if invocation is None or exc is not None:
                return
            ref = content_ref(result)
            if run is not None:
                run.node_completed(read.name, read.step)
                if channels:
                    run.add_send_result(SendResult(invocation.span.get_span_context(), channels))
            invocation.stop(result, ref=ref)  # an agent's output content too, with capture on
            ended = True
        finally:
            if node is not None and invocation is not None:
                self._namespaces.remove(node)
                if not ended:
                    end(invocation, exc)


_WHERE_START = f"{__name__}.NodeTracer._start"
_WHERE_FINISH = f"{__name__}.NodeTracer._finish"


def config_context(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    """Wrapper of LangGraph's ``_set_config_context``, which runs in the copied context a node's function
    (or a step of its runnable sequence) then runs in, after the callbacks started that run. When a LangChain
    callback tracer made its own span current there (OpenLLMetry's, which follows LangChain's run tree into
    a trace of its own), our innermost span is made current again in that context: the spans the user's
    code starts (``ot.aggregate``, ``@ot.tool``, its own) stay in our tree and our trace, as without it."""
    token = wrapped(*args, **kwargs)
    try:  # guarded inline rather than by @failsafe: it runs before every node function, one frame fewer
        ours = parent_context()  # None unless a callback tracer's span is current
        if ours is not None:
            # No detach: the context is a copy LangGraph drops when the function returns.
            otel_context.attach(ours)
    except Exception as exc:
        log_once("orchestrace_langgraph.nodes.config_context", exc)
    return token
