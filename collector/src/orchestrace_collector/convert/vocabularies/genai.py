"""The OTel GenAI semantic conventions, the base every other vocabulary is read into (``as_genai``): their
operations, names, content, usage and messages, the names they deprecated that older instrumentations still
write, the OTel messaging conventions (a runtime's plumbing), and the GenAI-named handoff attribute some
libraries add (OpenLLMetry's OpenAI Agents spans, Sentry).

Kinds: ``invoke_workflow`` / ``handle_conversation_turn`` / ``invoke_agent`` are actors, ``execute_tool`` a
tool, ``chat`` / ``text_completion`` / ``generate_content`` a model call (turn), ``create_agent`` an explicit
spawn of ``gen_ai.agent.name``, ``plan`` a phase of its agent (no actor), ``embeddings`` and ``retrieval``
ordinary spans (a model used without generating: no turn, though they name a model and report usage). Then,
after every other library: a span naming its handoff's target in ``gen_ai.handoff.to_agent`` is a handoff;
any other span naming a model (``gen_ai.request.model`` / ``gen_ai.response.model``) and reporting token usage
(an instrumentation that sets no operation name: ADK's ``call_llm``, older operation names) is *model-like*:
a model call, unless a model call runs inside it (``forest`` decides); any other span naming a tool
(``gen_ai.tool.name``: older PydanticAI's ``running tool``) is a tool.
"""

from __future__ import annotations

import json
from typing import Final

import orchestrace_semconv as sc
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _g
from opentelemetry.semconv._incubating.attributes import messaging_attributes as _m

from ...spans import Span
from .base import (
    AGENT,
    EMBEDDING,
    HANDOFF,
    MODEL_LIKE,
    WORKFLOW,
    ContentParts,
    FlatMessages,
    Kind,
    Verdict,
    Vocabulary,
)

#: Not in the conventions; OpenLLMetry's OpenAI Agents spans, Sentry and others write it.
GEN_AI_HANDOFF_TO_AGENT: Final = "gen_ai.handoff.to_agent"

# --- deprecated names (older OpenLLMetry releases, Strands)
GEN_AI_USAGE_PROMPT_TOKENS: Final = _g.GEN_AI_USAGE_PROMPT_TOKENS
GEN_AI_USAGE_COMPLETION_TOKENS: Final = _g.GEN_AI_USAGE_COMPLETION_TOKENS
#: Flattened messages: ``<prefix>.<i>.role`` / ``.content``.
GEN_AI_PROMPT_PREFIX: Final = _g.GEN_AI_PROMPT + "."
GEN_AI_COMPLETION_PREFIX: Final = _g.GEN_AI_COMPLETION + "."
#: ``<message>.tool_call_id``; tool calls ``<message>.tool_calls.<j>.id`` / ``.name`` / ``.arguments``.
GEN_AI_TOOL_CALL_ID_SUFFIX: Final = ".tool_call_id"
GEN_AI_TOOL_CALLS_SUFFIX: Final = ".tool_calls."

#: Messages recorded on a model call's span events rather than its attributes: the conventions' details
#: event (``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` on it), and
#: the older prompt and completion events (a JSON message list in ``gen_ai.prompt`` / ``gen_ai.completion``).
GEN_AI_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
GEN_AI_PROMPT_EVENT: Final = "gen_ai.content.prompt"
GEN_AI_COMPLETION_EVENT: Final = "gen_ai.content.completion"
#: The reply in the older one-event-per-message form (``gen_ai.<role>.message`` events before it).
GEN_AI_CHOICE_EVENT: Final = "gen_ai.choice"
GEN_AI_PROMPT: Final = _g.GEN_AI_PROMPT
GEN_AI_COMPLETION: Final = _g.GEN_AI_COMPLETION
#: The older events of one message each: event -> the message's role.
_MESSAGE_EVENTS = {f"gen_ai.{role}.message": role for role in ("system", "user", "assistant", "tool")}
_EVENT_CONTENT = "content"
_CHOICE_MESSAGE = "message"
_TOOL_MESSAGE_EVENT = "gen_ai.tool.message"
#: Span event -> (its attribute, the span attribute it stands for).
_EVENT_MESSAGES = {
    GEN_AI_DETAILS_EVENT: [(key, key) for key in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
                                                   sc.GEN_AI_SYSTEM_INSTRUCTIONS)],
    GEN_AI_PROMPT_EVENT: [(GEN_AI_PROMPT, sc.GEN_AI_INPUT_MESSAGES)],
    GEN_AI_COMPLETION_EVENT: [(GEN_AI_COMPLETION, sc.GEN_AI_OUTPUT_MESSAGES)],
}

#: Operations that call a model without generating (an embedding, a retrieval): no turn, whatever usage
#: they report.
NON_GENERATIVE_OPERATIONS: Final = frozenset({
    _g.GenAiOperationNameValues.EMBEDDINGS.value,
    _g.GenAiOperationNameValues.RETRIEVAL.value,
})
_KINDS: dict[str, Verdict] = {
    sc.OP_INVOKE_WORKFLOW: (Kind.ACTOR, WORKFLOW),
    sc.OP_HANDLE_CONVERSATION_TURN: (Kind.ACTOR, WORKFLOW),  # a runner's run, in the latest conventions
    # A phase of its agent, no actor: the model call it holds is that agent's turn.
    sc.OP_PLAN: (Kind.OTHER, ""),
    sc.OP_INVOKE_AGENT: (Kind.ACTOR, AGENT),
    sc.OP_EXECUTE_TOOL: (Kind.TOOL, ""),
    sc.OP_CREATE_AGENT: (Kind.CREATE_AGENT, ""),
    **{op: (Kind.MODEL, "") for op in sc.MODEL_CALL_OPERATIONS},
    **{op: (Kind.OTHER, EMBEDDING) for op in NON_GENERATIVE_OPERATIONS},
}

INPUT_TOKENS: Final = (sc.GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_USAGE_PROMPT_TOKENS)
OUTPUT_TOKENS: Final = (sc.GEN_AI_USAGE_OUTPUT_TOKENS, GEN_AI_USAGE_COMPLETION_TOKENS)
_USAGE_KEYS = (*INPUT_TOKENS, *OUTPUT_TOKENS)


def _fallback_kind(span: Span, parent: Span | None) -> Verdict | None:
    attrs = span.attributes
    if isinstance(attrs.get(GEN_AI_HANDOFF_TO_AGENT), str):
        return Kind.CREATE_AGENT, HANDOFF
    if (attrs.get(sc.GEN_AI_REQUEST_MODEL) or attrs.get(sc.GEN_AI_RESPONSE_MODEL)) and any(
        key in attrs for key in _USAGE_KEYS
    ):
        return Kind.OTHER, MODEL_LIKE
    if attrs.get(sc.GEN_AI_TOOL_NAME):
        return Kind.TOOL, ""
    return None


def _model_call(span: Span, found: dict[str, object], content_parts: ContentParts) -> None:
    """Messages on span events: the details event, the older prompt and completion events, and events of one
    message each (``gen_ai.<role>.message`` with its ``content``, then ``gen_ai.choice`` with the reply's
    ``message``) as a JSON list of ``{"role", "content"}`` messages in event order."""
    if not span.events:
        return
    sent: list[dict[str, object]] = []
    chosen: list[dict[str, object]] = []
    for event in span.events:
        for key, as_key in _EVENT_MESSAGES.get(event.name, ()):
            value = event.attributes.get(key)
            if value is not None:
                found.setdefault(as_key, value)
        role = _MESSAGE_EVENTS.get(event.name)
        if role is not None and event.attributes.get(_EVENT_CONTENT) is not None:
            sent.append({"role": role, "content": content_parts(event.attributes[_EVENT_CONTENT])})
        elif event.name == GEN_AI_CHOICE_EVENT and event.attributes.get(_CHOICE_MESSAGE) is not None:
            reply = content_parts(event.attributes[_CHOICE_MESSAGE])
            chosen.append({"role": "assistant", "content": reply})
    if sent:
        found.setdefault(sc.GEN_AI_INPUT_MESSAGES, json_text(sent))
    if chosen:
        found.setdefault(sc.GEN_AI_OUTPUT_MESSAGES, json_text(chosen))


def _tool_call(span: Span, found: dict[str, object], content_parts: ContentParts) -> None:
    """The arguments and result in the older events of one message each (``gen_ai.tool.message`` with the
    arguments as ``content``, then ``gen_ai.choice`` with the result as ``message``)."""
    for event in span.events:
        if event.name == _TOOL_MESSAGE_EVENT and event.attributes.get(_EVENT_CONTENT) is not None:
            found.setdefault(sc.GEN_AI_TOOL_CALL_ARGUMENTS, event.attributes[_EVENT_CONTENT])
        elif event.name == GEN_AI_CHOICE_EVENT and event.attributes.get(_CHOICE_MESSAGE) is not None:
            found.setdefault(sc.GEN_AI_TOOL_CALL_RESULT, event.attributes[_CHOICE_MESSAGE])


def json_text(messages: list[dict[str, object]]) -> str:
    """Messages as the JSON text of a GenAI messages attribute."""
    # Attribute values may be of any type an exporter sends (bytes among them): written as their text.
    return json.dumps(messages, default=str)


#: A span with any of these is a messaging span (OTel's messaging conventions; ``messaging.operation`` is the
#: older name AutoGen's runtime writes): named after a queue or topic, often one made for the run.
MESSAGING_KEYS: Final = (_m.MESSAGING_SYSTEM, _m.MESSAGING_OPERATION_TYPE, _m.MESSAGING_OPERATION)

VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="genai",
    kind_tables=((sc.GEN_AI_OPERATION_NAME, _KINDS),),
    fallback_kind=_fallback_kind,
    kind_keys=(
        GEN_AI_HANDOFF_TO_AGENT, sc.GEN_AI_REQUEST_MODEL, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_TOOL_NAME,
    ),
    handoff_to=(GEN_AI_HANDOFF_TO_AGENT,),
    agent_names=(sc.GEN_AI_AGENT_NAME,),
    workflow_names=(sc.GEN_AI_WORKFLOW_NAME, sc.GEN_AI_AGENT_NAME),
    tool_names=(sc.GEN_AI_TOOL_NAME,),
    model_names=(sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL),
    provider_names=(sc.GEN_AI_PROVIDER_NAME, sc.GEN_AI_SYSTEM),
    agent_ids=(sc.GEN_AI_AGENT_ID,),
    operation_prefixes=tuple(f"{op} " for op in _KINDS),
    input_content=(sc.GEN_AI_TOOL_CALL_ARGUMENTS, sc.GEN_AI_INPUT_MESSAGES),
    output_content=(sc.GEN_AI_TOOL_CALL_RESULT, sc.GEN_AI_OUTPUT_MESSAGES),
    input_tokens=INPUT_TOKENS,
    output_tokens=OUTPUT_TOKENS,
    # Both versions' names, and the older ones OpenLLMetry and Strands write. The input tokens are taken as
    # they say them: the whole prompt, as GenAI counts it.
    cache_read_tokens=(sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "gen_ai.usage.cache_read_input_tokens"),
    cache_write_tokens=(
        *sc.CACHE_WRITE_INPUT_TOKENS_NAMES, "gen_ai.usage.cache_creation_input_tokens",
        "gen_ai.usage.cache_write_input_tokens",
    ),
    flat_messages=FlatMessages(
        GEN_AI_PROMPT_PREFIX, GEN_AI_COMPLETION_PREFIX, ".role", ".content", GEN_AI_TOOL_CALL_ID_SUFFIX, None,
        GEN_AI_TOOL_CALLS_SUFFIX, ".id", ".name", ".arguments", ".finish_reason",
    ),
    model_call=_model_call,
    tool_call=_tool_call,
    plumbing_keys=MESSAGING_KEYS,
)
