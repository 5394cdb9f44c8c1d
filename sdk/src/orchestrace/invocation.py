"""The span of one decorated call, and what each kind (agent, tool, model, task) puts on it.

A ``Spec`` is made once per decorated function; ``Spec.begin`` starts an :class:`Invocation` per call.
Everything here is orchestrace's own code: it is guarded so that it can only fail silently.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from orchestrace import results
from orchestrace import semconv as sc
from orchestrace.arguments import CallArguments, request_attributes
from orchestrace.config import get_config
from orchestrace.content import Captured, call_input, capture, content_ref, quick_ref
from orchestrace.context import (
    AGENT_KEY,
    MODEL_CALL_KEY,
    TASK_KEY,
    TRACED_BY_CALLER_KEY,
    AgentFrame,
    TaskFrame,
    with_span,
)
from orchestrace.failsafe import failsafe, log_once
from orchestrace.messages import capture_messages, input_messages, output_messages
from orchestrace.replies import Reply, ReplyStream, normalize, reply_attributes
from orchestrace.tracing import get_tracer
from orchestrace.usage import Usage, extract_usage, response_model

_OK = Status(StatusCode.OK)

_ERROR_TYPE = "error.type"
Attributes = dict[str, Any]

#: Random agent instance and tool call ids (unique, not secret). A generator of our own: an app that seeds
#: ``random`` for reproducibility must not get the same ids on every run; reseeded in forked children.
_ids = random.Random()
os.register_at_fork(after_in_child=_ids.seed)


def _detach(token: object) -> None:
    if token is not None:  # None: activate failed
        otel_context.detach(token)  # type: ignore[arg-type]


class Invocation:
    """One call's span from start to end. Every method is fail-safe."""

    __slots__ = ("context", "explicit_usage", "span", "spec", "stream", "yielded")

    def __init__(self, spec: Spec, span: Span, ctx: Context) -> None:
        self.spec = spec
        self.span = span
        self.context = ctx
        self.explicit_usage = False
        #: The reply a streaming model call yielded so far.
        self.stream: ReplyStream | None = None
        #: What a generator agent or tool yielded so far.
        self.yielded: list[Any] | None = None

    @failsafe(default=None)
    def activate(self) -> object:
        """Make this call's span (and agent/task) current; returns the token for :meth:`deactivate`."""
        return otel_context.attach(self.context)

    @failsafe(default=None)
    def deactivate(self, token: object) -> None:
        _detach(token)

    # The three ways a call ends take the token of :meth:`activate` too: one guarded call, not two.
    def finish(self, result: Any, token: object = None) -> None:
        """The call returned ``result``."""
        try:  # guarded inline rather than by @failsafe: the hottest path, one frame fewer
            try:
                _detach(token)
                if self.span.is_recording():
                    self.spec.record_result(self, result)
                    self.span.set_status(_OK)  # standard backends show OK / ERROR, not Unset
            finally:
                self.span.end()  # a span with incomplete attributes beats a span never exported
        except Exception as exc:
            log_once("orchestrace.invocation.Invocation.finish", exc)

    @failsafe(default=None)
    def fail(self, exc: BaseException, token: object = None) -> None:
        """The call raised ``exc`` (it is re-raised by the caller, unchanged)."""
        try:
            _detach(token)
            if self.span.is_recording():
                self.span.set_attribute(_ERROR_TYPE, type(exc).__qualname__)
                self.span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                self.span.record_exception(exc, escaped=True)
                self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            self.span.end()  # even when the exception's __str__ is broken

    @failsafe(default=None)
    def close(self, token: object = None) -> None:
        """A generator was closed (or abandoned and collected) before it finished: what it yielded so far
        is its result."""
        try:
            _detach(token)
            if self.span.is_recording() and (self.stream is not None or self.yielded is not None):
                self.spec.record_result(self, None)
        finally:
            self.span.end()

    @failsafe(default=None)
    def on_item(self, item: Any) -> None:
        """A generator yielded ``item``."""
        if self.span.is_recording():
            self.spec.record_item(self, item)


class Spec:
    """What a decorated function records; subclasses per kind."""

    #: Whether an integration may trace this kind's calls itself (``context.TRACED_BY_CALLER_KEY``): agents
    #: and tools; the others skip the lookup on their hot path.
    may_be_traced_by_caller = False

    def __init__(self, name: str) -> None:
        self.name = name

    @failsafe(default=None)
    def begin(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context | None = None,
              ) -> Invocation | None:
        """Start the span of one call (``None`` if orchestrace failed: the call then runs untraced)."""
        return self._begin(args, kwargs, otel_context.get_current() if parent is None else parent)

    def start(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Invocation, object] | None:
        """:meth:`begin` and :meth:`Invocation.activate` in one guarded call (the common case: a plain
        call); returns the invocation and the token to end it with."""
        # Guarded inline rather than by @failsafe: the hottest path, one frame fewer.
        try:
            parent = otel_context.get_current()
            if self.may_be_traced_by_caller:
                traced = parent.get(TRACED_BY_CALLER_KEY)
                if isinstance(traced, list) and traced and traced[-1] is self:  # see TRACED_BY_CALLER_KEY
                    traced.pop()
                    return None
            invocation = self._begin(args, kwargs, parent)
        except Exception as exc:
            log_once("orchestrace.invocation.Spec.start", exc)
            return None
        try:
            token = otel_context.attach(invocation.context)
        except Exception as exc:  # the call then runs outside its span, which still ends
            log_once("orchestrace.invocation.Invocation.activate", exc)
            token = None
        return invocation, token

    def _begin(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context) -> Invocation:
        name, kind, attributes = self.describe(args, kwargs, parent)
        has_input = bool(args or kwargs)
        value = self.input_value(args, kwargs, attributes) if has_input else None
        # A ref that costs one hash goes on the span from its start (one attribute write fewer); other
        # inputs are serialized only if the span records.
        input_ref = quick_ref(value) if has_input else None
        if input_ref is not None:
            attributes[sc.ORCH_INPUT_REF] = input_ref
        span = get_tracer().start_span(name, context=parent, kind=kind, attributes=attributes)
        try:
            invocation = Invocation(self, span, parent)
            invocation.context = with_span(span, parent, self.enter(invocation, attributes))
        except BaseException:
            span.end()  # the call runs untraced, but a started span is never left open
            raise
        if has_input and (input_ref is None or get_config().capture_content) and span.is_recording():
            try:
                self.record_input(span, value, input_ref)
            except Exception as exc:  # the span still runs and ends; only its input attributes are missing
                log_once(f"{type(self).__name__}.record_input", exc)
        return invocation

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        raise NotImplementedError

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        """What the call's context holds besides its span (kinds add their agent, task or model call)."""
        return None

    def input_value(self, args: Sequence[Any], kwargs: Mapping[str, Any], attributes: Attributes) -> Any:
        """The value that stands for the call's input (kinds may add attributes read from the arguments)."""
        return call_input(args, kwargs)

    #: Where captured input and output content go (GenAI chat messages by default).
    input_key = sc.GEN_AI_INPUT_MESSAGES
    output_key = sc.GEN_AI_OUTPUT_MESSAGES

    def capture_input(self, value: Any) -> Captured | None:
        config = get_config()
        return capture_messages(input_messages(value), config) if config.capture_content else None

    def capture_output(self, result: Any) -> Captured | None:
        config = get_config()
        return capture_messages(output_messages(result), config) if config.capture_content else None

    def record_input(self, span: Span, value: Any, ref: str | None) -> None:
        """The call's input ``value`` (``ref``: its content ref when already on the span)."""
        if ref is None:
            span.set_attribute(sc.ORCH_INPUT_REF, content_ref(value))
        captured = self.capture_input(value)
        if captured is not None:
            span.set_attributes(captured.attributes(self.input_key, sc.ORCH_INPUT_CUT_BYTES))

    def record_result(self, invocation: Invocation, result: Any) -> None:
        if result is None and invocation.yielded is not None:
            result = yielded_result(invocation.yielded)
        if result is None:
            return
        ref = content_ref(result)
        invocation.span.set_attribute(sc.ORCH_OUTPUT_REF, ref)
        results.record(ref, invocation.span.get_span_context())
        captured = self.capture_output(result) if get_config().capture_content else None
        if captured is not None:
            invocation.span.set_attributes(captured.attributes(self.output_key, sc.ORCH_OUTPUT_CUT_BYTES))

    def record_item(self, invocation: Invocation, item: Any) -> None:
        """A generator yielded ``item``: kept, to be its result unless it returns one."""
        if invocation.yielded is None:
            invocation.yielded = []
        invocation.yielded.append(item)


def yielded_result(items: list[Any]) -> Any:
    """A generator's result: what it yielded, joined when every item is a string, else as a list."""
    if items and all(type(item) is str for item in items):
        return "".join(items)
    return list(items)


# Kinds read the caller's agent and task from the parent context as a dict (``otel_context.get_value``
# reads it the same way, one call further): these run on every decorated call.
def _conversation(attributes: Attributes, parent: Context) -> None:
    task = parent.get(TASK_KEY)
    if isinstance(task, TaskFrame):
        attributes[sc.GEN_AI_CONVERSATION_ID] = task.episode_id


class AgentSpec(Spec):
    """``@ot.agent``: ``invoke_agent {name}``, a fresh agent instance per call."""

    may_be_traced_by_caller = True

    def __init__(self, name: str, role: str | None, agent_id: str | None) -> None:
        super().__init__(name)
        self.role = role
        self.agent_id = agent_id
        self.span_name = f"{sc.OP_INVOKE_AGENT} {name}"
        self.fixed_attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                                             sc.GEN_AI_AGENT_NAME: name}
        if role is not None:
            self.fixed_attributes[sc.ORCH_AGENT_ROLE] = role

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        attributes = dict(self.fixed_attributes)
        attributes[sc.GEN_AI_AGENT_ID] = self.agent_id or f"{self.name}-{_ids.getrandbits(48):012x}"
        caller = parent.get(AGENT_KEY)
        if isinstance(caller, AgentFrame):
            attributes[sc.ORCH_AGENT_PARENT_ID] = caller.id
        _conversation(attributes, parent)
        return self.span_name, SpanKind.INTERNAL, attributes

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        return {AGENT_KEY: AgentFrame(self.name, attributes[sc.GEN_AI_AGENT_ID], self.role)}


class ToolSpec(Spec):
    """``@ot.tool``: ``execute_tool {name}``; the arguments and result go to the GenAI tool attributes."""

    may_be_traced_by_caller = True

    def __init__(self, name: str, description: str | None, trusted: bool) -> None:
        super().__init__(name)
        self.description = description
        self.trusted = trusted
        self.span_name = f"{sc.OP_EXECUTE_TOOL} {name}"
        self.fixed_attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                                             sc.GEN_AI_TOOL_NAME: name, sc.GEN_AI_TOOL_TYPE: "function"}
        if description:
            self.fixed_attributes[sc.GEN_AI_TOOL_DESCRIPTION] = description
        if trusted:
            self.fixed_attributes[sc.ORCH_TOOL_TRUSTED] = True

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        call_id = kwargs.get("tool_call_id")
        if not isinstance(call_id, str):
            call_id = f"call_{_ids.getrandbits(96):024x}"
        attributes = dict(self.fixed_attributes)
        attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id
        return self.span_name, SpanKind.INTERNAL, attributes

    input_key = sc.GEN_AI_TOOL_CALL_ARGUMENTS
    output_key = sc.GEN_AI_TOOL_CALL_RESULT

    def capture_input(self, value: Any) -> Captured | None:
        return capture(value)

    def capture_output(self, result: Any) -> Captured | None:
        return capture(result)


def set_usage_on(span: Span, usage: Usage) -> None:
    if usage.input_tokens is not None:
        span.set_attribute(sc.GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens)
    if usage.output_tokens is not None:
        span.set_attribute(sc.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)


class LlmSpec(Spec):
    """``@ot.llm``: ``chat {model}`` (CLIENT), one model call: the arguments bound by the function's signature
    (see :mod:`orchestrace.arguments`), the reply normalized (see :mod:`orchestrace.replies`): usage, response
    model / id, finish reason, with content capture the messages, tool definitions and token ids."""

    def __init__(self, model: str | None, provider: str | None,
                 arguments: CallArguments | None = None) -> None:
        super().__init__(model or "")
        self.model = model
        self.provider = provider
        self.arguments = arguments or CallArguments(None)

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        model = self.model
        if model is None and isinstance(kwargs.get("model"), str):
            model = kwargs["model"]
        attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}
        if model:
            attributes[sc.GEN_AI_REQUEST_MODEL] = model
        if self.provider:
            attributes[sc.GEN_AI_PROVIDER_NAME] = self.provider
        _conversation(attributes, parent)
        return (f"{sc.OP_CHAT} {model}" if model else sc.OP_CHAT), SpanKind.CLIENT, attributes

    def input_value(self, args: Sequence[Any], kwargs: Mapping[str, Any], attributes: Attributes) -> Any:
        messages, others = self.arguments.bind(args, kwargs)
        if others:
            attributes.update(request_attributes(others, get_config().capture_content))
        return messages

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        return {MODEL_CALL_KEY: invocation}

    def record_result(self, invocation: Invocation, result: Any) -> None:
        config = get_config()
        stream = invocation.stream
        span = invocation.span
        cut_bytes = 0
        reply: Reply | None
        if result is None and stream is not None:  # a stream: its reply is what it yielded
            reply = stream.finish()
            span.set_attribute(sc.ORCH_OUTPUT_REF, stream.text.ref)
            cut_bytes = stream.text.cut_bytes
        elif result is not None:
            reply = normalize(result)
            span.set_attribute(sc.ORCH_OUTPUT_REF, content_ref(result))
        else:
            return
        # A result of no known reply shape (the user's own dict or object) may still state usage and model.
        stated = reply or Reply(usage=extract_usage(result), response_model=response_model(result))
        span.set_attributes(reply_attributes(stated, config.capture_content,
                                             with_usage=not invocation.explicit_usage))
        if not config.capture_content:
            return
        messages = [reply.message()] if reply is not None else output_messages(result)
        captured = capture_messages(messages, config)
        if captured is not None:
            if cut_bytes:
                captured = Captured(captured.text, True, captured.cut_bytes + cut_bytes)
            span.set_attributes(captured.attributes(sc.GEN_AI_OUTPUT_MESSAGES, sc.ORCH_OUTPUT_CUT_BYTES))

    def record_item(self, invocation: Invocation, item: Any) -> None:
        """A streamed chunk of the reply, of any shape ``ReplyStream`` reads."""
        if invocation.stream is None:
            config = get_config()
            invocation.stream = ReplyStream(config.max_content_bytes if config.capture_content else 0)
        invocation.stream.add(item)


class TaskSpec(Spec):
    """``ot.task``: ``invoke_workflow {name}``, one rollout = one episode = one orchestration trace."""

    def __init__(self, name: str | None, task_id: str | None, topology: str | None, system: str | None,
                 workflow: str | None, episode_id: str | None = None) -> None:
        super().__init__(name or "")
        self.task_id = task_id
        self.topology = topology
        self.system = system
        self.workflow = workflow
        self.episode_id = episode_id

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        outer = parent.get(TASK_KEY)
        # A task inside another task's episode is part of that rollout; anything else is a rollout of its own,
        # however many rollouts share the task id.
        if self.episode_id is not None:
            episode_id = self.episode_id
        elif isinstance(outer, TaskFrame):
            episode_id = outer.episode_id
        else:
            episode_id = uuid.uuid4().hex
        task_id = self.task_id or episode_id
        attributes: Attributes = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW,
            sc.ORCH_TASK_ID: task_id,
            sc.ORCH_EPISODE_ID: episode_id,
            sc.GEN_AI_CONVERSATION_ID: episode_id,
            sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_CHAIN,
        }
        if self.workflow:
            attributes[sc.GEN_AI_WORKFLOW_NAME] = self.workflow
        if self.topology is not None:
            attributes[sc.ORCH_TOPOLOGY] = self.topology
        if self.system is not None:
            attributes[sc.ORCH_SYSTEM] = self.system
        label = self.name or self.task_id or self.workflow or task_id
        return f"{sc.OP_INVOKE_WORKFLOW} {label}", SpanKind.INTERNAL, attributes

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        return {TASK_KEY: TaskFrame(str(attributes[sc.ORCH_TASK_ID]), str(attributes[sc.ORCH_EPISODE_ID]))}
