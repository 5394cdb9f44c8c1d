"""OpenLLMetry / Traceloop (``traceloop.*``): ``traceloop.span.kind`` (``workflow`` / ``agent`` actors,
``tool``, a ``task`` that is a LangGraph node), its older ``llm.request.type`` for model calls and embeddings,
the ``handoff`` operation of its OpenAI Agents spans (the target often unknown when the span starts, then not
recorded), names in ``traceloop.entity.name``, content in ``traceloop.entity.input`` / ``output``, and
LangGraph's run metadata as association properties. Its graph run is an ``invoke_agent`` span it also calls
a ``workflow``: a workflow. Its LangChain callback tracer's spans are set aside when orchestrace's LangGraph
integration recorded the same runs.
"""

from __future__ import annotations

from typing import Final

import orchestrace_semconv as sc

from ...spans import Span
from .base import AGENT, EMBEDDING, HANDOFF, NODE, WORKFLOW, Kind, Verdict, Vocabulary

TL_SPAN_KIND: Final = "traceloop.span.kind"
TL_ENTITY_NAME: Final = "traceloop.entity.name"
TL_INPUT: Final = "traceloop.entity.input"
TL_OUTPUT: Final = "traceloop.entity.output"
TL_LANGGRAPH_NODE: Final = "traceloop.association.properties.langgraph_node"
TL_LANGGRAPH_STEP: Final = "traceloop.association.properties.langgraph_step"
TL_LANGGRAPH_TRIGGERS: Final = "traceloop.association.properties.langgraph_triggers"
TL_REQUEST_TYPE: Final = "llm.request.type"
OP_HANDOFF: Final = "handoff"
LANGCHAIN_SCOPE: Final = "opentelemetry.instrumentation.langchain"

_OPERATIONS: dict[str, Verdict] = {OP_HANDOFF: (Kind.CREATE_AGENT, HANDOFF)}
_KINDS: dict[str, Verdict] = {
    "workflow": (Kind.ACTOR, WORKFLOW),
    "agent": (Kind.ACTOR, AGENT),
    "tool": (Kind.TOOL, ""),
}
_REQUEST_TYPES: dict[str, Verdict] = {
    "chat": (Kind.MODEL, ""),
    "completion": (Kind.MODEL, ""),
    # No generation, as the GenAI ``embeddings`` operation.
    "embedding": (Kind.OTHER, EMBEDDING),
    "rerank": (Kind.OTHER, EMBEDDING),
}


def _kind(span: Span, parent: Span | None) -> Verdict | None:
    """A ``task`` that is a LangGraph node (its tables said nothing), else what its older request type
    says."""
    attrs = span.attributes
    node = attrs.get(TL_LANGGRAPH_NODE)
    if attrs.get(TL_SPAN_KIND) == "task" and langgraph_node(attrs.get(TL_ENTITY_NAME), node, parent):
        return Kind.ACTOR, NODE
    request_type = attrs.get(TL_REQUEST_TYPE)
    return _REQUEST_TYPES.get(request_type) if isinstance(request_type, str) else None


def langgraph_node(name: object, node: object, parent: Span | None) -> bool:
    """Whether a span named ``name`` that an instrumentation files under LangGraph node ``node`` is that
    node's own span: the runnables inside it inherit the node name in their metadata but have names of their
    own. A span's own name is its ``traceloop.entity.name`` when it has one (where OpenLLMetry names it)."""
    return node is not None and name == node and (
        parent is None or parent.attributes.get(TL_ENTITY_NAME, parent.name) != name
    )


VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="openllmetry",
    kind_tables=((sc.GEN_AI_OPERATION_NAME, _OPERATIONS), (TL_SPAN_KIND, _KINDS)),
    kind=_kind,
    kind_keys=(TL_SPAN_KIND, TL_REQUEST_TYPE),
    graph_run=((TL_SPAN_KIND, "workflow"),),
    agent_names=(TL_ENTITY_NAME,),
    workflow_names=(TL_ENTITY_NAME,),
    node_names=(TL_ENTITY_NAME,),
    tool_names=(TL_ENTITY_NAME,),
    input_content=(TL_INPUT,),
    output_content=(TL_OUTPUT,),
    retold_under={"orchestrace_langgraph": frozenset({LANGCHAIN_SCOPE})},
    langgraph_step=lambda attrs: attrs.get(TL_LANGGRAPH_STEP),
    langgraph_triggers=lambda attrs: attrs.get(TL_LANGGRAPH_TRIGGERS),
)
