"""OpenAI Chat Completions replies: ``ChatCompletion`` (object or dict, also LiteLLM's ``ModelResponse`` and
every OpenAI-compatible server's JSON) and streamed ``ChatCompletionChunk``s; legacy text completions too.

OpenAI-compatible engines add what a trainer needs beyond text: vLLM (``return_token_ids``) puts
``prompt_token_ids`` on the response (on the first chunk when streaming) and ``token_ids`` on each choice
(each chunk's new ones when streaming); ``logprobs.content[i].logprob`` are the sampled tokens' logprobs.
"""

from __future__ import annotations

from typing import Any

from orchestrace.fields import field_of, int_list
from orchestrace.replies.reply import Reply, ToolCall, finish_reason, text_of
from orchestrace.replies.stream import ReplyStream
from orchestrace.usage import extract_usage


def _first(choices: Any) -> Any:
    return choices[0] if isinstance(choices, list | tuple) and choices else None


def _logprobs(choice: Any) -> list[float] | None:
    logprobs = field_of(choice, "logprobs")
    if logprobs is None:
        return None
    content = field_of(logprobs, "content")
    if isinstance(content, list | tuple):  # chat: one entry per sampled token
        values = [field_of(entry, "logprob") for entry in content]
    else:  # legacy completions: parallel lists
        values = list(field_of(logprobs, "token_logprobs") or ())
    return [float(v) for v in values] if all(isinstance(v, int | float) for v in values) else None


def _meta(reply: Reply, value: Any) -> None:
    """Fields of the response (or chunk) itself: id, model, usage, prompt token ids."""
    response_id = field_of(value, "id")
    if isinstance(response_id, str) and response_id:
        reply.response_id = response_id
    model = field_of(value, "model")
    if isinstance(model, str) and model:
        reply.response_model = model
    reply.usage = extract_usage(value) or reply.usage
    prompt_ids = int_list(field_of(value, "prompt_token_ids"))
    if prompt_ids is not None:
        reply.prompt_token_ids = prompt_ids


def from_chat_completion(result: Any) -> Reply:
    """A whole Chat Completions response (its first choice)."""
    reply = Reply()
    _meta(reply, result)
    choice = _first(field_of(result, "choices"))
    if choice is None:
        return reply
    message = field_of(choice, "message")
    if message is None:  # legacy completions: the choice holds the text
        reply.text = str(field_of(choice, "text") or "")
    else:
        reply.text, reasoning = text_of(field_of(message, "content"))
        reply.reasoning = reasoning or _reasoning(message)
        for call in field_of(message, "tool_calls") or ():
            function = field_of(call, "function")
            reply.tool_calls.append(ToolCall(field_of(call, "id"), str(field_of(function, "name") or ""),
                                             field_of(function, "arguments")))
        legacy = field_of(message, "function_call")
        if legacy is not None:
            reply.tool_calls.append(ToolCall(None, str(field_of(legacy, "name") or ""),
                                             field_of(legacy, "arguments")))
    reply.finish_reason = finish_reason(field_of(choice, "finish_reason"))
    reply.completion_token_ids = int_list(field_of(choice, "token_ids"))
    reply.completion_logprobs = _logprobs(choice)
    return reply


def _reasoning(message: Any) -> str:
    """Reasoning text beside the answer (vLLM, DeepSeek: ``reasoning_content``; others ``reasoning``)."""
    for key in ("reasoning_content", "reasoning"):
        value = field_of(message, key)
        if isinstance(value, str):
            return value
    return ""


def add_chunk(stream: ReplyStream, chunk: Any) -> None:
    """One ``ChatCompletionChunk``; the last one usually carries only ``usage``."""
    _meta(stream.reply, chunk)
    choice = _first(field_of(chunk, "choices"))
    if choice is None:
        return
    delta = field_of(choice, "delta")
    if delta is None:  # legacy completions stream
        stream.add_text(field_of(choice, "text"))
    else:
        text, reasoning = text_of(field_of(delta, "content"))
        stream.add_text(text)
        stream.add_reasoning(reasoning or _reasoning(delta))
        for call in field_of(delta, "tool_calls") or ():
            function = field_of(call, "function")
            stream.add_call(field_of(call, "index", 0), field_of(call, "id"), field_of(function, "name"),
                            field_of(function, "arguments"))
    reason = finish_reason(field_of(choice, "finish_reason"))
    if reason is not None:
        stream.reply.finish_reason = reason
    stream.add_token_ids(int_list(field_of(choice, "token_ids")))
    stream.add_logprobs(_logprobs(choice))
