"""A deterministic chat model for tests: scripted replies (tool calls included) with token usage, streamable.

``GenericFakeChatModel`` from ``langchain_core`` has no tool binding and no usage; agents need both.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic import Field, PrivateAttr

Responder = Callable[[Sequence[BaseMessage]], AIMessage]


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


class ScriptedChatModel(BaseChatModel):
    """Replies with ``replies`` in order (then repeats the last), or with ``respond(messages)`` when given.

    Usage is deterministic: one input token per input message word, one output token per output word.
    """

    replies: list[AIMessage] = Field(default_factory=list)
    respond: Responder | None = None
    model_name: str = "scripted-model"
    _next: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable:  # type: ignore[override]
        return self

    def _reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        if self.respond is not None:
            reply = self.respond(messages)
        else:
            with self._lock:
                reply = self.replies[min(self._next, len(self.replies) - 1)]
                self._next += 1
        words_in = sum(len(str(m.content).split()) for m in messages)
        words_out = max(1, len(str(reply.content).split()))
        return reply.model_copy(update={
            "usage_metadata": {"input_tokens": words_in, "output_tokens": words_out,
                               "total_tokens": words_in + words_out},
            "response_metadata": {"model_name": self.model_name, "finish_reason": "stop"},
        })

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages)
        words = str(reply.content).split(" ") if reply.content else [""]
        for i, word in enumerate(words):
            last = i == len(words) - 1
            chunk = AIMessageChunk(
                content=word if i == 0 else " " + word,
                id=reply.id,
                tool_call_chunks=[
                    {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": k,
                     "type": "tool_call_chunk"}
                    for k, c in enumerate(reply.tool_calls)
                ] if last else [],
                usage_metadata=reply.usage_metadata if last else None,
                response_metadata=reply.response_metadata if last else {},
            )
            if run_manager is not None:
                run_manager.on_llm_new_token(str(chunk.content), chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)

