"""What a vocabulary declares: the kinds a span can be, and the one record (``Vocabulary``) each library's
file fills in. Every field is optional: a library says only what it has. The core (``classify``, ``forest``,
``actors``, ``content``, ``chat``, ``as_genai``) reads the registry's merge of them (``vocabularies``) and
never names a library.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from ...spans import Attributes, Span


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
WORKFLOW: Final = "workflow"
AGENT: Final = "agent"
NODE: Final = "node"
#: Non-actor sub-kind: a graph node that only runs the tools a model asked for (its tools are its owner's).
TOOL_NODE: Final = "tool_node"
#: ``CREATE_AGENT`` sub-kind: another library's handoff span (a delegate that hands control over).
HANDOFF: Final = "handoff"
#: Non-actor sub-kind until ``forest`` decides: a span of no known kind that names a model and reports tokens.
MODEL_LIKE: Final = "model_like"
#: Non-actor sub-kind: a model used without generating (an embedding, a retrieval, a rerank): no turn, its
#: tokens in ``costs.embedding_tokens``.
EMBEDDING: Final = "embedding"

#: LangGraph's trigger of a task a ``Send`` packet started (its ``PUSH``), whatever node it runs, in the run
#: metadata instrumentations record.
LANGGRAPH_SEND_TRIGGER: Final = "__pregel_push"

#: A span's kind and, for actors, its sub-kind.
Verdict = tuple[Kind, str]
#: ``(span, parent span)`` -> the verdict, or ``None`` when the library has nothing to say about the span.
KindRule = Callable[[Span, Span | None], Verdict | None]
#: A message's content in a library's own form -> the content parts ``chat`` reads (anything else unchanged).
ContentParts = Callable[[object], object]
#: Adds to ``found`` (GenAI attribute -> value, ``setdefault``) what a span records in another form; the last
#: argument is the registry's ``ContentParts`` for message contents.
Overlay = Callable[[Span, dict[str, object], ContentParts], None]


@dataclass(frozen=True, slots=True)
class FlatMessages:
    """Messages flattened into attributes: message ``i`` is ``<prefix><i><suffix>``; its tool call ``j``
    ``<prefix><i><tool_calls><j>`` then ``call_id`` / ``call_name`` / ``call_args``."""

    input_prefix: str
    output_prefix: str
    role: str
    content: str
    tool_call_id: str
    name: str | None
    tool_calls: str
    call_id: str
    call_name: str
    call_args: str
    #: The first output message's finish reason: ``<output_prefix>0<finish_reason>``.
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ToolParts:
    """Content parts of a plain chat message (``{"role", "content": [part, ...]}``) that call a tool or answer
    one, in one format: the part's ``type``, then where its id, tool name and arguments or output are (the
    first key present)."""

    call: str
    call_id: str
    call_name: str
    call_arguments: tuple[str, ...]
    result: str
    result_id: str
    result_name: str | None
    result_output: tuple[str, ...]
    #: The key holding an output given as ``{"type", <key>}``.
    output_value: str | None = None


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """Everything conversion reads of one library's spans. The registry's order is the precedence wherever
    two libraries could answer the same question."""

    name: str
    # --- kinds (``classify``): the first table or rule to answer wins, every vocabulary's tables and ``kind``
    # before any ``fallback_kind``
    #: Kinds by the value of one attribute (``(key, value -> verdict)``), read in order before ``kind``: a
    #: lookup, no call, for every span the library's tables answer.
    kind_tables: tuple[tuple[str, Mapping[str, Verdict]], ...] = ()
    kind: KindRule | None = None
    #: Weaker evidence, tried once no library's ``kind`` answered (a span that merely names a model).
    fallback_kind: KindRule | None = None
    #: Every attribute ``kind`` and ``fallback_kind`` need: they run only for a span with one of them (none
    #: declared: for every span).
    kind_keys: tuple[str, ...] = ()
    #: An actor span with one of these ``(attribute, value)`` is a graph run, whatever agent operation it
    #: names (an ``agent`` becomes a ``workflow``; ``actors`` keeps it one when it wraps it in an agent span
    #: of the same name).
    graph_run: tuple[tuple[str, str], ...] = ()
    #: Handoffs (a tool span that is one is a handoff, whatever rule found it): attributes naming the agent
    #: handed over to; tools that hand over -> the argument naming the agent (in
    #: ``gen_ai.tool.call.arguments``, when captured); span-name prefixes before the agent's name.
    handoff_to: tuple[str, ...] = ()
    handoff_tools: Mapping[str, str] = field(default_factory=dict)
    handoff_prefixes: tuple[str, ...] = ()
    # --- names (``classify.names``): attribute keys, first value wins
    agent_names: tuple[str, ...] = ()
    workflow_names: tuple[str, ...] = ()
    node_names: tuple[str, ...] = ()
    #: An actor's name when no key has one: ``(span, sub-kind, span name without its operation)`` -> the name
    #: or ``None``.
    actor_name: Callable[[Span, str, str], object] | None = None
    tool_names: tuple[str, ...] = ()
    model_names: tuple[str, ...] = ()
    provider_names: tuple[str, ...] = ()
    agent_ids: tuple[str, ...] = ()
    #: Span-name prefixes that are no part of the name (``"invoke_agent "``).
    operation_prefixes: tuple[str, ...] = ()
    # --- content and usage (``content``, ``turns``, ``call_details``)
    input_content: tuple[str, ...] = ()
    output_content: tuple[str, ...] = ()
    input_tokens: tuple[str, ...] = ()
    output_tokens: tuple[str, ...] = ()
    cache_read_tokens: tuple[str, ...] = ()
    cache_write_tokens: tuple[str, ...] = ()
    # --- messages (``chat``, ``as_genai``)
    flat_messages: FlatMessages | None = None
    tool_parts: ToolParts | None = None
    model_call: Overlay | None = None
    tool_call: Overlay | None = None
    content_parts: ContentParts | None = None
    #: Attributes whose presence says a span records something in another form: the overlays run only for a
    #: span with one of them or with span events.
    other_forms: tuple[str, ...] = ()
    # --- structure (``forest``, ``events``)
    #: A zero-length span that is only a copy of a span exported when it started (the span follows).
    in_progress_copy: Callable[[Attributes], bool] | None = None
    #: Instrumentation scope of another recorder -> this library's scopes that tell its spans again: set
    #: aside in an episode holding spans of that scope.
    retold_under: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: A root span with any of these keys is a runtime's plumbing, not the run's orchestrator.
    plumbing_keys: tuple[str, ...] = ()
    #: A LangGraph node span's step, and the triggers that started its task.
    langgraph_step: Callable[[Attributes], object] | None = None
    langgraph_triggers: Callable[[Attributes], object] | None = None


def json_object(raw: object) -> dict[str, object] | None:
    """``raw``, a JSON text, parsed as an object, else ``None``."""
    parsed = json_value(raw) if isinstance(raw, str) else None
    return parsed if isinstance(parsed, dict) else None


def json_value(raw: object) -> object:
    """``raw`` parsed when it is a JSON text (``None`` when it is not valid JSON), else ``raw`` itself."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return None
