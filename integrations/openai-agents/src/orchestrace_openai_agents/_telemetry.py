"""Every use of the orchestrace SDK by this integration: the one module to change when the SDK's public
instrumentation API (``orchestrace.instrumentation``) replaces the names below.

What it needed that ``orchestrace`` does not make public yet (the closing note of issue 17 lists it):

* starting and ending agent, tool, model-call and workflow spans with an explicit parent context and
  without a decorated function: ``orchestrace.invocation`` (``AgentSpec``, ``ToolSpec``, ``LlmSpec``,
  ``TaskSpec``, ``Invocation``, ``set_usage_on``); a model call's start comes before its model, messages and
  request are known (the Agents SDK fills its span as the call ends), so the span is renamed and completed
  at the end (``Spec.record_input`` after the start);
* failing an invocation with no exception object (the Agents SDK's ``SpanError`` is a message and data);
* the tracer of the provider given to ``instrument()`` for those spans: ``orchestrace.tracing.TRACER_KEY``
  (the SDK's spans read their tracer from the current context only);
* orchestration events on a given span rather than the current one, and a handoff's ``from``/``to``
  (``ot.delegate`` has neither): written here with the ``orchestrace.semconv`` names;
* the sampling parameters and tool definitions of a model call: ``orchestrace.arguments.request_attributes``;
* the content-capture switch: ``orchestrace.config.get_config`` (a process global);
* token usage stated apart from the reply: ``orchestrace.usage.Usage``;
* guarding our own code: ``orchestrace.failsafe``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode, TracerProvider
from orchestrace import semconv as sc
from orchestrace.arguments import request_attributes
from orchestrace.config import get_config
from orchestrace.failsafe import failsafe
from orchestrace.invocation import AgentSpec, Invocation, LlmSpec, Spec, TaskSpec, ToolSpec, set_usage_on
from orchestrace.tracing import TRACER_KEY
from orchestrace.usage import Usage
from orchestrace.version import __version__ as sdk_version

__all__ = ["Invocation", "Telemetry", "failsafe"]

#: ``orchestrace.reason`` of the delegate a handoff records, and of the spawn of an agent used as a tool.
REASON_HANDOFF = "handoff"
REASON_AGENT_AS_TOOL = "agent_as_tool"
#: ``orchestrace.safety.action`` of a guardrail whose tripwire stopped the run.
ACTION_TRIPWIRE = "tripwire_triggered"


@functools.lru_cache(maxsize=1024)
def _agent_spec(name: str) -> AgentSpec:
    return AgentSpec(name, None, None)


@functools.lru_cache(maxsize=1024)
def _tool_spec(name: str) -> ToolSpec:
    return ToolSpec(name, None, False)


@functools.lru_cache(maxsize=256)
def _task_spec(name: str) -> TaskSpec:
    return TaskSpec(name, None, None, None, name)


_LLM_SPEC = LlmSpec(None, None)


class Telemetry:
    """The spans and events of one instrumentation: its tracer provider (``None``: the SDK's own)."""

    def __init__(self, tracer_provider: TracerProvider | None) -> None:
        self._scope: dict[str, object] = {}
        if tracer_provider is not None:
            self._scope[TRACER_KEY] = trace.get_tracer("orchestrace", sdk_version, tracer_provider)

    def root(self) -> Context:
        """The parent of a run's first span: the caller's context (with this instrumentation's tracer)."""
        current = otel_context.get_current()
        return Context({**current, **self._scope}) if self._scope else current

    @staticmethod
    def _begin(spec: Spec, parent: Context) -> Invocation | None:
        # The SDK's spans take their tracer from the current context: the parent's, for the time of the start.
        token = otel_context.attach(parent)
        try:
            return spec.begin((), {}, parent)
        finally:
            otel_context.detach(token)

    def workflow(self, name: str, parent: Context) -> Invocation | None:
        """``invoke_workflow {name}``: one Agents SDK trace, one episode (or part of an enclosing task's)."""
        return self._begin(_task_spec(name), parent)

    def agent(self, name: str, parent: Context) -> Invocation | None:
        """``invoke_agent {name}``: one agent instance."""
        return self._begin(_agent_spec(name), parent)

    def tool(self, name: str, parent: Context) -> Invocation | None:
        """``execute_tool {name}``; its arguments come with its end (:meth:`tool_arguments`)."""
        return self._begin(_tool_spec(name), parent)

    def model_call(self, parent: Context) -> Invocation | None:
        """``chat``: one model call; its request and reply come at its end (:meth:`model_request`)."""
        return self._begin(_LLM_SPEC, parent)

    @staticmethod
    @failsafe(default=None)
    def tool_arguments(invocation: Invocation, arguments: str | None) -> None:
        if arguments is not None and invocation.span.is_recording():
            invocation.spec.record_input(invocation.span, arguments, None)

    @staticmethod
    @failsafe(default=None)
    def model_request(invocation: Invocation, model: str | None, messages: Sequence[Any] | None,
                      request: Mapping[str, Any], usage: Usage | None) -> None:
        """The call's model, prompt (OpenAI chat messages), sampling parameters and tools offered
        (``request["tools"]``: definitions in any shape ``tool_definitions`` reads), and usage when the
        Agents SDK stated it apart from the reply."""
        span = invocation.span
        if not span.is_recording():
            return
        if model:
            span.update_name(f"{sc.OP_CHAT} {model}")
            span.set_attribute(sc.GEN_AI_REQUEST_MODEL, model)
        span.set_attributes(request_attributes(request, get_config().capture_content))
        if messages is not None:
            invocation.spec.record_input(span, list(messages), None)
        if usage is not None:
            set_usage_on(span, usage)
            invocation.explicit_usage = True

    @staticmethod
    def finish(invocation: Invocation, result: Any = None) -> None:
        invocation.finish(result)

    @staticmethod
    @failsafe(default=None)
    def fail(invocation: Invocation, message: str, data: Mapping[str, Any] | None,
             exc: BaseException | None) -> None:
        """The Agents SDK recorded an error on the span (``message``, ``data``); ``exc``: the exception in
        flight as it ended, when there is one (the user's own when the SDK wrapped it)."""
        if exc is not None:
            invocation.fail(exc.__cause__ or exc)
            return
        span = invocation.span
        try:
            if span.is_recording():
                detail = (data or {}).get("error")
                span.set_attribute(sc.ERROR_TYPE, message)
                span.set_status(Status(StatusCode.ERROR, f"{message}: {detail}" if detail else message))
        finally:
            span.end()

    @staticmethod
    def end(invocation: Invocation) -> None:
        """End a span whose Agents SDK span never ended (its run was abandoned)."""
        invocation.close()

    # --- orchestration events, on the span of the actor (or tool) they belong to ---------------------------
    @staticmethod
    @failsafe(default=None)
    def handoff(actor: Invocation, source: str | None, target: str) -> None:
        attributes: dict[str, Any] = {sc.ORCH_TARGET_AGENT: target, sc.ORCH_HANDOFF: True, sc.ORCH_TO: target,
                                      sc.ORCH_REASON: REASON_HANDOFF}
        if source:
            attributes[sc.ORCH_FROM] = source
        actor.span.add_event(sc.EVENT_DELEGATE, attributes)

    @staticmethod
    @failsafe(default=None)
    def spawn(caller: Invocation, target: str) -> None:
        caller.span.add_event(sc.EVENT_SPAWN, {sc.ORCH_TARGET_AGENT: target,
                                               sc.ORCH_REASON: REASON_AGENT_AS_TOOL})

    @staticmethod
    @failsafe(default=None)
    def tripwire(actor: Invocation, guardrail: str) -> None:
        actor.span.add_event(sc.EVENT_SAFETY, {sc.ORCH_SAFETY_CATEGORY: guardrail,
                                               sc.ORCH_SAFETY_ACTION: ACTION_TRIPWIRE})


def usage_of(value: Any) -> Usage | None:
    """The Agents SDK's span usage (``{"input_tokens", "output_tokens", ...}``) as the SDK's ``Usage``."""
    if not isinstance(value, Mapping):
        return None
    tokens = [value.get(key) for key in ("input_tokens", "output_tokens")]
    if not any(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        return None
    return Usage(*(t if isinstance(t, int) and not isinstance(t, bool) else None for t in tokens))

