"""OpenInference (``openinference.span.kind``, ``llm.*``, ``input.value``): ``AGENT``; ``CHAIN`` that is a
root (a run) or a LangGraph node (its ``metadata`` JSON names the node); ``TOOL``, a handoff when named
``handoff to <agent>`` (its OpenAI Agents instrumentation); ``LLM``. Names in ``agent.name`` / ``tool.name`` /
``llm.model_name``, and in span names where its framework instrumentations put them (smolagents, CrewAI);
messages flattened into ``llm.input_messages.<i>...``. Its LangChain callback tracer's spans are set aside
when orchestrace's LangGraph integration recorded the same runs.
"""

from __future__ import annotations

from typing import Final

import orchestrace_semconv as sc

from ...spans import Attributes, Span
from .base import AGENT, NODE, WORKFLOW, FlatMessages, Kind, Verdict, Vocabulary, json_object
from .openllmetry import langgraph_node

OI_SPAN_KIND: Final = sc.OPENINFERENCE_SPAN_KIND
OI_METADATA: Final = "metadata"  # JSON; LangGraph runs put ``langgraph_node`` in it
OI_TOOL_NAME: Final = "tool.name"
OI_AGENT_NAME: Final = "agent.name"
OI_GRAPH_NODE_NAME: Final = "graph.node.name"
OI_GRAPH_NODE_ID: Final = "graph.node.id"
OI_MODEL_NAME: Final = "llm.model_name"
OI_PROVIDER: Final = "llm.provider"
OI_SYSTEM: Final = "llm.system"
OI_INPUT: Final = sc.INPUT_VALUE
OI_OUTPUT: Final = sc.OUTPUT_VALUE
OI_PROMPT_TOKENS: Final = "llm.token_count.prompt"
OI_COMPLETION_TOKENS: Final = "llm.token_count.completion"
OI_CACHE_READ_TOKENS: Final = "llm.token_count.prompt_details.cache_read"
OI_CACHE_WRITE_TOKENS: Final = "llm.token_count.prompt_details.cache_write"
LANGCHAIN_SCOPE: Final = "openinference.instrumentation.langchain"
#: Flattened messages: ``<prefix><i>.message.role`` / ``.message.content`` / ...; tool calls
#: ``<message>.message.tool_calls.<j>`` then the id, name or arguments suffix.
OI_INPUT_MESSAGES: Final = "llm.input_messages."
OI_OUTPUT_MESSAGES: Final = "llm.output_messages."
OI_ROLE: Final = ".message.role"
OI_CONTENT: Final = ".message.content"
OI_NAME: Final = ".message.name"
OI_TOOL_CALL_ID: Final = ".message.tool_call_id"
OI_TOOL_CALLS: Final = ".message.tool_calls."
OI_CALL_ID: Final = ".tool_call.id"
OI_CALL_NAME: Final = ".tool_call.function.name"
OI_CALL_ARGS: Final = ".tool_call.function.arguments"

#: Its OpenAI Agents instrumentation records a handoff as a ``TOOL`` span named after its target.
OI_HANDOFF_PREFIX: Final = "handoff to "
#: Its smolagents instrumentation names an agent's span ``<agent name>.run`` and records the name nowhere
#: else; its agent spans carry ``smolagents.max_steps``.
OI_SMOLAGENTS_RUN_SUFFIX: Final = ".run"
OI_SMOLAGENTS_KEY: Final = "smolagents.max_steps"

_KINDS: dict[str, Verdict] = {
    "AGENT": (Kind.ACTOR, AGENT),
    "TOOL": (Kind.TOOL, ""),
    "LLM": (Kind.MODEL, ""),
}


def _kind(span: Span, parent: Span | None) -> Verdict | None:
    """A ``CHAIN`` that is a run or a LangGraph node (its table said nothing)."""
    attrs = span.attributes
    if attrs.get(OI_SPAN_KIND) == "CHAIN":
        if parent is None:
            return Kind.ACTOR, WORKFLOW
        if langgraph_node(span.name, _metadata_value(attrs, "langgraph_node"), parent):
            return Kind.ACTOR, NODE
    return None


def _actor_name(span: Span, sub_kind: str, bare_name: str) -> object:
    if sub_kind != AGENT:
        return None
    attrs = span.attributes
    if OI_SMOLAGENTS_KEY in attrs and span.name.endswith(OI_SMOLAGENTS_RUN_SUFFIX):
        return span.name[: -len(OI_SMOLAGENTS_RUN_SUFFIX)]  # the name a manager calls it by as a tool
    # Its CrewAI names an agent's span "<role>._execute_core" and its node id the role; a node id the span's
    # name does not start with may be any id, not a name.
    node_id = attrs.get(OI_GRAPH_NODE_ID)
    if isinstance(node_id, str) and node_id and span.name.startswith(node_id):
        return node_id
    return None


def _metadata_value(attrs: Attributes, key: str) -> object:
    metadata = attrs.get(OI_METADATA)
    if not isinstance(metadata, str) or key not in metadata:
        return None
    parsed = json_object(metadata)
    return parsed.get(key) if parsed is not None else None


VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="openinference",
    kind_tables=((OI_SPAN_KIND, _KINDS),),
    kind=_kind,
    kind_keys=(OI_SPAN_KIND,),
    handoff_prefixes=(OI_HANDOFF_PREFIX,),
    # Its agent spans may be named after the agent's class ("ToolCallingAgent.run"): two agents of one class
    # are told apart by the name it records, not the span's.
    agent_names=(OI_AGENT_NAME, OI_GRAPH_NODE_NAME),
    workflow_names=(OI_AGENT_NAME,),
    actor_name=_actor_name,
    tool_names=(OI_TOOL_NAME,),
    model_names=(OI_MODEL_NAME,),
    provider_names=(OI_PROVIDER, OI_SYSTEM),
    input_content=(OI_INPUT,),
    output_content=(OI_OUTPUT,),
    input_tokens=(OI_PROMPT_TOKENS,),
    output_tokens=(OI_COMPLETION_TOKENS,),
    cache_read_tokens=(OI_CACHE_READ_TOKENS,),
    cache_write_tokens=(OI_CACHE_WRITE_TOKENS,),
    flat_messages=FlatMessages(
        OI_INPUT_MESSAGES, OI_OUTPUT_MESSAGES, OI_ROLE, OI_CONTENT, OI_TOOL_CALL_ID, OI_NAME, OI_TOOL_CALLS,
        OI_CALL_ID, OI_CALL_NAME, OI_CALL_ARGS,
    ),
    retold_under={"orchestrace_langgraph": frozenset({LANGCHAIN_SCOPE})},
    langgraph_step=lambda attrs: _metadata_value(attrs, "langgraph_step"),
    langgraph_triggers=lambda attrs: _metadata_value(attrs, "langgraph_triggers"),
)
