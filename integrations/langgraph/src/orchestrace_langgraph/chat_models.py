"""``chat {model}`` (or ``text_completion {model}``) spans, from a LangChain callback handler that every
callback manager carries.

Callbacks see every model call whatever its entry point (``invoke``, ``stream``, LangGraph's
``stream_mode="messages"``, ``astream_events``) and, at ``on_llm_end``, the whole response with its token
usage, also when it was streamed (LangChain merges the chunks before calling it). The span's parent is the
context current where the model is called (the node, tool or user span around it); the handler runs inline,
so that context is the caller's. One handler object is shared by all managers: LangChain's configure hook adds
it once to each manager it configures, whatever other handlers (OpenInference's, OpenLLMetry's) are there.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer, format_span_id, format_trace_id
from opentelemetry.util.types import AttributeValue
from orchestrace import semconv as sc
from orchestrace.failsafe import failsafe

from orchestrace_langgraph import history
from orchestrace_langgraph.actors import NamespaceIndex, parent_context
from orchestrace_langgraph.content import (
    PromptRefs,
    Reply,
    capture_messages,
    genai_message,
    get_config,
    message_ref,
    messages_ref,
    normalize,
    prompt_refs,
    reply_attributes,
    request_attributes,
)
from orchestrace_langgraph.values import set_outcome


class _Call:
    """A model call in progress: its span is started, with every attribute at once, when the call ends."""

    __slots__ = ("attributes", "context", "name", "prompt", "prompt_refs", "start_ns")

    def __init__(self, name: str, context: otel_context.Context, attributes: dict[str, AttributeValue],
                 prompt: Sequence[BaseMessage | str], prompt_refs: PromptRefs | None, start_ns: int) -> None:
        self.name = name
        self.context = context
        self.attributes = attributes
        self.prompt = prompt  # converted to GenAI messages only when content is captured
        self.prompt_refs = prompt_refs  # taken at the start when capturing, before the texts are clipped
        self.start_ns = start_ns


class ChatModelCallbackHandler(BaseCallbackHandler):
    run_inline = True  # called in the model caller's context, so the current span is the right parent

    # Every runnable of every graph reports to this handler; only model calls concern it. Class attributes
    # rather than the base class's properties: LangChain reads one at every event of every runnable.
    ignore_chain = True
    ignore_agent = True
    ignore_retriever = True
    ignore_custom_event = True
    ignore_llm = False
    ignore_chat_model = False

    def __init__(self, tracer: Tracer, namespaces: NamespaceIndex) -> None:
        super().__init__()
        self._tracer = tracer
        self._namespaces = namespaces
        self._calls: dict[UUID, _Call] = {}  # by LangChain run id: single dict operations, no lock needed
        self._prompts = history.PromptIndex()
        self.enabled = True

    # The callbacks themselves are not guarded: the guard is on the methods they call, through which
    # positional arguments pass for less than LangChain's keywords would.
    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *,
                            run_id: UUID, parent_run_id: UUID | None = None, tags: list[str] | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start(sc.OP_CHAT, serialized, messages, run_id, metadata, kwargs)

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID,
                     parent_run_id: UUID | None = None, tags: list[str] | None = None,
                     metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start(sc.OP_TEXT_COMPLETION, serialized, prompts, run_id, metadata, kwargs)

    @failsafe(None)
    def _start(self, operation: str, serialized: dict[str, Any] | None,
               prompts: Sequence[Sequence[BaseMessage] | str], run_id: UUID, metadata: dict[str, Any] | None,
               kwargs: dict[str, Any]) -> None:
        """Remember what the span needs; it is started (with this start time) when the call ends, so that
        its attributes are cleaned once and no span is open meanwhile (nothing runs inside it: a callback
        cannot make it the current span).

        ``prompts``: LangChain's batch, one prompt per call; a chat model's is a list of messages, a
        completion model's a text, read as one user message."""
        if not self.enabled:
            return
        start_ns = time.time_ns()
        first = prompts[0] if prompts else []
        prompt: Sequence[BaseMessage | str] = [first] if isinstance(first, str) else first
        metadata = metadata or {}
        params = kwargs.get("invocation_params") or {}
        model = params.get("model") or params.get("model_name") or metadata.get("ls_model_name")
        label = str(model) if model else _class_name(serialized)
        attrs: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: operation}
        if model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = str(model)
        provider = metadata.get("ls_provider")
        if provider:
            attrs[sc.GEN_AI_PROVIDER_NAME] = str(provider)
        capture_content = get_config().capture_content
        # Sampling parameters, and with capture the tools bound to the model (``bind_tools``).
        attrs.update(request_attributes(params, capture_content))
        refs = None
        if capture_content:
            refs = prompt_refs(prompt)
            attrs[sc.ORCH_INPUT_REF] = refs.whole
        else:
            attrs[sc.ORCH_INPUT_REF] = messages_ref(prompt)
        current = otel_context.get_current()
        context = parent_context(self._namespaces, metadata, current) or current
        self._calls[run_id] = _Call(f"{operation} {label}", context, attrs, prompt, refs, start_ns)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None,
                   **kwargs: Any) -> None:
        self._end(run_id, response)

    @failsafe(None)
    def _end(self, run_id: UUID, response: LLMResult) -> None:
        call = self._calls.pop(run_id, None)
        if call is None:
            return
        first = response.generations[0] if response.generations else []
        generation = first[0] if first else None
        message: BaseMessage | None = None
        if isinstance(generation, ChatGeneration):
            message = generation.message
        elif generation is not None:
            message = AIMessage(generation.text)
        reply = None
        if message is not None:
            reply = normalize(message) or Reply(text=message.text)
            call.attributes.update(reply_attributes(reply, get_config().capture_content))
            if reply.usage is None:
                _add_llm_output_usage(call.attributes, response)
            call.attributes[sc.ORCH_OUTPUT_REF] = message_ref(message)
        span = self._span(call, reply)
        set_outcome(span, None)
        span.end()

    @failsafe(None)
    def on_llm_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        call = self._calls.pop(run_id, None)
        if call is None:
            return
        span = self._span(call, None)
        set_outcome(span, error)
        span.end()

    def _span(self, call: _Call, completion: Reply | None) -> Span:
        """The call's span, started now with its start time; with content capture, the prompt's messages that
        no earlier call of the trace exported, and the completion."""
        attrs = call.attributes
        config = get_config()
        refs: list[str] = []
        if config.capture_content:
            given = call.prompt_refs  # None when capture was off at the start
            messages = (given.converted if given is not None and given.converted is not None
                        else [genai_message(m) for m in call.prompt])
            # Before capture_messages clips the texts.
            refs = given.each if given is not None else [
                message_ref(m, g) for m, g in zip(call.prompt, messages, strict=True)]
            trace_id = trace.get_current_span(call.context).get_span_context().trace_id
            # With full_prompt every call carries its whole prompt: no reference to an earlier call's.
            prefix = (self._prompts.longest_prefix(format_trace_id(trace_id), history.chain(refs))
                      if trace_id and not config.full_prompt else None)
            start = 0
            if prefix is not None:
                attrs[sc.ORCH_PREFIX_SPAN_ID], attrs[sc.ORCH_PREFIX_LENGTH] = prefix
                start = prefix[1]
            attrs[sc.ORCH_INPUT_MESSAGE_COUNT] = len(messages)
            captured = capture_messages(messages[start:], config)
            if captured is not None:
                attrs.update(captured.attributes(sc.GEN_AI_INPUT_MESSAGES, sc.ORCH_INPUT_CUT_BYTES))
            if completion is not None:  # the GenAI output-message shape, ``finish_reason`` included
                captured = capture_messages([completion.message()], config)
                if captured is not None:
                    attrs.update(captured.attributes(sc.GEN_AI_OUTPUT_MESSAGES, sc.ORCH_OUTPUT_CUT_BYTES))
        span = self._tracer.start_span(call.name, context=call.context, kind=SpanKind.CLIENT,
                                       attributes=attrs, start_time=call.start_ns)
        if completion is not None and config.capture_content and not config.full_prompt:
            ids = span.get_span_context()
            self._prompts.remember(format_trace_id(ids.trace_id), format_span_id(ids.span_id),
                                   history.chain([*refs, str(attrs[sc.ORCH_OUTPUT_REF])]))
        return span


def _class_name(serialized: dict[str, Any] | None) -> str:
    ids = (serialized or {}).get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else "model"


def _add_llm_output_usage(attrs: dict[str, AttributeValue], response: LLMResult) -> None:
    """Usage a model reports only in ``llm_output`` (not on its message)."""
    token_usage = (response.llm_output or {}).get("token_usage") or {}
    if "prompt_tokens" in token_usage:
        attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = int(token_usage["prompt_tokens"])
    if "completion_tokens" in token_usage:
        attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = int(token_usage["completion_tokens"])


class _HandlerSlot:
    """The handler that LangChain's configure hook adds (inheritable) to every callback manager it configures:
    every runnable's and every model call's, whose child managers inherit it.

    The hook reads ``get()`` as it would a ``ContextVar``'s. A slot rather than a ``ContextVar``: a context
    variable's default cannot be withdrawn on uninstrument (LangChain cannot remove a hook), and a value set
    in one context would not reach threads that start with an empty one."""

    def __init__(self) -> None:
        self._slot: dict[str, ChatModelCallbackHandler] = {}
        #: ``get(default=None)``: the handler, else ``default``, as ``ContextVar.get`` answers. The hook reads
        #: it twice for every manager configured: a C ``dict.get`` bound to the key runs no Python code.
        self.get = functools.partial(self._slot.get, "handler")
        self._registered = False
        self._lock = threading.Lock()

    def install(self, handler: ChatModelCallbackHandler | None) -> None:
        """From now on, managers that LangChain configures carry ``handler`` (``None``: no handler)."""
        with self._lock:
            if not self._registered:
                register_configure_hook(cast("ContextVar[Any]", self), True)
                self._registered = True
            if handler is None:
                self._slot.clear()
            else:
                self._slot["handler"] = handler


configure_hook = _HandlerSlot()
