"""Deterministic chat models for the examples: no network, no API key, the same answers on every run.

``ScriptedChatModel`` is a real LangChain ``BaseChatModel``, so LangGraph, ``create_agent``,
langgraph-supervisor and langgraph-swarm drive it exactly as they would drive a hosted model: it binds
tools, returns tool calls, reports token usage and streams. Only the answers are canned. Swap it for
``ChatOpenAI(...)`` or ``init_chat_model(...)`` and the example runs against a real model, unchanged
otherwise.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCall, ToolCallChunk
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

#: One scripted answer: plain text, or an ``AIMessage`` carrying tool calls (see ``call``).
Reply = str | AIMessage
#: Computes the answer from the conversation, for models called concurrently (parallel workers).
Responder = Callable[[Sequence[BaseMessage]], Reply]


def call(name: str, **args: Any) -> AIMessage:
    """A scripted answer that calls tool ``name`` with ``args`` (the id is filled in when it is sent)."""
    return AIMessage(content="", tool_calls=[ToolCall(name=name, args=args, id=None)])


def parallel(*answers: AIMessage) -> AIMessage:
    """One scripted answer making the tool calls of several ``call(...)`` answers at once."""
    return AIMessage(content="", tool_calls=[tc for answer in answers for tc in answer.tool_calls])


def _words(value: object) -> int:
    """Token count of the fakes: whitespace-separated words, deterministic and good enough for a demo."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return len(text.split())


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next reply of ``script``, or ``script(messages)`` if it is a function."""

    model_name: str = "scripted"
    script: Sequence[Reply] | Responder

    # Agents may call one model from several threads (parallel branches): the turn counter is shared.
    _turn: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return LangSmithParams(ls_provider="scripted", ls_model_name=self.model_name, ls_model_type="chat")

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _next_reply(self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> AIMessage:
        with self._lock:
            turn = self._turn
            self._turn += 1
        if callable(self.script):
            reply = self.script(messages)
        elif turn < len(self.script):
            reply = self.script[turn]
        else:
            raise RuntimeError(f"{self.model_name}: script has {len(self.script)} replies, asked for more")
        if isinstance(reply, str):
            reply = AIMessage(content=reply)
        # A script naming a tool the agent does not have is a bug in the example: say so rather than loop.
        bound = {t["function"]["name"] for t in tools}
        unknown = [tc["name"] for tc in reply.tool_calls if tc["name"] not in bound]
        if unknown:
            raise ValueError(f"{self.model_name}: script calls {unknown}, bound tools are {sorted(bound)}")
        calls = [
            ToolCall(name=tc["name"], args=tc["args"], id=tc["id"] or f"call_{self.model_name}_{turn}_{i}")
            for i, tc in enumerate(reply.tool_calls)
        ]
        usage = UsageMetadata(
            input_tokens=sum(_words(m.content) for m in messages),
            output_tokens=_words(reply.content) + sum(_words(tc["args"]) + 1 for tc in calls),
            total_tokens=0,
        )
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        return AIMessage(
            content=reply.content,
            tool_calls=calls,
            usage_metadata=usage,
            response_metadata={
                "model_name": self.model_name,
                "finish_reason": "tool_calls" if calls else "stop",
            },
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._next_reply(messages, kwargs.get("tools", ()))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._next_reply(messages, kwargs.get("tools", ()))
        text = reply.content if isinstance(reply.content, str) else ""
        # Word by word, then the tool calls, then usage and finish reason on the last chunk: as providers do.
        for i, word in enumerate(text.split(" ") if text else ()):
            piece = word if i == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
        tool_chunks = [
            ToolCallChunk(name=tc["name"], args=json.dumps(tc["args"]), id=tc["id"], index=i)
            for i, tc in enumerate(reply.tool_calls)
        ]
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=tool_chunks,
                usage_metadata=reply.usage_metadata,
                response_metadata=reply.response_metadata,
                chunk_position="last",
            )
        )
