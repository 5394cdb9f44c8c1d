"""An Agents SDK ``TracingProcessor`` that records each trace as orchestrace spans and orchestration events.

* a trace (one ``Runner.run``/``run_sync``/``run_streamed``, or the user's ``with trace(...)``):
  ``invoke_workflow {name}``, the episode (part of an enclosing ``ot.task``'s when there is one);
* an agent span: ``invoke_agent {name}``, one agent instance;
* a handoff span: a handoff ``orchestrace.delegate`` (``from``, ``to``) on the agent that hands off; the next
  agent's span starts under the workflow, and the collector matches it to that delegate;
* an agent span under a function span (``Agent.as_tool``): ``orchestrace.spawn`` on the tool's span, then the
  agent's span inside it (spawn, return, despawn);
* a function span: ``execute_tool {name}``, with arguments, result, error;
* a response span (Responses API) or generation span (Chat Completions, LiteLLM): ``chat {model}``, one turn,
  with its messages, the tools offered, sampling parameters and usage (the span ``model_calls`` opened for
  the Runner's call of that model; a model that opens no such span gets its turn there);
* a guardrail span whose tripwire triggered: ``orchestrace.safety_event`` (category: the guardrail's name) on
  its agent;
* task, turn, custom and other spans: nothing; what they hold belongs to the span around them.

While an agent or a tool runs, its span is the current OpenTelemetry span, so user code inside a tool (an
``@ot.tool`` function, ``ot.reward``, any OTel instrumentation) nests under it. Spans whose Agents SDK span
never ends (a run abandoned half way) are ended with the trace.
"""

from __future__ import annotations

import sys
import threading
from contextvars import ContextVar, Token
from typing import Any

from agents.exceptions import AgentsException
from agents.tracing import (
    AgentSpanData,
    FunctionSpanData,
    GenerationSpanData,
    GuardrailSpanData,
    HandoffSpanData,
    ResponseSpanData,
    Span,
    Trace,
    TracingProcessor,
)
from opentelemetry import context as otel_context

from orchestrace_openai_agents import _telemetry as telemetry
from orchestrace_openai_agents import model_calls
from orchestrace_openai_agents.items import chat_messages

WORKFLOW, AGENT, TOOL, MODEL = "workflow", "agent", "tool", "model"
_ACTORS = (WORKFLOW, AGENT)

#: Which node this context activated last: tells, as a span ends, whether it ends in the context its start
#: activated (a reset of this variable's token succeeds only there), so that only that context is restored.
_ACTIVE: ContextVar[object] = ContextVar("orchestrace_openai_agents_active", default=None)


class _Node:
    """One span we started, for one Agents SDK trace or span."""

    __slots__ = ("invocation", "key", "kind", "parent", "reply", "shows_input", "tokens", "trace_id")

    def __init__(self, key: str, kind: str, invocation: telemetry.Invocation, parent: _Node | None,
                 trace_id: str) -> None:
        self.key = key  # the Agents SDK's trace or span id
        self.kind = kind
        self.invocation = invocation
        self.parent = parent
        self.trace_id = trace_id
        self.tokens: tuple[Token[object], object] | None = None
        #: An actor's Input pane is filled (by its first model call); its latest model reply, its output.
        self.shows_input = False
        self.reply: Any = None

    def activate(self) -> None:
        """Make the span current where the Agents SDK made its own span current (user code runs there)."""
        self.tokens = (_ACTIVE.set(self), otel_context.attach(self.invocation.context))

    def deactivate(self) -> None:
        tokens, self.tokens = self.tokens, None
        if tokens is None or otel_context.get_current() is not self.invocation.context:
            return  # ended elsewhere, or out of order: leave that context alone
        try:
            _ACTIVE.reset(tokens[0])
        except ValueError:  # another context (a copy made while it ran)
            return
        otel_context.detach(tokens[1])  # type: ignore[arg-type]

    def actor(self) -> _Node:
        """The agent (else the workflow) this node belongs to."""
        node = self
        while node.kind not in _ACTORS and node.parent is not None:
            node = node.parent
        return node

    def root(self) -> _Node:
        """The workflow (the Agents SDK trace) this node is part of."""
        node = self
        while node.parent is not None:
            node = node.parent
        return node


class OrchestraceProcessor(TracingProcessor):
    """Registered once with ``agents.add_trace_processor``; ``enabled`` turns it on and off (the Agents SDK
    offers no way to remove one processor without replacing the user's others)."""

    def __init__(self) -> None:
        #: ``None``: no new span starts (those started still end).
        self.telemetry: telemetry.Recorder | None = None
        # Single dict operations (atomic) by Agents SDK id; the open spans of each trace, by id, under a lock.
        self._nodes: dict[str, _Node] = {}
        self._open: dict[str, dict[str, _Node]] = {}
        self._lock = threading.Lock()

    # --- traces ---------------------------------------------------------------------------------------------
    @telemetry.failsafe(default=None)
    def on_trace_start(self, trace: Trace) -> None:
        tel = self.telemetry
        if tel is None:
            return
        invocation = tel.workflow(trace.name, tel.root())
        if invocation is None:
            return
        node = _Node(trace.trace_id, WORKFLOW, invocation, None, trace.trace_id)
        self._nodes[trace.trace_id] = node
        with self._lock:
            self._open[trace.trace_id] = {}
        node.activate()

    @telemetry.failsafe(default=None)
    def on_trace_end(self, trace: Trace) -> None:
        node = self._nodes.pop(trace.trace_id, None)
        with self._lock:
            abandoned = list(self._open.pop(trace.trace_id, {}).values())
        for left in reversed(abandoned):  # innermost first
            self._nodes.pop(left.key, None)
            telemetry.Recorder.end(left.invocation)
        if node is not None:
            node.deactivate()
            _end(node, None)

    # --- spans ----------------------------------------------------------------------------------------------
    @telemetry.failsafe(default=None)
    def on_span_start(self, span: Span[Any]) -> None:
        tel = self.telemetry
        if tel is None:
            return
        parent = self._nodes.get(span.parent_id or span.trace_id)
        context = parent.invocation.context if parent is not None else tel.root()
        data = span.span_data
        kind: str | None = None
        invocation: telemetry.Invocation | None = None
        if isinstance(data, AgentSpanData):
            if parent is not None and parent.kind == TOOL:  # Agent.as_tool: the tool's run of the agent
                tel.spawn(parent.invocation, data.name)
            kind, invocation = AGENT, tel.agent(data.name, context)
        elif isinstance(data, FunctionSpanData):
            kind, invocation = TOOL, tel.tool(data.name, context)
        elif isinstance(data, ResponseSpanData | GenerationSpanData):
            # The span the Runner's call of this model opened (model_calls), else one of its own.
            kind, invocation = MODEL, model_calls.claim() or tel.model_call(context)
        if kind is None or invocation is None:
            if parent is not None:  # a span of no kind of ours: what it holds belongs to its parent
                self._nodes[span.span_id] = parent
            return
        node = _Node(span.span_id, kind, invocation, parent, span.trace_id)
        self._nodes[span.span_id] = node
        with self._lock:
            self._open.setdefault(span.trace_id, {})[span.span_id] = node
        if kind != MODEL:  # the Agents SDK makes agent and function spans current, never streamed ones
            node.activate()

    @telemetry.failsafe(default=None)
    def on_span_end(self, span: Span[Any]) -> None:
        node = self._nodes.pop(span.span_id, None)
        if node is None:
            return
        data = span.span_data
        if isinstance(data, HandoffSpanData) and data.to_agent:
            telemetry.Recorder.handoff(node.actor().invocation, data.from_agent, data.to_agent)
        elif isinstance(data, GuardrailSpanData) and data.triggered:
            telemetry.Recorder.tripwire(node.actor().invocation, data.name)
        if node.key != span.span_id:
            return  # a span of its parent's
        with self._lock:
            self._open.get(span.trace_id, {}).pop(span.span_id, None)
        node.deactivate()
        result = _complete(node, data)
        error = span.error
        if error:
            telemetry.Recorder.fail(node.invocation, str(error.get("message") or "error"), error.get("data"),
                                     sys.exc_info()[1])
        else:
            _end(node, result)

    def shutdown(self) -> None:
        """Nothing to release: spans go to the OpenTelemetry provider, which the application shuts down."""

    def force_flush(self) -> None:
        """Nothing is queued here (the OpenTelemetry provider's processors flush themselves)."""


@telemetry.failsafe(default=None)
def model_replied(items: list[dict[str, Any]], reply: Any) -> None:
    """A model call of the agent running here was given ``items`` (its input items as chat messages) and
    returned ``reply``: the agent and its run take the input of their first call as theirs (content only,
    with capture on), and the reply of their latest call as their output (:func:`_end`). The Agents SDK's
    own spans carry neither."""
    node = _ACTIVE.get()
    if not isinstance(node, _Node):
        return
    for actor in (node.actor(), node.root()):
        if not actor.shows_input:
            actor.shows_input = True
            telemetry.Recorder.shown_input(actor.invocation, items)
        actor.reply = reply


def _end(node: _Node, result: Any) -> None:
    """End a span the Agents SDK ended without an error of its own. A run that raises (a guardrail's
    tripwire, a tool's error passed on, too many turns) ends its agent spans and trace as the exception leaves
    them, without marking them: the Agents SDK's exception in flight is their failure. (Only the SDK's own:
    another exception in flight may be one the caller is handling around the run.)"""
    exc = sys.exc_info()[1]
    if node.kind in _ACTORS and isinstance(exc, AgentsException):
        telemetry.Recorder.fail(node.invocation, type(exc).__qualname__, None, exc)
    else:
        if node.reply is not None:
            telemetry.Recorder.shown_output(node.invocation, node.reply)
        telemetry.Recorder.finish(node.invocation, result)


def _complete(node: _Node, data: Any) -> Any:
    """What the Agents SDK filled in by the span's end, recorded; returns the span's result."""
    invocation = node.invocation
    if isinstance(data, FunctionSpanData):
        telemetry.Recorder.tool_arguments(invocation, data.input)
        return data.output
    if isinstance(data, ResponseSpanData):
        response = data.response
        messages = None
        request: dict[str, Any] = {}
        if response is not None:
            instructions = response.instructions
            system = [{"role": "system", "content": instructions}] if isinstance(instructions, str) else []
            messages = system + chat_messages(data.input)
            request = {"temperature": response.temperature, "top_p": response.top_p,
                       "max_output_tokens": response.max_output_tokens,
                       "parallel_tool_calls": response.parallel_tool_calls,
                       "tools": [tool.model_dump(exclude_none=True) for tool in response.tools or ()]}
        telemetry.Recorder.model_request(invocation, response.model if response is not None else None,
                                          messages, request, telemetry.usage_of(data.usage))
        return response
    if isinstance(data, GenerationSpanData):
        telemetry.Recorder.model_request(invocation, data.model, data.input, dict(data.model_config or {}),
                                          telemetry.usage_of(data.usage))
        output = list(data.output or ())
        if len(output) == 1 and "role" in output[0]:  # a chat message: read as a Chat Completions reply
            return {"choices": [{"message": output[0]}], "model": data.model}
        return output[0] if len(output) == 1 else output or None
    return None
