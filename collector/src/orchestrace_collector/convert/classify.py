"""What a span is, whichever instrumentation wrote it.

Recognised vocabularies, in order of precedence:

1. OTel GenAI semantic conventions (``gen_ai.operation.name``): ``invoke_workflow`` / ``invoke_agent`` are
   actors (an ``invoke_agent`` that Traceloop calls a ``workflow`` is OpenLLMetry's graph run: a workflow),
   ``execute_tool`` a tool, ``chat`` / ``text_completion`` / ``generate_content`` a model call (turn),
   ``create_agent`` an explicit spawn of ``gen_ai.agent.name``; ``embeddings`` and ``retrieval`` ordinary
   spans (a model used without generating: no turn, though they name a model and report usage).
2. orchestrace's own ``orchestrace.operation`` (``node`` actor, ``aggregate``, ``tool_node``: not an actor).
3. OpenLLMetry / Traceloop ``traceloop.span.kind`` (``workflow`` / ``agent`` actors, ``tool``, ``task`` that
   is a LangGraph node) and its older ``llm.request.type`` for model calls.
4. OpenInference ``openinference.span.kind`` (``AGENT``; ``CHAIN`` that is a root or a LangGraph node;
   ``TOOL``; ``LLM``).
5. Langfuse's ``langfuse.observation.type`` (``agent``; ``tool``; ``generation`` a model call; ``embedding``
   none).
6. Vercel's AI SDK: an ``ai.toolCall`` span is a tool; an ``ai.generateText`` / ``ai.streamText`` call the
   caller named (``ai.telemetry.functionId``) an agent of that name (its provider calls are model-like, 8).
7. A handoff span of another library: one naming its target in ``gen_ai.handoff.to_agent``, OpenLLMetry's
   OpenAI Agents ``handoff`` operation, OpenInference's ``TOOL`` span named ``handoff to <agent>``, or the
   call of a tool that hands over (ADK's ``transfer_to_agent``, Strands' ``handoff_to_agent``: the target
   in its arguments): like ``create_agent``, an explicit transfer of control (a handoff delegate) from the
   agent it runs in. When the span does not say to whom, the next agent to start beside the one handing off
   (or under it: ADK runs its root agent's sub-agents in the root agent's run).
8. Any other span naming a model (``gen_ai.request.model`` / ``gen_ai.response.model``) and reporting token
   usage (an instrumentation that sets no operation name: ADK's ``call_llm``, older GenAI operation names) is
   *model-like*: a model call, unless a recognised model call runs inside it (``forest`` decides); any other
   span naming a tool (``gen_ai.tool.name``: older PydanticAI's ``running tool``) is a tool.

Everything else is ``OTHER``: it yields no event itself, but span events recorded on it still count for the
actor that encloses it.
"""

from __future__ import annotations

import json
import re
from enum import IntEnum
from typing import Final

import orchestrace_semconv as sc

from ..spans import Attributes, Span
from .vocabularies import (
    AI_AGENT_OPERATIONS,
    AI_FUNCTION_ID,
    AI_OPERATION_ID,
    AI_TOOL_CALL,
    AI_TOOL_CALL_NAME,
    GEN_AI_HANDOFF_TO_AGENT,
    HANDOFF_TOOLS,
    INPUT_TOKENS,
    LANGGRAPH_SEND_TRIGGER,
    LF_MODEL_NAME,
    LF_OBSERVATION_TYPE,
    NON_GENERATIVE_OPERATIONS,
    OI_AGENT_NAME,
    OI_GRAPH_NODE_ID,
    OI_GRAPH_NODE_NAME,
    OI_HANDOFF_PREFIX,
    OI_METADATA,
    OI_MODEL_NAME,
    OI_PROVIDER,
    OI_SMOLAGENTS_KEY,
    OI_SMOLAGENTS_RUN_SUFFIX,
    OI_SPAN_KIND,
    OI_SYSTEM,
    OI_TOOL_NAME,
    OP_HANDOFF,
    OUTPUT_TOKENS,
    TL_ENTITY_NAME,
    TL_LANGGRAPH_NODE,
    TL_LANGGRAPH_STEP,
    TL_LANGGRAPH_TRIGGERS,
    TL_REQUEST_TYPE,
    TL_SPAN_KIND,
)


class Kind(IntEnum):
    OTHER = 0
    ACTOR = 1
    TOOL = 2
    MODEL = 3
    AGGREGATE = 4
    CREATE_AGENT = 5  # ``create_agent`` or a handoff: an explicit spawn of an agent (no timeline of its own)


#: The kinds as module constants, for the loops over every span: on CPython 3.11 reading ``Kind.X`` goes
#: through the enum metaclass's attribute hook on every access (~70 ns), compiled or not.
K_OTHER: Final = Kind.OTHER
K_ACTOR: Final = Kind.ACTOR
K_TOOL: Final = Kind.TOOL
K_MODEL: Final = Kind.MODEL
K_AGGREGATE: Final = Kind.AGGREGATE
K_CREATE_AGENT: Final = Kind.CREATE_AGENT


#: Actor sub-kinds.
WORKFLOW = "workflow"
AGENT = "agent"
NODE = "node"
#: Non-actor sub-kind: a graph node that only runs the tools a model asked for (its tools are its owner's).
TOOL_NODE = "tool_node"
#: ``CREATE_AGENT`` sub-kind: another library's handoff span (a delegate that hands control over).
HANDOFF = "handoff"
#: Non-actor sub-kind until ``forest`` decides: a span of no known kind that names a model and reports tokens.
MODEL_LIKE = "model_like"
#: Non-actor sub-kind: a model used without generating (an embedding, a retrieval, a rerank): no turn, its
#: tokens in ``costs.embedding_tokens``.
EMBEDDING = "embedding"

_GENAI_KINDS: dict[str, tuple[Kind, str]] = {
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
_TRACELOOP_KINDS: dict[str, tuple[Kind, str]] = {
    "workflow": (Kind.ACTOR, WORKFLOW),
    "agent": (Kind.ACTOR, AGENT),
    "tool": (Kind.TOOL, ""),
}
_OPENINFERENCE_KINDS: dict[str, tuple[Kind, str]] = {
    "AGENT": (Kind.ACTOR, AGENT),
    "TOOL": (Kind.TOOL, ""),
    "LLM": (Kind.MODEL, ""),
}
_LANGFUSE_KINDS: dict[str, tuple[Kind, str]] = {
    "agent": (Kind.ACTOR, AGENT),
    "tool": (Kind.TOOL, ""),
    "generation": (Kind.MODEL, ""),
    "embedding": (Kind.OTHER, EMBEDDING),
}
_OPERATION_PREFIXES = tuple(f"{op} " for op in _GENAI_KINDS)
USAGE_KEYS = (*INPUT_TOKENS, *OUTPUT_TOKENS)


def classify(span: Span, parent: Span | None) -> tuple[Kind, str]:
    """The kind of ``span`` and, for actors, its sub-kind (``workflow``, ``agent`` or ``node``)."""
    attrs = span.attributes
    # Only string values name kinds (attribute values may be of any type, even unhashable).
    op = attrs.get(sc.GEN_AI_OPERATION_NAME)
    if isinstance(op, str):
        found = _GENAI_KINDS.get(op)
        if found is not None:
            if found[1] == AGENT and attrs.get(TL_SPAN_KIND) == "workflow":
                return Kind.ACTOR, WORKFLOW  # OpenLLMetry's graph run, which it also calls an agent
            if found[0] is K_TOOL and _handoff_tool(attrs) is not None:
                return Kind.CREATE_AGENT, HANDOFF
            return found
        if op == OP_HANDOFF:
            return Kind.CREATE_AGENT, HANDOFF
    orch_op = attrs.get(sc.ORCH_OPERATION)
    if orch_op == sc.OPERATION_NODE:
        return Kind.ACTOR, NODE
    if orch_op == sc.OPERATION_AGGREGATE:
        return Kind.AGGREGATE, ""
    if orch_op == sc.OPERATION_TOOL_NODE:
        return Kind.OTHER, TOOL_NODE
    tl_kind = attrs.get(TL_SPAN_KIND)
    if isinstance(tl_kind, str):
        found = _TRACELOOP_KINDS.get(tl_kind)
        if found is not None:
            return found
        if tl_kind == "task" and _is_langgraph_node(
            attrs.get(TL_ENTITY_NAME), attrs.get(TL_LANGGRAPH_NODE), parent
        ):
            return Kind.ACTOR, NODE
    oi_kind = attrs.get(OI_SPAN_KIND)
    if isinstance(oi_kind, str):
        found = _OPENINFERENCE_KINDS.get(oi_kind)
        if found is not None:
            if found[0] is K_TOOL and span.name.startswith(OI_HANDOFF_PREFIX):
                return Kind.CREATE_AGENT, HANDOFF
            return found
        if oi_kind == "CHAIN":
            if parent is None:
                return Kind.ACTOR, WORKFLOW
            if _is_langgraph_node(span.name, _metadata_node(attrs.get(OI_METADATA)), parent):
                return Kind.ACTOR, NODE
    ai_op = attrs.get(AI_OPERATION_ID)
    if isinstance(ai_op, str):
        if ai_op == AI_TOOL_CALL:
            return Kind.TOOL, ""
        if ai_op in AI_AGENT_OPERATIONS and attrs.get(AI_FUNCTION_ID):
            return Kind.ACTOR, AGENT
    if isinstance(attrs.get(GEN_AI_HANDOFF_TO_AGENT), str):
        return Kind.CREATE_AGENT, HANDOFF
    lf_type = attrs.get(LF_OBSERVATION_TYPE)
    if isinstance(lf_type, str):
        found = _LANGFUSE_KINDS.get(lf_type)
        if found is not None:
            return found
    request_type = attrs.get(TL_REQUEST_TYPE)
    if request_type in ("chat", "completion"):
        return Kind.MODEL, ""
    if request_type in ("embedding", "rerank"):
        return Kind.OTHER, EMBEDDING  # no generation, as the GenAI ``embeddings`` operation
    if attrs.get(sc.LANGGRAPH_NODE) is not None and _is_langgraph_node(
        span.name, attrs.get(sc.LANGGRAPH_NODE), parent
    ):
        return Kind.ACTOR, NODE
    if (attrs.get(sc.GEN_AI_REQUEST_MODEL) or attrs.get(sc.GEN_AI_RESPONSE_MODEL)) and any(
        key in attrs for key in USAGE_KEYS
    ):
        return Kind.OTHER, MODEL_LIKE
    if attrs.get(sc.GEN_AI_TOOL_NAME):
        return Kind.TOOL, ""
    return Kind.OTHER, ""


def _handoff_tool(attrs: Attributes) -> str | None:
    """The argument naming the target, for a tool that hands control to another agent."""
    name = attrs.get(sc.GEN_AI_TOOL_NAME)
    return HANDOFF_TOOLS.get(name) if isinstance(name, str) else None


def _is_langgraph_node(name: object, node: object, parent: Span | None) -> bool:
    # A LangGraph node's own span carries its node name; the runnables inside it inherit the node name in
    # their metadata but have names of their own.
    return node is not None and name == node and (parent is None or _own_name(parent) != name)


def _own_name(span: Span) -> object:
    return span.attributes.get(TL_ENTITY_NAME, span.name)


def _metadata_node(metadata: object) -> object:
    return _metadata_value(metadata, "langgraph_node")


def _metadata_value(metadata: object, key: str) -> object:
    if not isinstance(metadata, str) or key not in metadata:
        return None
    parsed = _json_object(metadata)
    return parsed.get(key) if parsed is not None else None


def _json_object(raw: object) -> dict[str, object] | None:
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def foreign_step(span: Span) -> int | None:
    """The LangGraph step of a node span written by another instrumentation (OpenLLMetry's association
    property, OpenInference's run metadata); ``None`` for orchestrace's own node spans, which link what they
    aggregate themselves."""
    attrs = span.attributes
    if sc.LANGGRAPH_NODE in attrs:
        return None
    step = attrs.get(TL_LANGGRAPH_STEP)
    if step is None:
        step = _metadata_value(attrs.get(OI_METADATA), "langgraph_step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def foreign_send_task(span: Span) -> bool:
    """Whether a node span written by another instrumentation is a task a ``Send`` packet started (one of a
    fan-out's parallel tasks, whatever node each runs)."""
    attrs = span.attributes
    triggers = attrs.get(TL_LANGGRAPH_TRIGGERS)
    if triggers is None:
        triggers = _metadata_value(attrs.get(OI_METADATA), "langgraph_triggers")
    return isinstance(triggers, tuple | list) and LANGGRAPH_SEND_TRIGGER in triggers


def _strip_operation(name: str) -> str:
    for prefix in _OPERATION_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


#: A UUID in a span's name (with the separator before it): made per run, so no part of a stable name.
_UUID = re.compile(r"[-_:. ]?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _span_name_as_actor(span: Span) -> str:
    """An actor's name from its span's name (nothing better recorded): without the operation, and without
    UUIDs, which differ every run (OpenInference's CrewAI root ``Crew_<uuid>.kickoff``) while the name must
    be the same in every rollout to group them."""
    name = _strip_operation(span.name)
    return _UUID.sub("", name) if "-" in name else name


def actor_name(span: Span, sub_kind: str) -> str:
    """The agent name an actor span plays (never empty)."""
    attrs = span.attributes
    if sub_kind == NODE:
        name = attrs.get(sc.ORCH_NODE_NAME) or attrs.get(sc.LANGGRAPH_NODE) or attrs.get(TL_ENTITY_NAME)
    elif sub_kind == WORKFLOW:
        name = (
            attrs.get(sc.GEN_AI_WORKFLOW_NAME)
            or attrs.get(sc.GEN_AI_AGENT_NAME)
            or attrs.get(OI_AGENT_NAME)
            or attrs.get(TL_ENTITY_NAME)
        )
        task = attrs.get(sc.ORCH_TASK_ID)
        if not name and task is not None and _strip_operation(span.name) == str(task):
            # ``with ot.task(task_id)`` names its span after the task, a new name per task: the run is the
            # service's root agent, one stable name (what its own model calls are filed under).
            name = span.resource.get(sc.SERVICE_NAME) or sc.ROOT_AGENT
    else:
        # OpenInference's agent spans may be named after the agent's class ("ToolCallingAgent.run"): two
        # agents of one class are told apart by the name it records, not the span's.
        name = (
            attrs.get(sc.GEN_AI_AGENT_NAME)
            or attrs.get(OI_AGENT_NAME)
            or attrs.get(OI_GRAPH_NODE_NAME)
            or attrs.get(TL_ENTITY_NAME)
            or attrs.get(AI_FUNCTION_ID)
        )
        if not name and OI_SMOLAGENTS_KEY in attrs and span.name.endswith(OI_SMOLAGENTS_RUN_SUFFIX):
            name = span.name[: -len(OI_SMOLAGENTS_RUN_SUFFIX)]  # the name a manager calls it by as a tool
        if not name:
            # OpenInference's CrewAI names an agent's span "<role>._execute_core" and its node id the role;
            # a node id the span's name does not start with may be any id, not a name.
            node_id = attrs.get(OI_GRAPH_NODE_ID)
            if isinstance(node_id, str) and node_id and span.name.startswith(node_id):
                name = node_id
    return str(name) if name else (_span_name_as_actor(span) or "agent")


def tool_name(span: Span) -> str:
    attrs = span.attributes
    name = (
        attrs.get(sc.GEN_AI_TOOL_NAME)
        or attrs.get(OI_TOOL_NAME)
        or attrs.get(TL_ENTITY_NAME)
        or attrs.get(AI_TOOL_CALL_NAME)
    )
    return str(name) if name else (_strip_operation(span.name) or "tool")


def created_agent_name(span: Span, sub_kind: str) -> str:
    """The agent a ``CREATE_AGENT`` span spawns, or hands off to (``""`` for a handoff that does not say to
    whom: the next agent to start beside the one handing off, see ``events``)."""
    if sub_kind == HANDOFF:
        attrs = span.attributes
        target = attrs.get(GEN_AI_HANDOFF_TO_AGENT)
        if target:
            return str(target)
        argument = _handoff_tool(attrs)
        if argument is not None:
            arguments = _json_object(attrs.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS))
            target = arguments.get(argument) if arguments is not None else None
            return target if isinstance(target, str) else ""
        return span.name[len(OI_HANDOFF_PREFIX):] if span.name.startswith(OI_HANDOFF_PREFIX) else ""
    return actor_name(span, AGENT)


def model_name(span: Span) -> str | None:
    attrs = span.attributes
    name = (
        attrs.get(sc.GEN_AI_RESPONSE_MODEL)
        or attrs.get(sc.GEN_AI_REQUEST_MODEL)
        or attrs.get(OI_MODEL_NAME)
        or attrs.get(LF_MODEL_NAME)
    )
    return str(name) if name else None


def provider_name(span: Span) -> str | None:
    attrs = span.attributes
    name = (
        attrs.get(sc.GEN_AI_PROVIDER_NAME)
        or attrs.get(sc.GEN_AI_SYSTEM)
        or attrs.get(OI_PROVIDER)
        or attrs.get(OI_SYSTEM)
    )
    return str(name) if name else None


def agent_id(span: Span) -> str | None:
    attrs = span.attributes
    raw = attrs.get(sc.GEN_AI_AGENT_ID) or attrs.get(sc.ORCH_NODE_ID) or attrs.get(sc.LANGGRAPH_TASK_ID)
    return str(raw) if raw else None
