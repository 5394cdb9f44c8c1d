"""Scripted models for the OpenAI Agents SDK examples (and tests): replies known in advance, with their token
counts, traced the way OpenAI's own models trace their calls (no client, no API key, no network). Put an
``OpenAIResponsesModel`` (any model name) in their place and the examples run against a real model.

``ScriptedResponsesModel`` behaves like ``OpenAIResponsesModel``: a ``response_span`` carrying the request's
input and the ``Response`` (instructions and tools echoed, as the API does), streamed as Responses API events.
``ScriptedChatModel`` behaves like ``OpenAIChatCompletionsModel``: a ``generation_span`` with the chat
messages sent, the reply message, the model settings and the usage. ``UntracedModel`` replies as
``ScriptedResponsesModel`` and traces nothing, as a ``Model`` of one's own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import Model, ModelResponse, ModelSettings, ModelTracing, Usage
from agents.models.chatcmpl_converter import Converter as ChatConverter
from agents.models.openai_responses import Converter as ResponsesConverter
from agents.tracing import generation_span, response_span
from agents.usage import model_usage_to_span_usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails


@dataclass
class Step:
    """One scripted reply: text and/or tool calls ``(name, arguments)``, and its token counts."""

    text: str = ""
    calls: Sequence[tuple[str, dict[str, Any]]] = ()
    input_tokens: int = 10
    output_tokens: int = 5
    #: The part of ``input_tokens`` read from the provider's prompt cache (OpenAI counts it in the input).
    cached_tokens: int = 0
    #: Seconds to wait before answering (parallel calls then overlap).
    delay: float = 0.0
    #: Raised instead of answering.
    error: Exception | None = None


def say(text: str, input_tokens: int = 10, output_tokens: int = 5, delay: float = 0.0) -> Step:
    return Step(text=text, input_tokens=input_tokens, output_tokens=output_tokens, delay=delay)


def call(*calls: tuple[str, dict[str, Any]], input_tokens: int = 10, output_tokens: int = 5) -> Step:
    return Step(calls=calls, input_tokens=input_tokens, output_tokens=output_tokens)


_call_ids = itertools.count(1)


@dataclass
class _Script:
    steps: list[Step]
    model: str
    #: What each call received: (system instructions, input items, tool names).
    received: list[tuple[str | None, Any, list[str]]] = field(default_factory=list)

    def next(self, instructions: str | None, items: Any, tools: list[str]) -> Step:
        self.received.append((instructions, items, tools))
        if not self.steps:
            raise AssertionError(f"{self.model}: no scripted reply left")
        return self.steps.pop(0)


def _output(step: Step) -> list[Any]:
    output: list[Any] = []
    if step.text:
        output.append(ResponseOutputMessage(
            id=f"msg_{next(_call_ids)}", type="message", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text=step.text, annotations=[])]))
    for name, arguments in step.calls:
        call_id = f"call_{next(_call_ids)}"
        output.append(ResponseFunctionToolCall(id=f"fc_{call_id}", call_id=call_id, type="function_call",
                                               name=name, arguments=json.dumps(arguments),
                                               status="completed"))
    return output


def _tool_names(tools: Sequence[Any], handoffs: Sequence[Any]) -> list[str]:
    return [getattr(t, "name", type(t).__name__) for t in tools] + [h.tool_name for h in handoffs]


class _ScriptedModel(Model):
    def __init__(self, steps: Sequence[Step], model: str = "scripted-model") -> None:
        self.script = _Script(list(steps), model)

    @property
    def received(self) -> list[tuple[str | None, Any, list[str]]]:
        return self.script.received

    async def _step(self, system_instructions: str | None, input: Any, tools: list[Any],
                    handoffs: list[Any]) -> Step:
        step = self.script.next(system_instructions, input, _tool_names(tools, handoffs))
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.error is not None:
            raise step.error
        return step


def _usage(step: Step) -> Usage:
    return Usage(requests=1, input_tokens=step.input_tokens, output_tokens=step.output_tokens,
                 total_tokens=step.input_tokens + step.output_tokens,
                 input_tokens_details=InputTokensDetails(cached_tokens=step.cached_tokens,
                                                         cache_write_tokens=0))


class ScriptedResponsesModel(_ScriptedModel):
    """Replies as the Responses API would, traced as ``OpenAIResponsesModel`` traces its calls."""

    def _response(self, step: Step, system_instructions: str | None, model_settings: ModelSettings,
                  tools: list[Any], handoffs: list[Any]) -> Response:
        converted = ResponsesConverter.convert_tools(tools, handoffs)
        return Response(
            id=f"resp_{next(_call_ids)}", object="response", created_at=0, model=self.script.model,
            output=_output(step), instructions=system_instructions, tools=converted.tools,  # type: ignore[arg-type]
            tool_choice="auto", parallel_tool_calls=bool(model_settings.parallel_tool_calls),
            temperature=model_settings.temperature, top_p=model_settings.top_p, status="completed",
            usage=ResponseUsage(input_tokens=step.input_tokens, output_tokens=step.output_tokens,
                                total_tokens=step.input_tokens + step.output_tokens,
                                input_tokens_details=InputTokensDetails(cached_tokens=step.cached_tokens,
                                                                        cache_write_tokens=0),
                                output_tokens_details=OutputTokensDetails(reasoning_tokens=0)),
        )

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: ModelSettings,
                           tools: list[Any], output_schema: Any, handoffs: list[Any], tracing: ModelTracing,
                           **kwargs: Any) -> ModelResponse:
        with response_span(disabled=tracing.is_disabled()) as span:
            step = await self._step(system_instructions, input, tools, handoffs)
            response = self._response(step, system_instructions, model_settings, tools, handoffs)
            span.span_data.usage = model_usage_to_span_usage(_usage(step))  # as OpenAI's models do
            if tracing.include_data():
                span.span_data.response = response
                span.span_data.input = input
        return ModelResponse(output=response.output, usage=_usage(step), response_id=response.id)

    async def stream_response(self, system_instructions: str | None, input: Any,
                              model_settings: ModelSettings, tools: list[Any], output_schema: Any,
                              handoffs: list[Any], tracing: ModelTracing, **kwargs: Any,
                              ) -> AsyncIterator[Any]:
        with response_span(disabled=tracing.is_disabled()) as span:
            step = await self._step(system_instructions, input, tools, handoffs)
            response = self._response(step, system_instructions, model_settings, tools, handoffs)
            number = itertools.count()
            yield ResponseCreatedEvent(type="response.created", sequence_number=next(number),
                                       response=response.model_copy(update={"output": [], "usage": None}))
            for index, item in enumerate(response.output):
                yield ResponseOutputItemAddedEvent(type="response.output_item.added", item=item,
                                                   output_index=index, sequence_number=next(number))
                if isinstance(item, ResponseOutputMessage):
                    for word in step.text.split(" "):  # one delta per word: a consumer may stop half way
                        await asyncio.sleep(0)
                        yield ResponseTextDeltaEvent(type="response.output_text.delta", delta=word + " ",
                                                     item_id=item.id, output_index=index, content_index=0,
                                                     sequence_number=next(number), logprobs=[])
                yield ResponseOutputItemDoneEvent(type="response.output_item.done", item=item,
                                                  output_index=index, sequence_number=next(number))
            span.span_data.usage = model_usage_to_span_usage(_usage(step))  # as OpenAI's models do
            if tracing.include_data():
                span.span_data.response = response
                span.span_data.input = input
            yield ResponseCompletedEvent(type="response.completed", response=response,
                                         sequence_number=next(number))


class ScriptedChatModel(_ScriptedModel):
    """Replies as Chat Completions would, traced as ``OpenAIChatCompletionsModel`` traces its calls."""

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: ModelSettings,
                           tools: list[Any], output_schema: Any, handoffs: list[Any], tracing: ModelTracing,
                           **kwargs: Any) -> ModelResponse:
        config = model_settings.to_json_dict()
        with generation_span(model=self.script.model, model_config=config,
                             disabled=tracing.is_disabled()) as span:
            messages = ChatConverter.items_to_messages(input)
            if system_instructions:
                messages.insert(0, {"role": "system", "content": system_instructions})
            step = await self._step(system_instructions, input, tools, handoffs)
            output = _output(step)
            reply: dict[str, Any] = {"role": "assistant", "content": step.text or None}
            calls = [o for o in output if isinstance(o, ResponseFunctionToolCall)]
            if calls:
                reply["tool_calls"] = [{"id": c.call_id, "type": "function",
                                        "function": {"name": c.name, "arguments": c.arguments}}
                                       for c in calls]
            span.span_data.usage = model_usage_to_span_usage(_usage(step))  # as OpenAI's models do
            if tracing.include_data():
                span.span_data.input = messages
                span.span_data.output = [reply]
        return ModelResponse(output=output, usage=_usage(step), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the chat-completions fake does not stream")



class UntracedModel(ScriptedResponsesModel):
    """A ``Model`` of one's own, as users write them: the replies of ``ScriptedResponsesModel`` and no span of
    its own (the Runner still gets each ``ModelResponse``, usage included; a stream ends with the completed
    ``Response``)."""

    @property
    def model(self) -> str:
        """The model's name, where OpenAI's models keep theirs."""
        return self.script.model

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: ModelSettings,
                           tools: list[Any], output_schema: Any, handoffs: list[Any], tracing: ModelTracing,
                           **kwargs: Any) -> ModelResponse:
        step = await self._step(system_instructions, input, tools, handoffs)
        return ModelResponse(output=_output(step), usage=_usage(step), response_id=None)

    async def stream_response(self, system_instructions: str | None, input: Any,
                              model_settings: ModelSettings, tools: list[Any], output_schema: Any,
                              handoffs: list[Any], tracing: ModelTracing, **kwargs: Any,
                              ) -> AsyncIterator[Any]:
        step = await self._step(system_instructions, input, tools, handoffs)
        response = self._response(step, system_instructions, model_settings, tools, handoffs)
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)
