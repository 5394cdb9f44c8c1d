"""``chat {model}`` (or ``text_completion {model}``) spans, from a LangChain callback handler that every
callback manager carries (``orchestrace.instrumentation.chat_spec``: one span written whole at the call's
end, an agent loop's message history exported once).

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
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook
from opentelemetry import context as otel_context
from orchestrace import semconv as sc
from orchestrace.instrumentation import (
    ChatCall,
    ChatSpec,
    PromptHistory,
    Telemetry,
    chat_spec,
    extract_usage,
    failsafe,
)

from orchestrace_langgraph.actors import NamespaceIndex, parent_context

#: Model specs kept by a handler: more than this many models seen, it starts again.
_SPECS = 256


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

    def __init__(self, telemetry: Telemetry, namespaces: NamespaceIndex) -> None:
        super().__init__()
        self._telemetry = telemetry
        self._namespaces = namespaces
        # By LangChain run id, as its integer (a UUID's ``__hash__`` is Python code): single dict operations,
        # no lock needed.
        self._calls: dict[int, ChatCall] = {}
        self._history = PromptHistory()
        #: Per model (its serialized form, unique to it) and settings: (that form, the invocation parameters
        #: the spec was made from, the spec).
        self._specs: dict[tuple[Any, ...], tuple[Any, dict[str, Any], ChatSpec]] = {}
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
        """Start the call's record (its span is written when it ends: see ``orchestrace.chat``).

        ``prompts``: LangChain's batch, one prompt per call; a chat model's is a list of messages, a
        completion model's a text, read as one user message."""
        if not self.enabled:
            return
        first = prompts[0] if prompts else []
        prompt: Sequence[BaseMessage | str] = [first] if isinstance(first, str) else first
        metadata = metadata or {}
        params = kwargs.get("invocation_params") or {}
        provider = metadata.get("ls_provider")
        ls_model = metadata.get("ls_model_name")
        capture_content = self._telemetry.capture.capture_content
        # The model's spec, made at its first call: what the spec is made of is compared (the parameters, a
        # small dict, in C), not remade.
        key = (id(serialized), operation, provider, ls_model, capture_content)
        found = self._specs.get(key)
        if found is not None and found[0] is serialized and found[1] == params:
            spec = found[2]
        else:
            spec = _spec(operation, serialized, params, provider, ls_model, capture_content)
            if len(self._specs) >= _SPECS:  # models made per request: forget the old ones
                self._specs.clear()
            self._specs[key] = (serialized, params, spec)
        current = otel_context.get_current()
        context = parent_context(self._namespaces, metadata, current) or current
        # ``begin``, not ``start``: this method's guard is the only one needed.
        self._calls[run_id.int] = spec.begin(self._telemetry, prompt, context, self._history)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None,
                   **kwargs: Any) -> None:
        self._end(run_id, response)

    @failsafe(None)
    def _end(self, run_id: UUID, response: LLMResult) -> None:
        call = self._calls.pop(run_id.int, None)
        if call is None:
            return
        first = response.generations[0] if response.generations else []
        generation = first[0] if first else None
        message: BaseMessage | None = None
        if isinstance(generation, ChatGeneration):
            message = generation.message
        elif generation is not None:
            message = AIMessage(generation.text)
        # Usage a model reports only in ``llm_output`` (not on its message).
        call.finish(message, extract_usage(response.llm_output))  # under _end's guard

    @failsafe(None)
    def on_llm_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                     **kwargs: Any) -> None:
        call = self._calls.pop(run_id.int, None)
        if call is not None:
            call.fail(error)


def _spec(operation: str, serialized: dict[str, Any] | None, params: dict[str, Any], provider: Any,
          ls_model: Any, capture_content: bool) -> ChatSpec:
    """The spec of a model's calls from what LangChain tells of it: sampling parameters, and with capture the
    tools bound to the model (``bind_tools``)."""
    model = params.get("model") or params.get("model_name") or ls_model
    return chat_spec(model=str(model) if model else None,
                     label=str(model) if model else _class_name(serialized),
                     provider=str(provider) if provider else None, operation=operation, request=params,
                     capture_content=capture_content)


def _class_name(serialized: dict[str, Any] | None) -> str:
    ids = (serialized or {}).get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else "model"


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
