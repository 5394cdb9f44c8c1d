"""orchestrace's own attributes (``orchestrace.*``, and ``langgraph.*`` from its LangGraph integration) where
they say what a span is or names: ``orchestrace.operation`` (``node`` actor, ``aggregate``, ``tool_node``: not
an actor), a LangGraph node's span by its ``langgraph.node``, node names and ids, and the span
``ot.task(task_id)`` names after its task.
"""

from __future__ import annotations

from typing import Final

import orchestrace_semconv as sc

from ...spans import Span
from .base import NODE, TOOL_NODE, WORKFLOW, Kind, Verdict, Vocabulary
from .openllmetry import langgraph_node

_OPERATIONS: dict[str, Verdict] = {
    sc.OPERATION_NODE: (Kind.ACTOR, NODE),
    sc.OPERATION_AGGREGATE: (Kind.AGGREGATE, ""),
    sc.OPERATION_TOOL_NODE: (Kind.OTHER, TOOL_NODE),
}


def _kind(span: Span, parent: Span | None) -> Verdict | None:
    """A LangGraph node's own span, by its ``langgraph.node`` (its table said nothing)."""
    node = span.attributes.get(sc.LANGGRAPH_NODE)
    if node is not None and langgraph_node(span.name, node, parent):
        return Kind.ACTOR, NODE
    return None


def _actor_name(span: Span, sub_kind: str, bare_name: str) -> object:
    task = span.attributes.get(sc.ORCH_TASK_ID)
    if sub_kind == WORKFLOW and task is not None and bare_name == str(task):
        # ``with ot.task(task_id)`` names its span after the task, a new name per task: the run is the
        # service's root agent, one stable name (what its own model calls are filed under).
        return span.resource.get(sc.SERVICE_NAME) or sc.ROOT_AGENT
    return None


VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="orchestrace",
    kind_tables=((sc.ORCH_OPERATION, _OPERATIONS),),
    kind=_kind,
    kind_keys=(sc.LANGGRAPH_NODE,),
    node_names=(sc.ORCH_NODE_NAME, sc.LANGGRAPH_NODE),
    actor_name=_actor_name,
    agent_ids=(sc.ORCH_NODE_ID, sc.LANGGRAPH_TASK_ID),
)
