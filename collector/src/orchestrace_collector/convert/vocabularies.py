"""Attribute names of other instrumentations, read (never written) so that their spans convert too.

OTel GenAI names come from ``orchestrace_semconv``; these belong to vocabularies the collector does not depend
on: OpenInference (``openinference.*``, ``llm.*``, ``input.value``) and OpenLLMetry / Traceloop
(``traceloop.*``), plus GenAI names the conventions deprecated that older instrumentations still write.
"""

from __future__ import annotations

from typing import Final

import orchestrace_semconv as _sc
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _g
from opentelemetry.semconv._incubating.attributes import messaging_attributes as _m

#: Instrumentation scopes whose spans describe what spans of another scope already describe: when an episode
#: holds spans of the key (orchestrace's LangGraph integration), the spans of these LangChain callback tracers
#: are the same graph runs, nodes, model calls and tools told a second time, and are set aside.
DESCRIBED_AGAIN: Final = {
    "orchestrace_langgraph": frozenset({
        "openinference.instrumentation.langchain",
        "opentelemetry.instrumentation.langchain",
    }),
}

# --- OpenInference
OI_SPAN_KIND: Final = _sc.OPENINFERENCE_SPAN_KIND
OI_METADATA: Final = "metadata"  # JSON; LangGraph runs put ``langgraph_node`` in it
OI_TOOL_NAME: Final = "tool.name"
OI_AGENT_NAME: Final = "agent.name"
OI_GRAPH_NODE_NAME: Final = "graph.node.name"
OI_GRAPH_NODE_ID: Final = "graph.node.id"
OI_MODEL_NAME: Final = "llm.model_name"
OI_PROVIDER: Final = "llm.provider"
OI_SYSTEM: Final = "llm.system"
OI_INPUT: Final = _sc.INPUT_VALUE
OI_OUTPUT: Final = _sc.OUTPUT_VALUE
OI_PROMPT_TOKENS: Final = "llm.token_count.prompt"
OI_COMPLETION_TOKENS: Final = "llm.token_count.completion"
#: Flattened messages: ``<prefix><i>.message.role`` / ``.message.content``.
OI_INPUT_MESSAGES: Final = "llm.input_messages."
OI_OUTPUT_MESSAGES: Final = "llm.output_messages."
OI_ROLE: Final = ".message.role"
OI_CONTENT: Final = ".message.content"
OI_NAME: Final = ".message.name"
OI_TOOL_CALL_ID: Final = ".message.tool_call_id"
#: Tool calls of a flattened message: ``<message><OI_TOOL_CALLS><j>`` then the id, name or arguments suffix.
OI_TOOL_CALLS: Final = ".message.tool_calls."
OI_CALL_ID: Final = ".tool_call.id"
OI_CALL_NAME: Final = ".tool_call.function.name"
OI_CALL_ARGS: Final = ".tool_call.function.arguments"

#: OpenInference's OpenAI Agents instrumentation records a handoff as a ``TOOL`` span named after its target.
OI_HANDOFF_PREFIX: Final = "handoff to "
#: OpenInference's smolagents instrumentation names an agent's span ``<agent name>.run`` and records the name
#: nowhere else; its agent spans carry ``smolagents.max_steps``.
OI_SMOLAGENTS_RUN_SUFFIX: Final = ".run"
OI_SMOLAGENTS_KEY: Final = "smolagents.max_steps"

# --- OpenLLMetry / Traceloop
TL_SPAN_KIND: Final = "traceloop.span.kind"
TL_ENTITY_NAME: Final = "traceloop.entity.name"
TL_INPUT: Final = "traceloop.entity.input"
TL_OUTPUT: Final = "traceloop.entity.output"
TL_LANGGRAPH_NODE: Final = "traceloop.association.properties.langgraph_node"
TL_LANGGRAPH_STEP: Final = "traceloop.association.properties.langgraph_step"
TL_LANGGRAPH_TRIGGERS: Final = "traceloop.association.properties.langgraph_triggers"

# --- LangGraph's run metadata, as both record it (OpenInference in its ``metadata`` JSON): a task started
#     by a ``Send`` packet has this trigger (LangGraph's ``PUSH``), whatever node it runs.
LANGGRAPH_SEND_TRIGGER: Final = "__pregel_push"
TL_REQUEST_TYPE: Final = "llm.request.type"

# --- Logfire: exports a zero-length copy of each span when it starts (to show it in progress), with all its
#     attributes and this one added; the span itself follows when it ends.
LOGFIRE_SPAN_TYPE: Final = "logfire.span_type"
LOGFIRE_PENDING_SPAN: Final = "pending_span"

# --- Langfuse (its OTel-based SDKs): an observation's type, model and usage (a JSON object, ``input`` and
#     ``output`` among its counts); agents and tools are named by their span's name.
LF_OBSERVATION_TYPE: Final = "langfuse.observation.type"
LF_MODEL_NAME: Final = "langfuse.observation.model.name"
LF_USAGE_DETAILS: Final = "langfuse.observation.usage_details"
LF_INPUT: Final = "langfuse.observation.input"
LF_OUTPUT: Final = "langfuse.observation.output"

# --- Vercel's AI SDK (JavaScript): ``ai.*`` spans, named after ``ai.operationId``; its provider calls
#     (``ai.generateText.doGenerate``, ``ai.streamText.doStream``, ...) also carry the GenAI model and usage.
AI_OPERATION_ID: Final = "ai.operationId"
AI_FUNCTION_ID: Final = "ai.telemetry.functionId"
#: Its calls that run a model in a loop with tools: an agent when the caller names it (``functionId``).
AI_AGENT_OPERATIONS: Final = frozenset({"ai.generateText", "ai.streamText"})
AI_TOOL_CALL: Final = "ai.toolCall"
AI_TOOL_CALL_NAME: Final = "ai.toolCall.name"
#: A tool call's attribute -> the GenAI attribute it stands for.
AI_TOOL_CALL_AS_GENAI: Final = (
    ("ai.toolCall.id", _sc.GEN_AI_TOOL_CALL_ID),
    ("ai.toolCall.args", _sc.GEN_AI_TOOL_CALL_ARGUMENTS),
    ("ai.toolCall.result", _sc.GEN_AI_TOOL_CALL_RESULT),
)
#: A provider call's prompt (a JSON message list), reply text and tool calls (older: ``ai.result.*``).
AI_PROMPT_MESSAGES: Final = "ai.prompt.messages"
AI_RESPONSE_TEXT: Final = ("ai.response.text", "ai.result.text")
AI_RESPONSE_TOOL_CALLS: Final = ("ai.response.toolCalls", "ai.result.toolCalls")

# --- handoffs: not in the GenAI conventions; OpenLLMetry's OpenAI Agents spans, Sentry and others write these
#     (OpenLLMetry's operation ``handoff`` with the agent handing off, its target often unknown when the span
#     starts and then not recorded)
GEN_AI_HANDOFF_TO_AGENT: Final = "gen_ai.handoff.to_agent"
OP_HANDOFF: Final = "handoff"
#: Tools that hand control to another agent (the target in their arguments, when captured): Google ADK's
#: ``transfer_to_agent``, Strands' swarm ``handoff_to_agent``.
HANDOFF_TOOLS: Final = {"transfer_to_agent": "agent_name", "handoff_to_agent": "agent_name"}

# --- deprecated GenAI names (older OpenLLMetry releases)
GEN_AI_USAGE_PROMPT_TOKENS: Final = _g.GEN_AI_USAGE_PROMPT_TOKENS
GEN_AI_USAGE_COMPLETION_TOKENS: Final = _g.GEN_AI_USAGE_COMPLETION_TOKENS
#: Flattened messages: ``<prefix>.<i>.role`` / ``.content``.
GEN_AI_PROMPT_PREFIX: Final = _g.GEN_AI_PROMPT + "."
GEN_AI_COMPLETION_PREFIX: Final = _g.GEN_AI_COMPLETION + "."
#: ``<message>.tool_call_id``; tool calls ``<message>.tool_calls.<j>.id`` / ``.name`` / ``.arguments``.
GEN_AI_TOOL_CALL_ID_SUFFIX: Final = ".tool_call_id"
GEN_AI_TOOL_CALLS_SUFFIX: Final = ".tool_calls."

#: Messages recorded on a model call's span events rather than its attributes: the GenAI conventions' details
#: event (``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` on it), and
#: the older prompt and completion events (a JSON message list in ``gen_ai.prompt`` / ``gen_ai.completion``).
GEN_AI_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
GEN_AI_PROMPT_EVENT: Final = "gen_ai.content.prompt"
GEN_AI_COMPLETION_EVENT: Final = "gen_ai.content.completion"
#: The reply in the older one-event-per-message form (``gen_ai.<role>.message`` events before it).
GEN_AI_CHOICE_EVENT: Final = "gen_ai.choice"
GEN_AI_PROMPT: Final = _g.GEN_AI_PROMPT
GEN_AI_COMPLETION: Final = _g.GEN_AI_COMPLETION

#: Token counts by vocabulary: GenAI, older GenAI (OpenLLMetry), OpenInference.
INPUT_TOKENS: Final = (_sc.GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_USAGE_PROMPT_TOKENS, OI_PROMPT_TOKENS)
OUTPUT_TOKENS: Final = (_sc.GEN_AI_USAGE_OUTPUT_TOKENS, GEN_AI_USAGE_COMPLETION_TOKENS, OI_COMPLETION_TOKENS)
#: The parts of the input tokens read from the prompt cache and written to it, by vocabulary: GenAI (both
#: versions' names), the older names of OpenLLMetry and Strands, OpenInference. The input tokens are taken as
#: they say them: the whole prompt, as GenAI counts it (the LangChain instrumentors take LangChain's, whole).
CACHE_READ_INPUT_TOKENS: Final = (
    _sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
)
CACHE_WRITE_INPUT_TOKENS: Final = (
    *_sc.CACHE_WRITE_INPUT_TOKENS_NAMES, "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.cache_write_input_tokens", "llm.token_count.prompt_details.cache_write",
)

#: A span with any of these is a messaging span (OTel's messaging conventions; ``messaging.operation`` is the
#: older name AutoGen's runtime writes): named after a queue or topic, often one made for the run.
MESSAGING_KEYS: Final = (_m.MESSAGING_SYSTEM, _m.MESSAGING_OPERATION_TYPE, _m.MESSAGING_OPERATION)

#: GenAI operations that call a model without generating (an embedding, a retrieval): no turn, whatever usage
#: they report.
NON_GENERATIVE_OPERATIONS: Final = frozenset({
    _g.GenAiOperationNameValues.EMBEDDINGS.value,
    _g.GenAiOperationNameValues.RETRIEVAL.value,
})
