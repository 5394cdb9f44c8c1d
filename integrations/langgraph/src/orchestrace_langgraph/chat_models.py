"""``chat {model}`` (or ``text_completion {model}``) spans, from a LangChain callback handler that every
callback manager carries.

Callbacks see every model call whatever its entry point (``invoke``, ``stream``, LangGraph's
``stream_mode="messages"``, ``astream_events``) and, at ``on_llm_end``, the whole response with its token
usage, also when it was streamed (LangChain merges the chunks before calling it). The span's parent is the
context current where the model is called (the node, tool or user span around it); the handler runs inline,
so that context is the caller's. One handler object is shared by all managers: it is added once per manager,
whatever other handlers (OpenInference's, OpenLLMetry's) are there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackManager, BaseCallbackHandler, CallbackManager
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, format_span_id, format_trace_id
from opentelemetry.util.types import AttributeValue
from orchestrace import semconv as sc
from orchestrace.failsafe import failsafe

from orchestrace_langgraph import history
from orchestrace_langgraph.actors import NamespaceIndex, parent_context
from orchestrace_langgraph.content import capture_messages, content_ref, genai_message, get_config


class _Call:
    __slots__ = ("refs", "span")

    def __init__(self, span: Span, refs: list[str]) -> None:
        self.span = span
        self.refs = refs


class ChatModelCallbackHandler(BaseCallbackHandler):
    run_inline = True  # called in the model caller's context, so the current span is the right parent

    # Every runnable of every graph reports to this handler; only model calls concern it.
    @property
    def ignore_chain(self) -> bool:
        return True

    @property
    def ignore_agent(self) -> bool:
        return True

    @property
    def ignore_retriever(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    def __init__(self, tracer: Tracer, namespaces: NamespaceIndex) -> None:
        super().__init__()
        self._tracer = tracer
        self._namespaces = namespaces
        self._calls: dict[UUID, _Call] = {}
        self._lock = threading.Lock()
        self._prompts = history.PromptIndex()
        self.enabled = True

    @failsafe(None)
    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *,
                            run_id: UUID, parent_run_id: UUID | None = None, tags: list[str] | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start(sc.OP_CHAT, serialized, messages[0] if messages else [], run_id, metadata, kwargs)

    @failsafe(None)
    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID,
                     parent_run_id: UUID | None = None, tags: list[str] | None = None,
                     metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # A completion model (not a chat model): its prompt is text, read as one user message.
        self._start(sc.OP_TEXT_COMPLETION, serialized, prompts[:1], run_id, metadata, kwargs)

    def _start(self, operation: str, serialized: dict[str, Any] | None, prompt: Sequence[BaseMessage | str],
               run_id: UUID, metadata: dict[str, Any] | None, kwargs: dict[str, Any]) -> None:
        if not self.enabled:
            return
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
        messages = [genai_message(m) for m in prompt]
        attrs[sc.ORCH_INPUT_REF] = content_ref(messages)
        attrs[sc.ORCH_INPUT_MESSAGE_COUNT] = len(prompt)
        span = self._tracer.start_span(f"{operation} {label}",
                                       context=parent_context(self._namespaces, metadata),
                                       kind=SpanKind.CLIENT, attributes=attrs)
        config = get_config()
        refs: list[str] = []  # of each message: only needed to export the history once, with content
        if config.capture_content:
            refs = [content_ref(m) for m in messages]
            trace_id = format_trace_id(span.get_span_context().trace_id)
            prefix = self._prompts.longest_prefix(trace_id, history.chain(refs))
            start = 0
            if prefix is not None:
                span.set_attributes({sc.ORCH_PREFIX_SPAN_ID: prefix[0], sc.ORCH_PREFIX_LENGTH: prefix[1]})
                start = prefix[1]
            captured = capture_messages(messages[start:], config)
            if captured is not None:
                span.set_attributes(captured.attributes(sc.GEN_AI_INPUT_MESSAGES))
        with self._lock:
            self._calls[run_id] = _Call(span, refs)

    @failsafe(None)
    def on_llm_end(self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None,
                   **kwargs: Any) -> None:
        with self._lock:
            call = self._calls.pop(run_id, None)
        if call is None:
            return
        span = call.span
        try:
            first = response.generations[0] if response.generations else []
            generation = first[0] if first else None
            message: BaseMessage | None = None
            if isinstance(generation, ChatGeneration):
                message = generation.message
            elif generation is not None:
                message = AIMessage(generation.text)
            if message is not None:
                # One set_attributes call: each call takes the span's lock and cleans what it is given.
                output = genai_message(message)
                out_ref = content_ref(output)
                attrs = _usage_attributes(message, response)
                attrs[sc.ORCH_OUTPUT_REF] = out_ref
                config = get_config()
                captured = capture_messages([output], config) if config.capture_content else None
                if captured is not None:
                    attrs.update(captured.attributes(sc.GEN_AI_OUTPUT_MESSAGES))
                    ids = span.get_span_context()
                    self._prompts.remember(format_trace_id(ids.trace_id), format_span_id(ids.span_id),
                                           history.chain([*call.refs, out_ref]))
                span.set_attributes(attrs)
        finally:
            span.end()

    @failsafe(None)
    def on_llm_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        with self._lock:
            call = self._calls.pop(run_id, None)
        if call is None:
            return
        if isinstance(error, Exception):
            call.span.record_exception(error)
        call.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:512]))
        call.span.end()


def _class_name(serialized: dict[str, Any] | None) -> str:
    ids = (serialized or {}).get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else "model"


def _usage_attributes(message: BaseMessage, response: LLMResult) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {}
    usage = getattr(message, "usage_metadata", None)
    if usage:
        attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = int(usage.get("input_tokens", 0))
        attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = int(usage.get("output_tokens", 0))
    else:
        token_usage = (response.llm_output or {}).get("token_usage") or {}
        if "prompt_tokens" in token_usage:
            attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = int(token_usage["prompt_tokens"])
        if "completion_tokens" in token_usage:
            attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = int(token_usage["completion_tokens"])
    metadata = message.response_metadata or {}
    finish = metadata.get("finish_reason") or metadata.get("stop_reason")
    if finish:
        attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = [str(finish)]
    response_model = metadata.get("model_name") or metadata.get("model")
    if response_model:
        attrs[sc.GEN_AI_RESPONSE_MODEL] = str(response_model)
    return attrs


def callback_manager_init(handler: ChatModelCallbackHandler) -> Callable[..., None]:
    """Wrapper of ``BaseCallbackManager.__init__`` that makes every manager carry ``handler``."""

    def wrapper(wrapped: Callable[..., None], instance: Any, args: Sequence[Any],
                kwargs: dict[str, Any]) -> None:
        wrapped(*args, **kwargs)
        _add_handler(instance, handler)

    return wrapper


@failsafe(None)
def _add_handler(manager: Any, handler: ChatModelCallbackHandler) -> None:
    # Only the managers that run LangChain components: LangGraph's graph-lifecycle managers are
    # BaseCallbackManagers too, and a handler there would switch its interrupt/resume dispatch on.
    if not isinstance(manager, (CallbackManager, AsyncCallbackManager)):
        return
    if handler not in manager.inheritable_handlers:
        manager.add_handler(handler, inherit=True)
