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

from ...spans import Attributes, Span
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

_KINDS: dict[str, Verdict] = {
    "workflow": (Kind.ACTOR, WORKFLOW),
    "agent": (Kind.ACTOR, AGENT),
    "tool": (Kind.TOOL, ""),
}


def _kind(span: Span, parent: Span | None) -> Verdict | None:
    attrs = span.attributes
    if attrs.get(sc.GEN_AI_OPERATION_NAME) == OP_HANDOFF:
        return Kind.CREATE_AGENT, HANDOFF
    tl_kind = attrs.get(TL_SPAN_KIND)
    if isinstance(tl_kind, str):
        found = _KINDS.get(tl_kind)
        if found is not None:
            return found
        node = attrs.get(TL_LANGGRAPH_NODE)
        if tl_kind == "task" and langgraph_node(attrs.get(TL_ENTITY_NAME), node, parent):
            return Kind.ACTOR, NODE
    request_type = attrs.get(TL_REQUEST_TYPE)
    if request_type in ("chat", "completion"):
        return Kind.MODEL, ""
    if request_type in ("embedding", "rerank"):
        return Kind.OTHER, EMBEDDING  # no generation, as the GenAI ``embeddings`` operation
    return None


def langgraph_node(name: object, node: object, parent: Span | None) -> bool:
    """Whether a span named ``name`` that an instrumentation files under LangGraph node ``node`` is that
    node's own span: the runnables inside it inherit the node name in their metadata but have names of their
    own. A span's own name is its ``traceloop.entity.name`` when it has one (where OpenLLMetry names it)."""
    return node is not None and name == node and (
        parent is None or parent.attributes.get(TL_ENTITY_NAME, parent.name) != name
    )


def _graph_run(attrs: Attributes) -> bool:
    return attrs.get(TL_SPAN_KIND) == "workflow"


VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="openllmetry",
    kind=_kind,
    graph_run=_graph_run,
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
