"""One span per node execution, around LangGraph's task runner (``run_with_retry`` / ``arun_with_retry``).

The span's context is attached inside the task, so whatever the node does (model calls, tools, subgraphs,
plain OTel spans) nests under it, also in thread-pool and asyncio parallel branches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from langgraph._internal._constants import CONF, CONFIG_KEY_CHECKPOINT_NS, PUSH, TASKS
from langgraph.constants import START
from langgraph.errors import GraphInterrupt, ParentCommand
from langgraph.prebuilt import ToolNode
from langgraph.types import PregelExecutableTask, Send
from opentelemetry import context as otel_context
from opentelemetry.trace import Link, Tracer
from opentelemetry.util.types import AttributeValue
from orchestrace import semconv as sc
from orchestrace.context import AGENT_KEY, AgentFrame, traced_by_caller
from orchestrace.decorators import decorated_spec
from orchestrace.failsafe import failsafe
from orchestrace.invocation import AgentSpec

from orchestrace_langgraph import routing
from orchestrace_langgraph.actors import (
    InterruptLog,
    NamespaceIndex,
    Node,
    Run,
    SendResult,
    current_actor,
    current_node,
    current_run,
    parent_context,
    with_node,
)
from orchestrace_langgraph.content import content_ref
from orchestrace_langgraph.values import input_attributes, set_outcome, set_output

#: ``add_node(..., metadata={AGENT_METADATA_KEY: True})`` marks a node as an agent (an ``invoke_agent`` span).
AGENT_METADATA_KEY: Final = "orchestrace.agent"
#: Optional node metadata: the agent's role (``orchestrace.agent.role``).
AGENT_ROLE_METADATA_KEY: Final = sc.ORCH_AGENT_ROLE

_MAX_TRIGGERS = 16


def is_agent(task: PregelExecutableTask) -> bool:
    """A node is an agent when it runs a compiled graph (a prebuilt react agent, the agents of
    langgraph-supervisor and langgraph-swarm: LangGraph finds them as the task's subgraphs) or is marked."""
    metadata = task.config.get("metadata") or {}
    return bool(task.subgraphs) or bool(metadata.get(AGENT_METADATA_KEY))


@dataclass(slots=True)
class _Started:
    task: PregelExecutableTask
    node: Node | None  # None for LangGraph's internal input task, which gets no span
    run: Run | None
    ctx: otel_context.Context
    thread_id: str | None
    pushed: bool = False  # scheduled by a Send
    tool_node: bool = False  # a ToolNode: its results are tool results, not inputs to aggregate


class NodeTracer:
    def __init__(self, tracer: Tracer, namespaces: NamespaceIndex, interrupts: InterruptLog) -> None:
        self._tracer = tracer
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

    # --- our own code: never raises -----------------------------------------------------------------------
    @failsafe(None)
    def _start(self, task: Any) -> _Started | None:
        if not isinstance(task, PregelExecutableTask):
            return None
        ctx = otel_context.get_current()  # read once: the run, the parent span and the node's context
        run = current_run(ctx)
        config = task.config
        conf = config.get(CONF) or {}
        metadata = config.get("metadata") or {}
        thread_id = conf.get("thread_id")
        thread_id = str(thread_id) if thread_id is not None else None
        if task.name == START:
            return _Started(task, None, run, ctx, thread_id)
        namespace = str(conf.get(CONFIG_KEY_CHECKPOINT_NS, ""))
        pushed = _pushed(task)
        # The run's thread id is on its workflow span; the collector names the actor from langgraph.node.
        attrs: dict[str, AttributeValue] = {
            sc.LANGGRAPH_NODE: task.name,
            sc.LANGGRAPH_TASK_ID: task.id,
            sc.LANGGRAPH_CHECKPOINT_NS: namespace,
        }
        triggers: list[str] = []
        if not pushed:  # a pushed task's only trigger is the Send (its spawn event says so already)
            triggers = [str(t) for t in task.triggers]
            attrs[sc.LANGGRAPH_TRIGGERS] = triggers[:_MAX_TRIGGERS]
        step = metadata.get("langgraph_step")
        if isinstance(step, int):
            attrs[sc.LANGGRAPH_STEP] = step
        values: dict[str, object] = {}
        tool_node = False
        if is_agent(task):
            name = f"{sc.OP_INVOKE_AGENT} {task.name}"
            attrs[sc.GEN_AI_OPERATION_NAME] = sc.OP_INVOKE_AGENT
            attrs[sc.GEN_AI_AGENT_NAME] = task.name
            attrs[sc.GEN_AI_AGENT_ID] = task.id
            role = metadata.get(AGENT_ROLE_METADATA_KEY)
            if isinstance(role, str):
                attrs[sc.ORCH_AGENT_ROLE] = role
            # The SDK sees the node as the running agent (ot.message, ot.spawn, nested @ot.agent inside it),
            # and an @ot.agent node function adds no second agent span.
            values[AGENT_KEY] = AgentFrame(task.name, task.id, role if isinstance(role, str) else None)
            spec = _decorated_agent(task)
            if spec is not None:
                values.update(traced_by_caller(spec))
            parent = current_node(ctx)
            if parent is not None and parent.agent_id is not None:
                attrs[sc.ORCH_AGENT_PARENT_ID] = parent.agent_id
        else:
            name = task.name
            tool_node = _tool_node(task)
            attrs[sc.ORCH_OPERATION] = sc.OPERATION_TOOL_NODE if tool_node else sc.OPERATION_NODE
            attrs[sc.OPENINFERENCE_SPAN_KIND] = sc.SPAN_KIND_CHAIN
        links: list[Link] = []
        if run is not None and not pushed:
            links = [Link(done, {sc.ORCH_LINK_TYPE: sc.LINK_AGGREGATE_INPUT})
                     for done in run.take_aggregate_inputs(triggers)]
        if sc.GEN_AI_AGENT_NAME in attrs:  # an agent's input and output (a plain node's repeats the state)
            attrs.update(input_attributes(task.input))
        span = self._tracer.start_span(name, context=parent_context(context=ctx) or ctx, attributes=attrs,
                                       links=links)
        node = Node(span, task.name, namespace, task.id if sc.GEN_AI_AGENT_ID in attrs else None)
        self._namespaces.add(node)
        return _Started(task, node, run, with_node(node, ctx, values), thread_id, pushed, tool_node)

    @failsafe(None)
    def _finish(self, started: _Started, result: Any, exc: BaseException | None) -> None:
        task, node = started.task, started.node
        actor = node or current_actor()
        try:
            if actor is not None:
                sends = [v for c, v in task.writes if c == TASKS and isinstance(v, Send)]
                if sends:
                    routing.record_sends(actor, sends)
            if exc is None and started.run is not None and started.run.edges:
                routing.record_wiring(started.run, task.name, (task.config.get("metadata") or {}).get(
                    "langgraph_step"))
            if isinstance(exc, ParentCommand):
                routing.record_handoff(exc, self._namespaces, actor)
            elif isinstance(exc, GraphInterrupt):
                if started.run is not None:
                    started.run.top().interrupted = True
                if actor is not None:
                    routing.record_interrupt(actor, exc, self._interrupts, started.thread_id)
            if node is None:
                return
            set_outcome(node.span, exc)
            if exc is None:
                node.span.set_attribute(sc.ORCH_OUTPUT_REF, content_ref(result))
                if node.agent_id is not None:
                    set_output(node.span, result)
                if started.run is not None:
                    started.run.last_node = task.name
                if started.pushed and not started.tool_node and started.run is not None:
                    started.run.add_send_result(
                        SendResult(node.span.get_span_context(), frozenset([str(c) for c, _ in task.writes]))
                    )
        finally:
            if node is not None:
                self._namespaces.remove(node)
                node.span.end()


def _first_step(task: PregelExecutableTask) -> Any:
    """What the node runs (a node's runnable is the first step of its ``proc``, before its writers)."""
    steps = getattr(task.proc, "steps", None)
    return steps[0] if isinstance(steps, list | tuple) and steps else task.proc


def _decorated_agent(task: PregelExecutableTask) -> AgentSpec | None:
    """The ``@ot.agent`` spec of the node's function, when it is one."""
    first = _first_step(task)
    return decorated_spec((getattr(first, "func", None), getattr(first, "afunc", None)), AgentSpec)


def _tool_node(task: PregelExecutableTask) -> bool:
    """A ``ToolNode``: it runs the tools a model asked for; it is no agent and decides nothing."""
    return isinstance(_first_step(task), ToolNode)


def _pushed(task: PregelExecutableTask) -> bool:
    """A task scheduled by a ``Send`` packet (or a functional-API call) rather than by channel triggers."""
    return bool(task.path) and task.path[0] == PUSH
