"""What a span is and what it names, whichever instrumentation wrote it: the rules and keys the vocabularies
declare (``vocabularies``), read in the registry's order.

A span's kind is the first verdict of the vocabularies' ``kind_tables`` and ``kind`` rules, else of their
``fallback_kind`` rules (weaker evidence: a span that merely names a model or a tool); a tool that some
vocabulary says hands control over (``handoff_to`` / ``handoff_tools`` / ``handoff_prefixes``) is a handoff
(``CREATE_AGENT``), an agent some vocabulary says is a graph run a workflow. Everything else is ``OTHER``: it
yields no event itself, but span events recorded on it still count for the actor that encloses it.

``forest`` classifies and names every span once; later stages read the node's kind and names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import orchestrace_semconv as sc

from ..spans import Attributes, Span
from .vocabularies import VOCABULARIES
from .vocabularies.base import (
    AGENT,
    EMBEDDING,
    HANDOFF,
    K_ACTOR,
    K_AGGREGATE,
    K_CREATE_AGENT,
    K_MODEL,
    K_OTHER,
    K_TOOL,
    LANGGRAPH_SEND_TRIGGER,
    MODEL_LIKE,
    NODE,
    TOOL_NODE,
    WORKFLOW,
    Kind,
    KindRule,
    Verdict,
    json_object,
)

__all__ = [
    "AGENT",
    "EMBEDDING",
    "HANDOFF",
    "K_ACTOR",
    "K_AGGREGATE",
    "K_CREATE_AGENT",
    "K_MODEL",
    "K_OTHER",
    "K_TOOL",
    "MODEL_LIKE",
    "NODE",
    "TOOL_NODE",
    "WORKFLOW",
    "Kind",
    "actor_name",
    "agent_id",
    "classify",
    "created_agent_name",
    "foreign_send_task",
    "foreign_step",
    "graph_run",
    "model_name",
    "provider_name",
    "tool_name",
]

#: A step of classification: a table ``(attribute, value -> verdict, None, None)`` or a rule ``("", {}, rule,
#: the attributes it needs, None: any span)``.
_Step = tuple[str, Mapping[str, Verdict], KindRule | None, tuple[str, ...] | None]
_NO_TABLE: Final[Mapping[str, Verdict]] = {}


def _kind_steps() -> tuple[_Step, ...]:
    """Each vocabulary's tables then its ``kind`` rule, in the registry's order, then the fallbacks."""
    steps: list[_Step] = []
    for v in VOCABULARIES:
        steps += [(key, table, None, None) for key, table in v.kind_tables]
        if v.kind is not None:
            steps.append(("", _NO_TABLE, v.kind, tuple(dict.fromkeys(v.kind_keys)) or None))
    for v in VOCABULARIES:
        if v.fallback_kind is not None:
            steps.append(("", _NO_TABLE, v.fallback_kind, tuple(dict.fromkeys(v.kind_keys)) or None))
    return tuple(steps)


_KIND_STEPS: Final = _kind_steps()
_GRAPH_RUN: Final = tuple(pair for v in VOCABULARIES for pair in v.graph_run)
_HANDOFF_TO: Final = tuple(key for v in VOCABULARIES for key in v.handoff_to)
_HANDOFF_TOOLS: Final = {tool: arg for v in VOCABULARIES for tool, arg in v.handoff_tools.items()}
#: A tuple: ``in`` compares, so a value of any type (even unhashable) is tested.
_HANDOFF_TOOL_NAMES: Final = tuple(_HANDOFF_TOOLS)
_HANDOFF_PREFIXES: Final = tuple(prefix for v in VOCABULARIES for prefix in v.handoff_prefixes)
_AGENT_NAMES: Final = tuple(key for v in VOCABULARIES for key in v.agent_names)
_WORKFLOW_NAMES: Final = tuple(key for v in VOCABULARIES for key in v.workflow_names)
_NODE_NAMES: Final = tuple(key for v in VOCABULARIES for key in v.node_names)
_ACTOR_NAME_RULES: Final = tuple(v.actor_name for v in VOCABULARIES if v.actor_name is not None)
_TOOL_NAMES: Final = tuple(key for v in VOCABULARIES for key in v.tool_names)
_MODEL_NAMES: Final = tuple(key for v in VOCABULARIES for key in v.model_names)
_PROVIDER_NAMES: Final = tuple(key for v in VOCABULARIES for key in v.provider_names)
_AGENT_IDS: Final = tuple(key for v in VOCABULARIES for key in v.agent_ids)
_OPERATION_PREFIXES: Final = tuple(prefix for v in VOCABULARIES for prefix in v.operation_prefixes)
_LANGGRAPH_STEP: Final = tuple(v.langgraph_step for v in VOCABULARIES if v.langgraph_step is not None)
_LANGGRAPH_TRIGGERS: Final = tuple(
    v.langgraph_triggers for v in VOCABULARIES if v.langgraph_triggers is not None
)
_NONE: Final[Verdict] = (K_OTHER, "")
_HANDOFF: Final[Verdict] = (K_CREATE_AGENT, HANDOFF)
_GRAPH: Final[Verdict] = (K_ACTOR, WORKFLOW)


def classify(span: Span, parent: Span | None) -> Verdict:
    """The kind of ``span`` and, for actors, its sub-kind (``workflow``, ``agent`` or ``node``)."""
    attrs = span.attributes
    for key, table, rule, keys in _KIND_STEPS:
        if rule is None:
            # Only string values name kinds (attribute values may be of any type, even unhashable).
            value = attrs.get(key)
            found = table.get(value) if isinstance(value, str) else None
        elif keys is None or _has_any(attrs, keys):
            found = rule(span, parent)
        else:
            continue  # the span has none of the attributes the rule reads
        if found is not None:
            # A tool span is a handoff only when it has what some vocabulary's handoff needs: checked here
            # without a call, as most tool spans have none of it.
            if found[0] is K_TOOL and (
                _has_any(attrs, _HANDOFF_TO)
                or attrs.get(sc.GEN_AI_TOOL_NAME) in _HANDOFF_TOOL_NAMES
                or span.name.startswith(_HANDOFF_PREFIXES)
            ) and _handoff_target(span) is not None:
                return _HANDOFF
            if found[1] == AGENT:
                for graph_key, graph_value in _GRAPH_RUN:
                    if attrs.get(graph_key) == graph_value:
                        return _GRAPH
            return found
    return _NONE


def _has_any(attrs: Attributes, keys: tuple[str, ...]) -> bool:
    # A loop over a few keys: compiled, ``frozenset.isdisjoint`` is a method looked up and called per span.
    return any(key in attrs for key in keys)


def graph_run(attrs: Attributes) -> bool:
    """Whether some vocabulary says an actor span is a graph run, whatever agent operation it names."""
    return any(attrs.get(key) == value for key, value in _GRAPH_RUN)


def _handoff_target(span: Span) -> str | None:
    """The agent a handoff span hands over to (``""``: not said), ``None`` for a span that is no handoff."""
    target = _first_text(span.attributes, _HANDOFF_TO)
    if target is not None:
        return target
    attrs = span.attributes
    tool = attrs.get(sc.GEN_AI_TOOL_NAME)
    argument = _HANDOFF_TOOLS.get(tool) if isinstance(tool, str) else None
    if argument is not None:
        arguments = json_object(attrs.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS))
        said = arguments.get(argument) if arguments is not None else None
        return said if isinstance(said, str) else ""
    for prefix in _HANDOFF_PREFIXES:
        if span.name.startswith(prefix):
            return span.name[len(prefix):]
    return None


def foreign_step(span: Span) -> int | None:
    """The LangGraph step of a node span written by another instrumentation; ``None`` for orchestrace's own
    node spans, which link what they aggregate themselves."""
    attrs = span.attributes
    if sc.LANGGRAPH_NODE in attrs:
        return None
    step = None
    for rule in _LANGGRAPH_STEP:
        step = rule(attrs)
        if step is not None:
            break
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def foreign_send_task(span: Span) -> bool:
    """Whether a node span written by another instrumentation is a task a ``Send`` packet started (one of a
    fan-out's parallel tasks, whatever node each runs)."""
    attrs = span.attributes
    triggers = None
    for rule in _LANGGRAPH_TRIGGERS:
        triggers = rule(attrs)
        if triggers is not None:
            break
    return isinstance(triggers, tuple | list) and LANGGRAPH_SEND_TRIGGER in triggers


def _strip_operation(name: str) -> str:
    for prefix in _OPERATION_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


#: A UUID in a span's name (with the separator before it): made per run, so no part of a stable name.
_UUID = re.compile(r"[-_:. ]?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def actor_name(span: Span, sub_kind: str) -> str:
    """The agent name an actor span plays (never empty): the first name a vocabulary's keys for its sub-kind
    give, else one its rules derive, else the span's name without its operation and without UUIDs, which
    differ every run (OpenInference's CrewAI root ``Crew_<uuid>.kickoff``) while the name must be the same in
    every rollout to group them."""
    if sub_kind != NODE and sub_kind != WORKFLOW:
        sub_kind = AGENT
    keys = _NODE_NAMES if sub_kind == NODE else _WORKFLOW_NAMES if sub_kind == WORKFLOW else _AGENT_NAMES
    name = _first_text(span.attributes, keys)
    if name:
        return name
    bare = _strip_operation(span.name)
    for rule in _ACTOR_NAME_RULES:
        derived = rule(span, sub_kind, bare)
        if derived:
            return str(derived)
    return (_UUID.sub("", bare) if "-" in bare else bare) or "agent"


def created_agent_name(span: Span, sub_kind: str) -> str:
    """The agent a ``CREATE_AGENT`` span spawns, or hands off to (``""`` for a handoff that does not say to
    whom: the next agent to start beside the one handing off, see ``events``)."""
    if sub_kind == HANDOFF:
        return _handoff_target(span) or ""
    return actor_name(span, AGENT)


def _first_text(attrs: Attributes, keys: tuple[str, ...]) -> str | None:
    """The first non-empty attribute of ``keys``, as text."""
    for key in keys:
        value = attrs.get(key)
        if value:
            return str(value)
    return None


# One plain function per name: compiled, a module-level closure is called generically (through Python's call
# protocol) where a function is a native call.
def model_name(span: Span) -> str | None:
    return _first_text(span.attributes, _MODEL_NAMES)


def provider_name(span: Span) -> str | None:
    return _first_text(span.attributes, _PROVIDER_NAMES)


def agent_id(span: Span) -> str | None:
    return _first_text(span.attributes, _AGENT_IDS)


def tool_name(span: Span) -> str:
    name = _first_text(span.attributes, _TOOL_NAMES)
    return name if name is not None else _strip_operation(span.name) or "tool"

