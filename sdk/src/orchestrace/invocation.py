"""The span of one invocation (an agent, a tool, a model call, a workflow, a step), and what each kind puts
on it.

A ``Spec`` describes one kind of invocation (made once per decorated function, or per call by
:mod:`orchestrace.instrumentation`); ``Spec.open`` starts an :class:`Invocation` with a
:class:`~orchestrace.telemetry.Telemetry`, whose capture settings make every content decision of that
invocation. Everything here is orchestrace's own code: it is guarded so that it can only fail silently.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, format_span_id, format_trace_id

from orchestrace import history, results
from orchestrace import semconv as sc
from orchestrace.arguments import CallArguments, ToolArguments, request_attributes
from orchestrace.config import CaptureConfig
from orchestrace.content import Captured, call_input, capture_value, content_ref, quick_ref
from orchestrace.context import (
    AGENT_KEY,
    MODEL_CALL_KEY,
    SPAN_KEY,
    TASK_KEY,
    TRACED_BY_CALLER_KEY,
    TURN_KEY,
    AgentFrame,
    TaskFrame,
)
from orchestrace.errors import record_error
from orchestrace.events import Events
from orchestrace.failsafe import failsafe, log_once
from orchestrace.messages import Message, capture_messages, input_messages, output_messages
from orchestrace.replies import Reply, ReplyStream, normalize, parse_chunk, reply_attributes
from orchestrace.telemetry import DEFAULT, TELEMETRY_KEY, Telemetry
from orchestrace.usage import Usage, extract_usage, response_model, usage_attributes

_OK = Status(StatusCode.OK)

Attributes = dict[str, Any]
_NONE: Mapping[str, object] = {}
#: "No value given" (``None`` is a value: a function may return it).
NOTHING: Any = object()

#: Random agent instance and tool call ids (unique, not secret). A generator of our own: an app that seeds
#: ``random`` for reproducibility must not get the same ids on every run; reseeded in forked children.
_ids = random.Random()
os.register_at_fork(after_in_child=_ids.seed)


def _detach(token: object) -> None:
    if token is not None:  # None: activate failed
        otel_context.detach(token)  # type: ignore[arg-type]


class Invocation:
    """One invocation's span from its start to its end; made by the ``start_*`` methods of
    :mod:`orchestrace.instrumentation` and by the decorators. Every method is fail-safe.

    ``context`` is the invocation's context (its span current, its agent / episode / telemetry set): run code
    in it with :meth:`resume` / :meth:`suspend` (a generator's code between its yields runs outside it). The
    invocation ends exactly once, by :meth:`stop` (returned), :meth:`fail` / :meth:`fail_with` (raised, or an
    error reported as data) or :meth:`close` (abandoned: a stream closed early); the ending methods take the
    token of :meth:`resume` too.
    """

    __slots__ = ("_events", "capture", "context", "ended_early", "explicit_usage", "prompt_chain", "span",
                 "spec", "stream", "telemetry", "yielded")

    def __init__(self, spec: Spec, span: Span, ctx: Context, telemetry: Telemetry,
                 capture: CaptureConfig | None = None) -> None:
        self.spec = spec
        self.span = span
        self.context = ctx
        self.telemetry = telemetry
        #: The capture settings deciding this invocation's content (``telemetry.capture``, read once: at
        #: its start).
        self.capture = telemetry.capture if capture is None else capture
        self.explicit_usage = False
        #: The reply a streaming model call yielded so far.
        self.stream: ReplyStream | None = None
        #: What a generator agent or tool yielded so far.
        self.yielded: list[Any] | None = None
        #: A model call's prompt as running digests (``history.chain``), remembered with its completion.
        self.prompt_chain: list[str] | None = None
        #: Ended before its end: closed, abandoned, or failed midway (a stream's reply is then cut).
        self.ended_early = False
        self._events: Events | None = None

    @property
    def events(self) -> Events:
        """Record orchestration events on this invocation's span (see :class:`orchestrace.events.Events`)."""
        events = self._events
        if events is None:  # made once: an integration records each decision through it
            events = self._events = Events(self.span, self.capture)
        return events

    # resume and suspend run around every step of a generator or stream: guarded inline rather than by
    # @failsafe, one frame fewer.
    def resume(self) -> object:
        """Make this invocation's context current; returns the token for :meth:`suspend` (or the end)."""
        try:
            return otel_context.attach(self.context)
        except Exception as exc:
            log_once("orchestrace.invocation.Invocation.resume", exc)
            return None

    def suspend(self, token: object) -> None:
        """Leave this invocation's context (it goes on: a generator yielded, a run was paused)."""
        if token is not None:  # None: resume failed; OTel's detach logs its own failures, never raises
            otel_context.detach(token)  # type: ignore[arg-type]

    # set_input and set_output: guarded inline rather than by @failsafe, and without a ref nothing to do with
    # capture off (an integration's runs and agent nodes call them every time).
    def set_input(self, value: Any, *, ref: bool = True) -> None:
        """The input, when not given at the start: its content ref (unless ``ref=False``: a large framework
        state not worth hashing) and, with capture on, its content."""
        try:
            if (ref or self.capture.capture_content) and self.span.is_recording():
                self.spec.record_input(self, value, None if ref else "")
        except Exception as exc:
            log_once(_SET_INPUT, exc)

    def set_output(self, value: Any, *, ref: bool = True) -> None:
        """The output, recorded as :meth:`stop` would (``ref=False``: its content only, with capture on)."""
        try:
            if ref:
                if self.span.is_recording():
                    self.spec.record_result(self, value)
            elif self.capture.capture_content and self.span.is_recording():
                captured = self.spec.capture_output(value, self.capture)
                if captured is not None:
                    self.span.set_attributes(self.spec.content_attributes(captured, output=True))
        except Exception as exc:
            log_once(_SET_OUTPUT, exc)

    @failsafe(default=None)
    def set_request(self, model: str | None = None, request: Mapping[str, Any] | None = None) -> None:
        """A model call's model and request, when known only after its start (a framework that fills its
        span as the call ends): the span becomes ``{operation} {model}``; ``request`` as for
        ``start_model_call``."""
        if not self.span.is_recording():
            return
        if model:
            operation = self.spec.operation if isinstance(self.spec, LlmSpec) else sc.OP_CHAT
            self.span.update_name(f"{operation} {model}")
            self.span.set_attribute(sc.GEN_AI_REQUEST_MODEL, model)
        if request:
            self.span.set_attributes(request_attributes(request, self.capture.capture_content))

    @failsafe(default=None)
    def set_usage(self, usage: Usage) -> None:
        """A model call's token usage stated apart from its reply (it wins over the reply's own)."""
        if self.span.is_recording():
            set_usage_on(self.span, usage)
            self.explicit_usage = True

    # The three ways a call ends take the token of :meth:`resume` too: one guarded call, not two.
    def stop(self, result: Any = None, token: object = None, *, ref: str | None = None) -> None:
        """The invocation returned ``result`` (``None``: nothing to record): status OK. ``ref``: the result's
        content ref, when the caller computed it already."""
        span = self.span
        try:  # guarded inline rather than by @failsafe: the hottest path, frames fewer
            try:
                if token is not None:  # None: activate failed
                    otel_context.detach(token)  # type: ignore[arg-type]
                if span.is_recording():
                    self.spec.record_result(self, result, ref)
                    span.set_status(_OK)  # standard backends show OK / ERROR, not Unset
            finally:
                span.end()  # a span with incomplete attributes beats a span never exported
        except Exception as exc:
            log_once("orchestrace.invocation.Invocation.stop", exc)

    @failsafe(default=None)
    def fail(self, exc: BaseException, token: object = None, result: Any = None) -> None:
        """The invocation raised ``exc`` (the caller re-raises it, unchanged): recorded by
        :func:`orchestrace.errors.record_error`. A model call's stream that failed midway keeps what it
        streamed (or ``result``: what a stream object accumulated) as its cut reply."""
        try:
            _detach(token)
            if self.span.is_recording():
                record_error(self.span, exc)
                if result is not None or self.stream is not None:
                    self.ended_early = True
                    self.spec.record_result(self, result)
        finally:
            self.span.end()  # even when the exception's __str__ is broken

    @failsafe(default=None)
    def fail_with(self, error_type: str, description: str | None = None, token: object = None) -> None:
        """The invocation failed but there is no exception object (a framework reported its error as data):
        status ERROR with ``description``, ``error.type`` = ``error_type``."""
        try:
            _detach(token)
            if self.span.is_recording():
                self.span.set_attribute(sc.ERROR_TYPE, error_type)
                self.span.set_status(Status(StatusCode.ERROR, description))
        finally:
            self.span.end()

    @failsafe(default=None)
    def close(self, token: object = None, result: Any = None) -> None:
        """Abandoned before it finished (a generator closed or collected, a stream its reader left): no
        status; what a generator yielded so far (or ``result``: what a stream object accumulated) is its
        result, a model call's reply marked incomplete unless it had said why it stopped."""
        try:
            _detach(token)
            self.ended_early = True
            if self.span.is_recording() and (result is not None or self.stream is not None
                                             or self.yielded is not None):
                self.spec.record_result(self, result)
        finally:
            self.span.end()

    @failsafe(default=None)
    def on_item(self, item: Any) -> None:
        """A generator yielded ``item``."""
        if self.span.is_recording():
            self.spec.record_item(self, item)


_SET_INPUT = f"{__name__}.Invocation.set_input"
_SET_OUTPUT = f"{__name__}.Invocation.set_output"


class Spec:
    """What one kind of invocation records; subclasses per kind."""

    #: Whether an integration may trace this kind's calls itself (``context.TRACED_BY_CALLER_KEY``): agents
    #: and tools; the others skip the lookup on their hot path.
    may_be_traced_by_caller = False
    #: A generator's items are its result joined when they are all strings (streamed text).
    joins_text = True

    def __init__(self, name: str) -> None:
        self.name = name

    # --- the decorators' path: a call's arguments, the telemetry of the calling context ---------------------
    @failsafe(default=None)
    def begin(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context | None = None,
              ) -> Invocation | None:
        """Start the span of one call (``None`` if orchestrace failed: the call then runs untraced)."""
        return self._begin(args, kwargs, otel_context.get_current() if parent is None else parent)

    def start(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Invocation, object] | None:
        """:meth:`begin` and :meth:`Invocation.resume` in one guarded call (the common case: a plain
        call); returns the invocation and the token to end it with."""
        # Guarded inline rather than by @failsafe: the hottest path, one frame fewer.
        try:
            parent = otel_context.get_current()
            if self.may_be_traced_by_caller:
                traced = parent.get(TRACED_BY_CALLER_KEY)
                if isinstance(traced, list) and traced and traced[-1] is self:  # see TRACED_BY_CALLER_KEY
                    traced.pop()
                    return None
            # The parent is the current context: its suppression flag is read from it, not looked up again.
            invocation = self._begin(args, kwargs, parent, bool(parent.get(_SUPPRESS_INSTRUMENTATION_KEY)))
        except Exception as exc:
            log_once("orchestrace.invocation.Spec.start", exc)
            return None
        try:
            token = otel_context.attach(invocation.context)
        except Exception as exc:  # the call then runs outside its span, which still ends
            log_once("orchestrace.invocation.Invocation.resume", exc)
            token = None
        return invocation, token

    def _begin(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
               suppressed: bool | None = None) -> Invocation:
        found = parent.get(TELEMETRY_KEY) if parent else None
        telemetry = found if isinstance(found, Telemetry) else DEFAULT
        capture = telemetry.capture
        name, kind, attributes = self.describe(args, kwargs, parent)
        value = self.input_value(args, kwargs, attributes, capture) if args or kwargs else NOTHING
        return self.open(telemetry, parent, name, kind, attributes, value, capture=capture,
                         suppressed=suppressed)

    # --- every path -----------------------------------------------------------------------------------------
    def open(self, telemetry: Telemetry, parent: Context, name: str, kind: SpanKind, attributes: Attributes,
             value: Any = NOTHING, links: Sequence[Link] | None = None,
             values: Mapping[str, object] | None = None, start_time: int | None = None, *,
             capture: CaptureConfig | None = None, suppressed: bool | None = None) -> Invocation:
        """Start the span (``value``: the input, ``NOTHING`` for none) and build the invocation's context:
        its span, the kind's own values, the SDK-scope telemetry, and the caller's ``values``. ``capture``
        and ``suppressed`` (see ``Telemetry.start_span``): what the caller read already."""
        capture = telemetry.capture if capture is None else capture
        has_input = value is not NOTHING
        # A ref that costs one hash goes on the span from its start (one attribute write fewer); other
        # inputs are serialized only if the span records.
        input_ref = quick_ref(value) if has_input else None
        if input_ref is not None:
            attributes[sc.ORCH_INPUT_REF] = input_ref
        span = telemetry.start_span(name, parent, kind, attributes, links, start_time, suppressed=suppressed)
        try:
            invocation = Invocation(self, span, parent, telemetry, capture)
            own = self.enter(invocation, attributes) if self.enters else None
            # One copy of the parent (not ``set_span_in_context`` and a ``set_value`` each), built inline.
            invocation.context = Context({**parent, SPAN_KEY: span, TELEMETRY_KEY: telemetry.root,
                                          **(own or _NONE), **(values or _NONE)})
        except BaseException:
            span.end()  # the call runs untraced, but a started span is never left open
            raise
        if has_input and (input_ref is None or capture.capture_content) and span.is_recording():
            try:
                self.record_input(invocation, value, input_ref)
            except Exception as exc:  # the span still runs and ends; only its input attributes are missing
                log_once(f"{type(self).__name__}.record_input", exc)
        return invocation

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        raise NotImplementedError

    #: Whether :meth:`enter` adds context values (the kinds that override it); others skip the call.
    enters = False

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        """What the call's context holds besides its span (kinds add their agent, task or model call)."""
        return None

    def input_value(self, args: Sequence[Any], kwargs: Mapping[str, Any], attributes: Attributes,
                    capture: CaptureConfig) -> Any:
        """The value that stands for the call's input (kinds may add attributes read from the arguments)."""
        return call_input(args, kwargs)

    #: Where captured input and output content go (GenAI chat messages by default).
    input_key = sc.GEN_AI_INPUT_MESSAGES
    output_key = sc.GEN_AI_OUTPUT_MESSAGES
    #: Whether captured messages also go to OpenInference's ``input.value`` / ``output.value``: what Phoenix
    #: shows in its Input and Output panes, where it shows a model call's messages but no agent's or
    #: workflow's (model calls keep the GenAI messages alone: one copy of their content).
    shows_values = False

    def capture_input(self, value: Any, capture: CaptureConfig) -> Captured | None:
        if not capture.capture_content:
            return None
        return capture_messages(input_messages(value), capture)

    def capture_output(self, result: Any, capture: CaptureConfig) -> Captured | None:
        if not capture.capture_content:
            return None
        return capture_messages(output_messages(result), capture)

    def content_attributes(self, captured: Captured, *, output: bool) -> dict[str, str | bool | int]:
        """The span attributes of captured input (or ``output``) content."""
        if output:
            attributes = captured.attributes(self.output_key, sc.ORCH_OUTPUT_CUT_BYTES)
            if self.shows_values:
                attributes[sc.OUTPUT_VALUE], attributes[sc.OUTPUT_MIME_TYPE] = captured.text, sc.MIME_JSON
        else:
            attributes = captured.attributes(self.input_key, sc.ORCH_INPUT_CUT_BYTES)
            if self.shows_values:
                attributes[sc.INPUT_VALUE], attributes[sc.INPUT_MIME_TYPE] = captured.text, sc.MIME_JSON
        return attributes

    def record_input(self, invocation: Invocation, value: Any, ref: str | None) -> None:
        """The call's input ``value`` (``ref``: its content ref when already on the span; ``""``: none)."""
        span = invocation.span
        if ref is None:
            span.set_attribute(sc.ORCH_INPUT_REF, content_ref(value))
        captured = self.capture_input(value, invocation.capture)
        if captured is not None:
            span.set_attributes(self.content_attributes(captured, output=False))

    def record_result(self, invocation: Invocation, result: Any, ref: str | None = None) -> None:
        if result is None and invocation.yielded is not None:
            result = yielded_result(invocation.yielded, self.joins_text)
        if result is None:
            return
        span = invocation.span
        ref = ref or content_ref(result)
        span.set_attribute(sc.ORCH_OUTPUT_REF, ref)
        results.record(ref, span.get_span_context())
        capture = invocation.capture
        if capture.capture_content:
            captured = self.capture_output(result, capture)
            if captured is not None:
                span.set_attributes(self.content_attributes(captured, output=True))

    def record_item(self, invocation: Invocation, item: Any) -> None:
        """A generator yielded ``item``: kept, to be its result unless it returns one."""
        if invocation.yielded is None:
            invocation.yielded = []
        invocation.yielded.append(item)


def yielded_result(items: list[Any], joins_text: bool = True) -> Any:
    """A generator's result: what it yielded, joined when every item is a string (``joins_text``: an agent's
    streamed text), else as a list."""
    if joins_text and items and all(type(item) is str for item in items):
        return "".join(items)
    return list(items)


# Kinds read the caller's agent and task from the parent context as a dict (``otel_context.get_value``
# reads it the same way, one call further): these run on every decorated call.
def _conversation(attributes: Attributes, parent: Context) -> None:
    task = parent.get(TASK_KEY)
    if isinstance(task, TaskFrame):
        attributes[sc.GEN_AI_CONVERSATION_ID] = task.episode_id


class AgentSpec(Spec):
    """``invoke_agent {name}``: one agent invocation, a fresh agent instance (``agent_id``: fixed, else
    ``{name}-{12 hex}`` per call), the calling agent its parent (``orchestrace.agent.parent_id``)."""

    enters = True

    may_be_traced_by_caller = True
    shows_values = True

    def __init__(self, name: str, role: str | None, agent_id: str | None) -> None:
        super().__init__(name)
        self.role = role
        self.agent_id = agent_id
        self.span_name = f"{sc.OP_INVOKE_AGENT} {name}"
        self.id_prefix = f"{name}-"
        self.fixed_attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                                             sc.GEN_AI_AGENT_NAME: name}
        if role is not None:
            self.fixed_attributes[sc.ORCH_AGENT_ROLE] = role

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        # The random part as ``to_bytes().hex()``: the same digits as ``:012x``, without parsing a format.
        agent_id = self.agent_id or self.id_prefix + _ids.getrandbits(48).to_bytes(6).hex()
        attributes = {**self.fixed_attributes, sc.GEN_AI_AGENT_ID: agent_id}
        caller = parent.get(AGENT_KEY)
        if isinstance(caller, AgentFrame):
            attributes[sc.ORCH_AGENT_PARENT_ID] = caller.id
        _conversation(attributes, parent)
        return self.span_name, SpanKind.INTERNAL, attributes

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        return {AGENT_KEY: AgentFrame(self.name, attributes[sc.GEN_AI_AGENT_ID], self.role)}


class ToolSpec(Spec):
    """``execute_tool {name}``; the arguments and result go to the GenAI tool attributes. The call id is a
    ``tool_call_id`` keyword argument of the call, else ``call_id``, else (``new_call_id``) a new one."""

    may_be_traced_by_caller = True

    #: A generator tool's items stay items (a list), not one text.
    joins_text = False

    def __init__(self, name: str, description: str | None, trusted: bool, call_id: str | None = None,
                 new_call_id: bool = True, arguments: ToolArguments | None = None) -> None:
        super().__init__(name)
        self.arguments = arguments
        self.description = description
        self.trusted = trusted
        self.call_id = call_id
        self.new_call_id = new_call_id
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
            call_id = self.call_id
            if call_id is None and self.new_call_id:
                call_id = "call_" + _ids.getrandbits(96).to_bytes(12).hex()  # as the agent id's
        attributes = {**self.fixed_attributes}
        if call_id is not None:
            attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id
        return self.span_name, SpanKind.INTERNAL, attributes

    input_key = sc.GEN_AI_TOOL_CALL_ARGUMENTS
    output_key = sc.GEN_AI_TOOL_CALL_RESULT

    def input_value(self, args: Sequence[Any], kwargs: Mapping[str, Any], attributes: Attributes,
                    capture: CaptureConfig) -> Any:
        if self.arguments is None:
            return call_input(args, kwargs)
        return self.arguments.bind(args, kwargs)

    def capture_input(self, value: Any, capture: CaptureConfig) -> Captured | None:
        return capture_value(value, capture)

    def capture_output(self, result: Any, capture: CaptureConfig) -> Captured | None:
        return capture_value(result, capture)


class StepSpec(Spec):
    """``{name}``: a step of an orchestration that is not an agent (a graph node): an actor whose output
    gets a content ref; its input and output (framework states) are not captured as content."""

    def __init__(self, name: str, operation: str = sc.OPERATION_NODE) -> None:
        super().__init__(name)
        self.operation = operation
        self.fixed_attributes: Attributes = {sc.ORCH_OPERATION: operation,
                                             sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_CHAIN}

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        return self.name, SpanKind.INTERNAL, {**self.fixed_attributes}

    def capture_input(self, value: Any, capture: CaptureConfig) -> Captured | None:
        return None

    def capture_output(self, result: Any, capture: CaptureConfig) -> Captured | None:
        return None


def set_usage_on(span: Span, usage: Usage) -> None:
    span.set_attributes(usage_attributes(usage))


class LlmSpec(Spec):
    """``chat {model}`` (CLIENT), one model call whose span is current while it runs: the arguments bound by
    the function's signature (see :mod:`orchestrace.arguments`), the reply normalized (see
    :mod:`orchestrace.replies`): usage, response model / id, finish reason, with content capture the
    messages, tool definitions and token ids."""

    enters = True

    def __init__(self, model: str | None, provider: str | None,
                 arguments: CallArguments | None = None, operation: str = sc.OP_CHAT,
                 prompt_history: history.PromptHistory | None = None) -> None:
        super().__init__(model or "")
        self.model = model
        self.provider = provider
        self.arguments = arguments or CallArguments(None)
        self.operation = operation
        #: The histories its calls refer to and add to (default: the process's, :data:`HISTORY`).
        self.prompt_history = prompt_history or HISTORY

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        model = self.model
        if model is None and isinstance(kwargs.get("model"), str):
            model = kwargs["model"]
        attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: self.operation}
        if model:
            attributes[sc.GEN_AI_REQUEST_MODEL] = model
        if self.provider:
            attributes[sc.GEN_AI_PROVIDER_NAME] = self.provider
        _conversation(attributes, parent)
        return (f"{self.operation} {model}" if model else self.operation), SpanKind.CLIENT, attributes

    def input_value(self, args: Sequence[Any], kwargs: Mapping[str, Any], attributes: Attributes,
                    capture: CaptureConfig) -> Any:
        messages, others = self.arguments.bind(args, kwargs)
        if others:
            attributes.update(request_attributes(others, capture.capture_content))
        return messages

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        return {MODEL_CALL_KEY: invocation}

    def record_input(self, invocation: Invocation, value: Any, ref: str | None) -> None:
        """The prompt; with capture on, only the messages no earlier call of the trace exported (a history is
        exported once, see :mod:`orchestrace.history`), unless ``full_prompt`` is set."""
        span = invocation.span
        if ref is None:
            span.set_attribute(sc.ORCH_INPUT_REF, content_ref(value))
        capture = invocation.capture
        if not capture.capture_content:
            return
        messages = input_messages(value)
        start = 0
        if not capture.full_prompt:
            # Refs before capture_messages clips the texts: those of the messages as the caller sent them.
            chained = history.chain([content_ref(m) for m in messages])
            invocation.prompt_chain = chained
            trace_id = format_trace_id(span.get_span_context().trace_id)
            prefix = self.prompt_history.longest_prefix(trace_id, chained)
            if prefix is not None:
                start = prefix[1]
                span.set_attributes({sc.ORCH_PREFIX_SPAN_ID: prefix[0], sc.ORCH_PREFIX_LENGTH: start,
                                     sc.ORCH_INPUT_MESSAGE_COUNT: len(messages)})
        captured = capture_messages(messages[start:], capture)
        if captured is not None:
            span.set_attributes(captured.attributes(sc.GEN_AI_INPUT_MESSAGES, sc.ORCH_INPUT_CUT_BYTES))

    def record_result(self, invocation: Invocation, result: Any, ref: str | None = None) -> None:
        capture = invocation.capture
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
            span.set_attribute(sc.ORCH_OUTPUT_REF, ref or content_ref(result))
        else:
            return
        if invocation.ended_early and reply is not None and reply.finish_reason is None:
            span.set_attribute(sc.ORCH_COMPLETION_INCOMPLETE, True)  # left before the model said it was done
        # A result of no known reply shape (the user's own dict or object) may still state usage and model.
        stated = reply or Reply(usage=extract_usage(result), response_model=response_model(result))
        span.set_attributes(reply_attributes(stated, capture.capture_content,
                                             with_usage=not invocation.explicit_usage))
        if not capture.capture_content:
            return
        messages = [reply.message()] if reply is not None else output_messages(result)
        if invocation.prompt_chain is not None and len(messages) == 1:
            # Before capture clips the texts.
            _remember(self.prompt_history, invocation, invocation.prompt_chain, messages[0])
        captured = capture_messages(messages, capture)
        if captured is not None:
            if cut_bytes:
                captured = Captured(captured.text, True, captured.cut_bytes + cut_bytes)
            span.set_attributes(captured.attributes(sc.GEN_AI_OUTPUT_MESSAGES, sc.ORCH_OUTPUT_CUT_BYTES))

    def record_item(self, invocation: Invocation, item: Any) -> None:
        """A streamed chunk of the reply, of any shape :func:`~orchestrace.replies.parse_chunk` reads."""
        parse_chunk(self.stream_of(invocation), item)

    @staticmethod
    def stream_of(invocation: Invocation) -> ReplyStream:
        """The reply ``invocation`` streams (begun when its first chunk arrives, or when a stream is
        returned: one closed unread is an empty, incomplete reply)."""
        if invocation.stream is None:
            capture = invocation.capture
            limit = capture.max_content_bytes if capture.capture_content else 0
            invocation.stream = ReplyStream(limit)
        return invocation.stream


#: The prompts and completions exported by model calls of ``LlmSpec`` (``@ot.llm``, ``start_model_call``).
HISTORY = history.PromptHistory()


def _remember(store: history.PromptHistory, invocation: Invocation, chained: list[str],
              completion: Message) -> None:
    """The call's prompt (``chained``) and ``completion`` were exported by its span: a later call of the trace
    whose prompt starts with them refers to it. The completion's ref is that of the same message in a later
    prompt (the GenAI input shape: without ``finish_reason``)."""
    as_input = {key: value for key, value in completion.items() if key != "finish_reason"}
    ids = invocation.span.get_span_context()
    store.remember(format_trace_id(ids.trace_id), format_span_id(ids.span_id),
                     [*chained, *history.chain([content_ref(as_input)], chained[-1] if chained else "")])


class WorkflowSpec(Spec):
    """``invoke_workflow {label}``: a workflow run (``gen_ai.workflow.name``); a framework runner's run
    (``runner``) is ``handle_conversation_turn {label}`` under the latest GenAI conventions.

    With ``episode=True`` it is a rollout (``ot.task``): one episode = one orchestration trace, with an
    episode id (``episode_id``, else the enclosing episode's, else a new one) and a task id (``task_id``,
    else the episode id), and the code inside it belongs to that episode. Otherwise ``episode_id`` only
    names the episode the run is part of."""

    enters = True

    shows_values = True

    def __init__(self, name: str | None, task_id: str | None, topology: str | None, system: str | None,
                 workflow: str | None, episode_id: str | None = None, episode: bool = True,
                 runner: bool = False) -> None:
        super().__init__(name or "")
        self.runner = runner
        self.task_id = task_id
        self.topology = topology
        self.system = system
        self.workflow = workflow
        self.episode_id = episode_id
        self.episode = episode

    def describe(self, args: Sequence[Any], kwargs: Mapping[str, Any], parent: Context,
                 ) -> tuple[str, SpanKind, Attributes]:
        # A turn inside a turn of this process is a workflow of that turn (never a second turn).
        runner = self.runner and parent.get(TURN_KEY) is None
        operation = sc.gen_ai_names().runner_operation if runner else sc.OP_INVOKE_WORKFLOW
        attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: operation,
                                  sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_CHAIN}
        episode_id = self.episode_id
        task_id = self.task_id
        if self.episode:
            outer = parent.get(TASK_KEY)
            # A task inside another task's episode is part of that rollout; anything else is a rollout of its
            # own, however many rollouts share the task id.
            if episode_id is None:
                episode_id = outer.episode_id if isinstance(outer, TaskFrame) else uuid.uuid4().hex
            task_id = task_id or episode_id
            attributes[sc.ORCH_TASK_ID] = task_id
        if episode_id is not None:
            attributes[sc.ORCH_EPISODE_ID] = episode_id
            attributes[sc.GEN_AI_CONVERSATION_ID] = episode_id
        if self.workflow:
            attributes[sc.GEN_AI_WORKFLOW_NAME] = self.workflow
        if self.topology is not None:
            attributes[sc.ORCH_TOPOLOGY] = self.topology
        if self.system is not None:
            attributes[sc.ORCH_SYSTEM] = self.system
        label = self.name or self.task_id or self.workflow or task_id or episode_id or ""
        return f"{operation} {label}".rstrip(), SpanKind.INTERNAL, attributes

    def enter(self, invocation: Invocation, attributes: Attributes) -> dict[str, object] | None:
        own: dict[str, object] = {}
        if attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_HANDLE_CONVERSATION_TURN:
            own[TURN_KEY] = True
        if self.episode:
            own[TASK_KEY] = TaskFrame(str(attributes[sc.ORCH_TASK_ID]), str(attributes[sc.ORCH_EPISODE_ID]))
        return own or None
