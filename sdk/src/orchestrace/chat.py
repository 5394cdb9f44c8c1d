"""A model call seen through a framework's callbacks (``start_chat``): known by its chat messages, with a span
written whole when the call ends.

For integrations that are told when a model call starts and ends (LangChain callbacks, a tracing processor)
but run nothing inside it: the span is started at the end, with the call's start time and every attribute at
once, so nothing is open meanwhile and its attributes are cleaned once. Refs are those of the GenAI form of
the messages (``messages_ref``, ``message_ref``), which the collector recomputes from captured messages.
With a :class:`~orchestrace.history.PromptHistory`, a prompt that continues an earlier call's prompt and
completion in the same trace carries only its new messages plus a reference (a history is exported once).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, format_span_id, format_trace_id

from orchestrace import history as _history
from orchestrace import semconv as sc
from orchestrace.arguments import request_attributes
from orchestrace.config import CaptureConfig
from orchestrace.errors import record_error
from orchestrace.failsafe import failsafe
from orchestrace.fields import field_of
from orchestrace.messages import (
    Message,
    PromptRefs,
    capture_messages,
    captured_list,
    captured_message_json,
    captured_reply_json,
    genai_message,
    message_ref,
    messages_ref,
    prompt_refs,
)
from orchestrace.replies import Reply, normalize, reply_attributes
from orchestrace.telemetry import Telemetry
from orchestrace.usage import Usage

_OK = Status(StatusCode.OK)


class ChatCall:
    """A model call in progress: its span is started, with every attribute at once, when the call ends
    (:meth:`stop` or :meth:`fail`, once)."""

    __slots__ = ("attributes", "context", "history", "name", "prompt", "prompt_refs", "start_ns", "telemetry")

    def __init__(self, telemetry: Telemetry, name: str, context: Context, attributes: dict[str, Any],
                 prompt: Sequence[Any], history: _history.PromptHistory | None,
                 capture_content: bool) -> None:
        self.telemetry = telemetry
        self.name = name
        self.context = context
        self.attributes = attributes
        self.prompt = prompt  # converted to GenAI messages only when content is captured
        self.history = history
        self.start_ns = time.time_ns()
        self.prompt_refs: PromptRefs | None = None  # taken at the start when capturing, before clipping
        if capture_content:  # ``telemetry.capture`` as the caller read it
            self.prompt_refs = prompt_refs(prompt)
            attributes[sc.ORCH_INPUT_REF] = self.prompt_refs.whole
        else:
            attributes[sc.ORCH_INPUT_REF] = messages_ref(prompt)

    def finish(self, message: Any = None, usage: Usage | None = None) -> None:
        """:meth:`stop` unguarded, for a caller that guards its own code around it (one guard, not two, on a
        model call's path)."""
        capture = self.telemetry.capture
        reply = None
        if message is not None:
            # Without capture only the reply's metadata goes on the span: its text is not read.
            reply = (normalize(message, capture.capture_content)
                     or Reply(text=str(field_of(message, "content") or "")))
            if reply.usage is None:
                reply.usage = usage
            self.attributes.update(reply_attributes(reply, capture.capture_content))
            self.attributes[sc.ORCH_OUTPUT_REF] = message_ref(message)
        span = self._span(reply, capture)
        span.set_status(_OK)
        span.end()

    #: The call returned ``message`` (its reply: a chat message or any reply shape
    #: :func:`orchestrace.replies.normalize` reads); ``usage``: reported beside the reply, used when the reply
    #: states none. Never raises (an internal failure is logged once).
    stop = failsafe(None)(finish)

    @failsafe(None)
    def fail(self, exc: BaseException) -> None:
        """The call raised ``exc``."""
        span = self._span(None, self.telemetry.capture)
        record_error(span, exc)
        span.end()

    def _span(self, completion: Reply | None, capture: CaptureConfig) -> Span:
        """The call's span, started now with its start time; with content capture, the prompt's messages that
        no earlier call of the trace exported, and the completion."""
        attrs = self.attributes
        chained: list[str] = []  # the prompt's running digests (``history.chain``), when a history needs them
        if capture.capture_content:
            given = self.prompt_refs  # None when capture was off at the start
            converted: list[Message] | None
            if given is None:
                converted = [genai_message(m) for m in self.prompt]
                # Before capture_messages clips the texts.
                refs = [message_ref(m, g) for m, g in zip(self.prompt, converted, strict=True)]
            else:  # converted: None when every message was plain text (its ref needed no conversion)
                converted, refs = given.converted, given.each
            start = 0
            if self.history is not None:
                attrs[sc.ORCH_INPUT_MESSAGE_COUNT] = len(self.prompt)
            # With full_prompt every call carries its whole prompt: no reference to an earlier call's.
            if self.history is not None and not capture.full_prompt:
                chained = _history.chain(refs)
                trace_id = trace.get_current_span(self.context).get_span_context().trace_id
                prefix = (self.history.longest_prefix(format_trace_id(trace_id), chained)
                          if trace_id else None)
                if prefix is not None:
                    attrs[sc.ORCH_PREFIX_SPAN_ID], attrs[sc.ORCH_PREFIX_LENGTH] = prefix
                    start = prefix[1]
            # The messages carried, written directly when they were for their refs (none was converted) and
            # nothing in them is cut or redacted; else converted (plain texts were not, for their refs).
            text = (captured_list([captured_message_json(m) for m in self.prompt[start:]], capture)
                    if converted is None else None)
            if text is not None:
                attrs[sc.GEN_AI_INPUT_MESSAGES] = text
            else:
                messages = (converted[start:] if converted is not None
                            else [genai_message(m) for m in self.prompt[start:]])
                captured = capture_messages(messages, capture)
                if captured is not None:
                    attrs.update(captured.attributes(sc.GEN_AI_INPUT_MESSAGES, sc.ORCH_INPUT_CUT_BYTES))
            if completion is not None:  # the GenAI output-message shape, ``finish_reason`` included
                text = captured_list([captured_reply_json(completion)], capture)
                if text is not None:
                    attrs[sc.GEN_AI_OUTPUT_MESSAGES] = text
                else:
                    captured = capture_messages([completion.message()], capture)
                    if captured is not None:
                        attrs.update(captured.attributes(sc.GEN_AI_OUTPUT_MESSAGES, sc.ORCH_OUTPUT_CUT_BYTES))
        span = self.telemetry.start_span(self.name, self.context, SpanKind.CLIENT, attrs,
                                         start_time=self.start_ns)
        if (completion is not None and self.history is not None and capture.capture_content
                and not capture.full_prompt):
            ids = span.get_span_context()
            # The prompt's chain extended by the completion, not hashed again.
            chained += _history.chain([str(attrs[sc.ORCH_OUTPUT_REF])], chained[-1] if chained else "")
            self.history.remember(format_trace_id(ids.trace_id), format_span_id(ids.span_id), chained)
        return span


class _Untraced(ChatCall):
    """What ``start_chat`` gives when orchestrace failed to start the call's record (logged once): the call
    runs as usual, untraced; its ``stop`` and ``fail`` do nothing."""

    __slots__ = ()

    def __init__(self) -> None:  # no record to keep
        pass

    def finish(self, message: Any = None, usage: Usage | None = None) -> None:
        return None

    stop = finish

    def fail(self, exc: BaseException) -> None:
        return None


#: Stateless, so one is shared.
UNTRACED = _Untraced()


class ChatSpec:
    """What one model's calls share: the span's name and request attributes (operation, model, provider,
    sampling parameters and, with capture, the tools offered). Made once per model and settings by a caller
    that sees the same model called again (:func:`chat_spec`); each call then costs only what differs."""

    __slots__ = ("attributes", "capture_content", "name")

    def __init__(self, name: str, attributes: dict[str, Any], capture_content: bool) -> None:
        self.name = name
        self.attributes = attributes
        self.capture_content = capture_content

    def begin(self, telemetry: Telemetry, messages: Sequence[Any], context: Context,
              history: _history.PromptHistory | None) -> ChatCall:
        """:meth:`start` unguarded, for a caller that guards its own code around it."""
        return ChatCall(telemetry, self.name, context, dict(self.attributes), messages, history,
                        self.capture_content)

    #: A call of this model with the prompt ``messages``, under ``context`` (see :func:`chat_call`); its
    #: prompt refs follow this spec's capture setting. On an internal failure (logged once) the call runs
    #: untraced.
    start = failsafe(UNTRACED)(begin)


def chat_spec(*, model: str | None, label: str | None, provider: str | None, operation: str,
              request: Mapping[str, Any] | None, capture_content: bool) -> ChatSpec:
    """The spec of a model's calls: ``{operation} {label or model}``, with ``request``'s sampling parameters
    and, when ``capture_content``, its tool definitions."""
    attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: operation}
    if model:
        attributes[sc.GEN_AI_REQUEST_MODEL] = model
    if provider:
        attributes[sc.GEN_AI_PROVIDER_NAME] = provider
    if request:  # sampling parameters, and with capture the tools offered
        attributes.update(request_attributes(request, capture_content))
    return ChatSpec(f"{operation} {label or model or 'model'}", attributes, capture_content)


def chat_call(telemetry: Telemetry, messages: Sequence[Any], context: Context, *, model: str | None,
              label: str | None, provider: str | None, operation: str, request: Mapping[str, Any] | None,
              history: _history.PromptHistory | None) -> ChatCall:
    spec = chat_spec(model=model, label=label, provider=provider, operation=operation, request=request,
                     capture_content=telemetry.capture.capture_content)
    return ChatCall(telemetry, spec.name, context, spec.attributes, messages, history, spec.capture_content)
