"""Every attribute, span-event and value name orchestrace puts on (or reads from) a span.

This module is the single source of truth: the SDK, the LangGraph integration and the collector import
names from here and never spell them as literals. GenAI names are re-exported from
``opentelemetry-semantic-conventions`` so that Jaeger and every OTel backend recognise them; the
``orchestrace.*`` names carry what the GenAI conventions have no word for (orchestration).

How an orchestration run is encoded on ordinary OTel spans
----------------------------------------------------------
Spans ("actors" are the spans that own a timeline of events in the written trace):

* ``invoke_workflow {name}``  (``gen_ai.operation.name=invoke_workflow``): one task / episode / graph run.
  Actor: the orchestrator of the run. ``@ot.task`` and each LangGraph graph run (subgraphs too).
* ``invoke_agent {name}``     (``invoke_agent``): one agent invocation (a fresh instance with its own
  ``gen_ai.agent.id``). An actor nested in another actor is a delegation with a return.
* ``{node}``                  (``orchestrace.operation=node``): a graph node execution that is not an agent
  (LangGraph). An actor too: its ``orchestrace.node.name`` (LangGraph's own ``langgraph.node``) plays the
  agent name.
* ``execute_tool {name}``     (``execute_tool``): a tool call; its result is untrusted unless
  ``orchestrace.tool.trusted`` is true.
* ``chat {model}``            (``chat``, or any other GenAI inference operation): one model call, a *turn*:
  the unit of RL training samples.
* ``aggregate {agent}``       (``orchestrace.operation=aggregate``): the merge of several results; its span
  links with ``orchestrace.link.type=aggregate_input`` point at the spans whose results were merged.
  An actor span may carry such links itself (a LangGraph reducer node).

Span events (recorded on the current span by the orchestration calls):

* ``orchestrace.spawn`` / ``orchestrace.delegate``: target agent name (and id/role when known), reason.
  An explicit spawn/delegate is matched by the collector to the next actor span of that name that starts
  after it in the same trace; actors without one get a synthesized delegate + spawn.
* ``orchestrace.message``: from, to, content ref.
* ``orchestrace.decision``: kind (one of ``DECISION_KINDS`` or a free label), target, reason.
* ``orchestrace.stop``: reason (the decision to stop).
* ``orchestrace.human_intervention``: kind (interrupt, interrupt_before, interrupt_after, resume, approve,
  edit, reject, feedback), actor, content ref.
* ``orchestrace.safety_event``: category, severity, action, source (a tool call id or span id), and the
  agent it concerns as ``orchestrace.target.agent`` (``orchestrace.target.id`` for one instance).
* ``gen_ai.evaluation.result`` (the GenAI evaluation event) plus ``orchestrace.reward.*``: a reward.

Content (messages, tool arguments, results) never goes into a written trace: spans carry
``orchestrace.content.*_ref`` = ``sha256:<hex>`` of the full content, and only when capture is on also the
(truncated, redacted) content itself in the GenAI attributes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _g
from opentelemetry.semconv.attributes import error_attributes as _error
from opentelemetry.semconv.attributes import exception_attributes as _exception
from opentelemetry.semconv.attributes import service_attributes as _service

# --- GenAI semantic conventions (re-exported, never re-spelled) -------------------------------------------
GEN_AI_OPERATION_NAME: Final = _g.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER_NAME: Final = _g.GEN_AI_PROVIDER_NAME
GEN_AI_SYSTEM: Final = _g.GEN_AI_SYSTEM  # deprecated name; read only, for older instrumentations
GEN_AI_AGENT_NAME: Final = _g.GEN_AI_AGENT_NAME
GEN_AI_AGENT_ID: Final = _g.GEN_AI_AGENT_ID
GEN_AI_AGENT_DESCRIPTION: Final = _g.GEN_AI_AGENT_DESCRIPTION
GEN_AI_WORKFLOW_NAME: Final = _g.GEN_AI_WORKFLOW_NAME
GEN_AI_CONVERSATION_ID: Final = _g.GEN_AI_CONVERSATION_ID
GEN_AI_TOOL_NAME: Final = _g.GEN_AI_TOOL_NAME
GEN_AI_TOOL_CALL_ID: Final = _g.GEN_AI_TOOL_CALL_ID
GEN_AI_TOOL_TYPE: Final = _g.GEN_AI_TOOL_TYPE
GEN_AI_TOOL_DESCRIPTION: Final = _g.GEN_AI_TOOL_DESCRIPTION
GEN_AI_TOOL_CALL_ARGUMENTS: Final = _g.GEN_AI_TOOL_CALL_ARGUMENTS
GEN_AI_TOOL_CALL_RESULT: Final = _g.GEN_AI_TOOL_CALL_RESULT
GEN_AI_REQUEST_MODEL: Final = _g.GEN_AI_REQUEST_MODEL
GEN_AI_RESPONSE_MODEL: Final = _g.GEN_AI_RESPONSE_MODEL
GEN_AI_RESPONSE_FINISH_REASONS: Final = _g.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_RESPONSE_ID: Final = _g.GEN_AI_RESPONSE_ID
#: Request parameters: every ``gen_ai.request.*`` attribute but the model is a sampling parameter.
GEN_AI_REQUEST_PREFIX: Final = "gen_ai.request."
GEN_AI_REQUEST_TEMPERATURE: Final = _g.GEN_AI_REQUEST_TEMPERATURE
GEN_AI_REQUEST_TOP_P: Final = _g.GEN_AI_REQUEST_TOP_P
GEN_AI_REQUEST_TOP_K: Final = _g.GEN_AI_REQUEST_TOP_K
GEN_AI_REQUEST_MAX_TOKENS: Final = _g.GEN_AI_REQUEST_MAX_TOKENS
GEN_AI_REQUEST_SEED: Final = _g.GEN_AI_REQUEST_SEED
GEN_AI_REQUEST_STOP_SEQUENCES: Final = _g.GEN_AI_REQUEST_STOP_SEQUENCES
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = _g.GEN_AI_REQUEST_FREQUENCY_PENALTY
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = _g.GEN_AI_REQUEST_PRESENCE_PENALTY
GEN_AI_REQUEST_CHOICE_COUNT: Final = _g.GEN_AI_REQUEST_CHOICE_COUNT
#: The tools offered to the model: JSON list, ``{"type": "function", "name", "description", "parameters"}``.
GEN_AI_TOOL_DEFINITIONS: Final = _g.GEN_AI_TOOL_DEFINITIONS
GEN_AI_USAGE_INPUT_TOKENS: Final = _g.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS: Final = _g.GEN_AI_USAGE_OUTPUT_TOKENS
#: Input tokens served from a provider's prompt cache (part of ``gen_ai.usage.input_tokens``): one name in
#: every version of the conventions.
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = _g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
#: Input tokens written to a provider's prompt cache (part of ``gen_ai.usage.input_tokens``), by its default
#: name; ``gen_ai_latest_experimental`` renames it (write it through :func:`gen_ai_names`, read both).
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = _g.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"
#: Every name of the cache-write count a span may carry, the latest first.
CACHE_WRITE_INPUT_TOKENS_NAMES: Final = (GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
                                         GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)
GEN_AI_INPUT_MESSAGES: Final = _g.GEN_AI_INPUT_MESSAGES
GEN_AI_OUTPUT_MESSAGES: Final = _g.GEN_AI_OUTPUT_MESSAGES
GEN_AI_SYSTEM_INSTRUCTIONS: Final = _g.GEN_AI_SYSTEM_INSTRUCTIONS
GEN_AI_EVALUATION_NAME: Final = _g.GEN_AI_EVALUATION_NAME
GEN_AI_EVALUATION_SCORE_VALUE: Final = _g.GEN_AI_EVALUATION_SCORE_VALUE
GEN_AI_EVALUATION_SCORE_LABEL: Final = _g.GEN_AI_EVALUATION_SCORE_LABEL
GEN_AI_EVALUATION_EXPLANATION: Final = _g.GEN_AI_EVALUATION_EXPLANATION

OP_CHAT: Final = _g.GenAiOperationNameValues.CHAT.value
OP_TEXT_COMPLETION: Final = _g.GenAiOperationNameValues.TEXT_COMPLETION.value
OP_GENERATE_CONTENT: Final = _g.GenAiOperationNameValues.GENERATE_CONTENT.value
OP_INVOKE_AGENT: Final = _g.GenAiOperationNameValues.INVOKE_AGENT.value
OP_CREATE_AGENT: Final = _g.GenAiOperationNameValues.CREATE_AGENT.value
OP_EXECUTE_TOOL: Final = _g.GenAiOperationNameValues.EXECUTE_TOOL.value
OP_INVOKE_WORKFLOW: Final = _g.GenAiOperationNameValues.INVOKE_WORKFLOW.value
#: ``semantic-conventions-genai`` after its split from the OTel conventions (not yet in
#: ``opentelemetry-semantic-conventions``): a framework runner's entrypoint (OpenAI Agents ``Runner.run``, ADK
#: ``Runner.run``), the span of one conversation turn, formerly ``invoke_workflow``.
OP_HANDLE_CONVERSATION_TURN: Final = "handle_conversation_turn"
#: An agent's planning or task decomposition phase; its model call is a child of the ``plan`` span.
OP_PLAN: Final = "plan"
#: Operations that are one model call (a turn).
MODEL_CALL_OPERATIONS: Final = frozenset({OP_CHAT, OP_TEXT_COMPLETION, OP_GENERATE_CONTENT})


# --- Which version of the GenAI conventions to write ------------------------------------------------------
#: OTel's opt-in switch: a comma-separated list; ``gen_ai_latest_experimental`` in it selects the latest
#: (experimental) GenAI names, as in opentelemetry-python-contrib's instrumentations. Readers (the collector)
#: accept both versions whatever it says.
OTEL_SEMCONV_STABILITY_OPT_IN: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
GEN_AI_LATEST_EXPERIMENTAL: Final = "gen_ai_latest_experimental"


@dataclass(frozen=True)
class GenAiNames:
    """The GenAI names that differ between the default and the latest conventions (writers pick one set)."""

    #: ``gen_ai.operation.name`` of a framework runner's entrypoint (one ``Runner.run``).
    runner_operation: str
    #: Input tokens written to the provider's prompt cache.
    cache_write_input_tokens: str
    #: Whether cache counts stated outside a model call (``ot.set_usage`` on an agent's span) are written:
    #: the latest conventions removed them from agent spans (summed over models they mislead).
    cache_counts_outside_model_calls: bool


#: Today's names (``opentelemetry-semantic-conventions``), the default.
GEN_AI_DEFAULT: Final = GenAiNames(
    runner_operation=OP_INVOKE_WORKFLOW,
    cache_write_input_tokens=GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    cache_counts_outside_model_calls=True,
)
#: The latest ``semantic-conventions-genai`` release's names, under ``gen_ai_latest_experimental``.
GEN_AI_LATEST: Final = GenAiNames(
    runner_operation=OP_HANDLE_CONVERSATION_TURN,
    cache_write_input_tokens=GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
    cache_counts_outside_model_calls=False,
)


def gen_ai_latest_experimental() -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` opts in to the latest GenAI names, parsed as contrib's
    ``_OpenTelemetrySemanticConventionStability`` does (comma-separated, blanks stripped). Read on each call
    (an environment lookup), so a process that sets the variable before its first span is honoured."""
    opt_in = os.environ.get(OTEL_SEMCONV_STABILITY_OPT_IN, "")
    return GEN_AI_LATEST_EXPERIMENTAL in (part.strip() for part in opt_in.split(","))


def gen_ai_names() -> GenAiNames:
    """The GenAI names to write under the current ``OTEL_SEMCONV_STABILITY_OPT_IN``."""
    return GEN_AI_LATEST if gen_ai_latest_experimental() else GEN_AI_DEFAULT


#: Span event name of the GenAI evaluation result, used for rewards.
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"

# --- OTel general conventions: errors (read by the collector for failed spans) ------------------------------
ERROR_TYPE: Final = _error.ERROR_TYPE
EXCEPTION_TYPE: Final = _exception.EXCEPTION_TYPE
#: Span event name that ``Span.record_exception`` writes.
EVENT_EXCEPTION: Final = "exception"
#: The resource's service name: the system, and the name of the root agent of a run named after its task.
SERVICE_NAME: Final = _service.SERVICE_NAME
#: The root agent's name when the resource names no service.
ROOT_AGENT: Final = "orchestrator"

# --- orchestrace span attributes ---------------------------------------------------------------------------
#: What a span is when GenAI has no operation for it: ``node`` or ``aggregate``.
ORCH_OPERATION: Final = "orchestrace.operation"
OPERATION_NODE: Final = "node"
OPERATION_AGGREGATE: Final = "aggregate"
#: A graph node that only runs the tools a model asked for (LangGraph's ``ToolNode``): not an agent.
OPERATION_TOOL_NODE: Final = "tool_node"
#: Captured output of a span that is no model call (an aggregate): OpenInference's neutral value, which
#: standard backends show as a chain's output (``gen_ai.output.messages`` would make it a model call).
OUTPUT_VALUE: Final = "output.value"
#: OpenInference's input and the media types of both values: what Arize Phoenix shows in its Input and Output
#: panes. Agent and workflow spans carry their captured messages there too (JSON); model calls do not.
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
MIME_JSON: Final = "application/json"
#: OpenInference's span kind, put on spans GenAI has no kind for (workflow runs, graph nodes, aggregates) so
#: that backends reading OpenInference (Arize Phoenix) classify them as chains rather than leave them unknown;
#: the GenAI operation and ``orchestrace.operation`` still say what they are.
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
SPAN_KIND_CHAIN: Final = "CHAIN"

ORCH_AGENT_ROLE: Final = "orchestrace.agent.role"
#: ``gen_ai.agent.id`` of the actor that invoked this one (the delegating parent), when there is one.
ORCH_AGENT_PARENT_ID: Final = "orchestrace.agent.parent_id"
ORCH_NODE_NAME: Final = "orchestrace.node.name"
#: Instance id of a node execution (LangGraph task id), distinct for parallel Send tasks of one node.
ORCH_NODE_ID: Final = "orchestrace.node.id"

ORCH_TASK_ID: Final = "orchestrace.task.id"
ORCH_TOPOLOGY: Final = "orchestrace.task.topology"
ORCH_SYSTEM: Final = "orchestrace.task.system"
#: Topologies of the trace format (``topology``), the values ``orchestrace.task.topology`` should take.
TOPOLOGIES: Final = (
    "centralized", "planner_executor_critic", "debate", "swarm", "hierarchical", "harness", "mixed",
    "unknown",
)
#: Stitches several OTel traces into one orchestration trace (a LangGraph thread id across interrupt/resume).
ORCH_EPISODE_ID: Final = "orchestrace.episode.id"
#: Outcome of the task when known (1.0 success, 0.0 failure): written to metrics.task_success.
ORCH_TASK_SUCCESS: Final = "orchestrace.task.success"

ORCH_INPUT_REF: Final = "orchestrace.content.input_ref"
ORCH_OUTPUT_REF: Final = "orchestrace.content.output_ref"
ORCH_CONTENT_REF: Final = "orchestrace.content.ref"
#: The captured (redacted, truncated) content of an event (message, human input), only when capture is on.
ORCH_CONTENT: Final = "orchestrace.content.text"
#: True when captured content on this span (or event) was cut to the size limit.
ORCH_CONTENT_TRUNCATED: Final = "orchestrace.content.truncated"
#: UTF-8 bytes left out of the captured input / output messages by the size limit (only when > 0).
ORCH_INPUT_CUT_BYTES: Final = "orchestrace.content.input_cut_bytes"
ORCH_OUTPUT_CUT_BYTES: Final = "orchestrace.content.output_cut_bytes"
#: Sampling parameters with no GenAI name (``repetition_penalty``, ``min_p``, ``reasoning_effort``, ...):
#: ``orchestrace.request.<name>``.
ORCH_REQUEST_PREFIX: Final = "orchestrace.request."
#: What an inference engine returned beside the text (vLLM's ``return_token_ids``, logprobs), with content
#: capture on: int / float arrays.
ORCH_PROMPT_TOKEN_IDS: Final = "orchestrace.prompt.token_ids"
ORCH_COMPLETION_TOKEN_IDS: Final = "orchestrace.completion.token_ids"
ORCH_COMPLETION_LOGPROBS: Final = "orchestrace.completion.logprobs"
#: The version of the policy (the weights) that served a model call, as the trainer names it: an asynchronous
#: trainer corrects for stale rollouts with it (``orchestrace proxy --policy-version``, or its header).
ORCH_POLICY_VERSION: Final = "orchestrace.policy.version"
#: True on a model call recorded by a gateway between the app and the engine (``orchestrace proxy``): when the
#: app records the call too, beside it (a record the app made from callbacks), it is that call told again.
ORCH_MODEL_CALL_GATEWAY: Final = "orchestrace.model_call.gateway"
#: True on a model call whose reply stream ended before the reply did (its reader stopped, or it failed
#: midway): the completion recorded is cut.
ORCH_COMPLETION_INCOMPLETE: Final = "orchestrace.completion.incomplete"
ORCH_TOOL_TRUSTED: Final = "orchestrace.tool.trusted"
#: Message history stored once: span id (16 hex) of an earlier model call whose prompt + completion starts
#: this call's prompt; the call then carries only the remaining messages. The full prompt is
#: ``(prompt(prefix) + completion(prefix))[:prefix_length] + input_messages``.
ORCH_PREFIX_SPAN_ID: Final = "orchestrace.content.prefix_span_id"
#: How many messages of that earlier prompt + completion start this prompt.
ORCH_PREFIX_LENGTH: Final = "orchestrace.content.prefix_length"
#: Number of messages in the whole prompt (the exported input messages are its last ones); set with captured
#: content, to check the rebuilt prompt.
ORCH_INPUT_MESSAGE_COUNT: Final = "orchestrace.content.input_message_count"

#: On a span that ran beside its parent span, in a worker (thread or asyncio task) the parent's code handed
#: it to (``ot.ThreadPoolExecutor``, ``ot.wrap_context``, ``ot.gather``), not in the parent's stead: the
#: parent may have kept working meanwhile.
ORCH_CONCURRENT: Final = "orchestrace.concurrent"
#: On a span: when it was blocked waiting for the work it handed to others (an ``ot.ThreadPoolExecutor``
#: future's result, the pool's shutdown, ``ot.gather``), as ``[start, end, start, end, ...]`` in ns since the
#: epoch; empty when it handed work out and never blocked on it. Where recorded, the span's own busy time
#: is its duration less these waits and less its children that did not run beside it
#: (``orchestrace.concurrent``); elsewhere, less all of its children.
ORCH_WAITS: Final = "orchestrace.waits"

#: Span-link attribute naming why a link exists.
ORCH_LINK_TYPE: Final = "orchestrace.link.type"
LINK_AGGREGATE_INPUT: Final = "aggregate_input"
LINK_RESUME_OF: Final = "resume_of"

# --- orchestration span events and their attributes ------------------------------------------------------
EVENT_SPAWN: Final = "orchestrace.spawn"
EVENT_DELEGATE: Final = "orchestrace.delegate"
EVENT_MESSAGE: Final = "orchestrace.message"
EVENT_DECISION: Final = "orchestrace.decision"
EVENT_STOP: Final = "orchestrace.stop"
EVENT_HUMAN_INTERVENTION: Final = "orchestrace.human_intervention"
EVENT_SAFETY: Final = "orchestrace.safety_event"

ORCH_TARGET_AGENT: Final = "orchestrace.target.agent"
ORCH_TARGET_ID: Final = "orchestrace.target.id"
ORCH_TARGET_ROLE: Final = "orchestrace.target.role"
ORCH_REASON: Final = "orchestrace.reason"
#: A handoff (peer transfer of control, e.g. Command.PARENT / transfer_to_* tools) rather than a call with a
#: return.
ORCH_HANDOFF: Final = "orchestrace.handoff"
ORCH_FROM: Final = "orchestrace.from"
ORCH_TO: Final = "orchestrace.to"

ORCH_DECISION_KIND: Final = "orchestrace.decision.kind"
ORCH_DECISION_OPTIONS: Final = "orchestrace.decision.options"
DECISION_SPAWN: Final = "spawn"
DECISION_DELEGATE: Final = "delegate"
DECISION_COMMUNICATE: Final = "communicate"
DECISION_AGGREGATE: Final = "aggregate"
DECISION_STOP: Final = "stop"
#: The five orchestration sub-decisions of the trace format (``orchestrator_decision.decision``).
DECISION_KINDS: Final = (
    DECISION_SPAWN, DECISION_DELEGATE, DECISION_COMMUNICATE, DECISION_AGGREGATE, DECISION_STOP,
)

ORCH_HUMAN_KIND: Final = "orchestrace.human.kind"
ORCH_HUMAN_ACTOR: Final = "orchestrace.human.actor"

ORCH_SAFETY_CATEGORY: Final = "orchestrace.safety.category"
ORCH_SAFETY_SEVERITY: Final = "orchestrace.safety.severity"
ORCH_SAFETY_ACTION: Final = "orchestrace.safety.action"
ORCH_SAFETY_SOURCE: Final = "orchestrace.safety.source"

ORCH_REWARD_FAMILY: Final = "orchestrace.reward.family"
ORCH_REWARD_UNIT: Final = "orchestrace.reward.unit"
ORCH_REWARD_TARGET: Final = "orchestrace.reward.target"
#: Set (to the reason, one of ``REWARD_REJECTIONS``) on a reward event the SDK refused; the collector counts
#: it in ``metrics.rejected_rewards`` and credits nothing.
ORCH_REWARD_REJECTED: Final = "orchestrace.reward.rejected"

# The reward vocabulary: one table for the SDK, the collector, ``annotate`` and reward functions.
#: What a reward is credited to (``unit``) -> the family a reward of that unit has when none is given.
REWARD_UNIT_FAMILY: Final = {
    "team": "team",                    # the whole episode: split over its turns by the credit strategy
    "orchestrator": "orchestration",   # the orchestrator's decisions: the turns that made them
    "role": "role",                    # every activation with that role
    "agent": "individual",             # one agent activation
    "turn": "process",                 # one model call
    "message": "process",              # the turn that produced that message
    "event": "process",                # the turn that produced that event
    "tool": "tool",                    # the turn that requested that tool call
    "token": "process",                # the model call holding the token
}
#: What kind of reward it is (``family``, the families of the trace format) -> the unit when none is given.
REWARD_FAMILY_UNIT: Final = {
    "team": "team",
    "individual": "agent",
    "role": "role",
    "process": "turn",
    "tool": "tool",
    "debate": "agent",
    "verifier": "team",
    "orchestration": "orchestrator",
    "hybrid": "team",
}
REWARD_FAMILIES: Final = tuple(REWARD_FAMILY_UNIT)
#: The paper's other names of the team family ("shared team/outcome"): accepted wherever a family is, written
#: as ``team``.
REWARD_FAMILY_ALIASES: Final = {"shared": "team", "outcome": "team"}
#: The families whose rewards are the episode's outcome: those credited to the whole team by default. The
#: outcome (``episode_reward``) is the sum of the channels of these families.
OUTCOME_FAMILIES: Final = tuple(family for family, unit in REWARD_FAMILY_UNIT.items() if unit == "team")
REWARD_UNITS: Final = tuple(REWARD_UNIT_FAMILY)
#: Why a reward was refused (the SDK logs each once and marks the event; the collector counts them).
REWARD_REJECTIONS: Final = ("not_a_number", "not_finite", "unknown_family", "unknown_unit", "no_target",
                            "outside_episode")

# --- LangGraph-specific attributes (set by orchestrace-langgraph) ------------------------------------------
LANGGRAPH_NODE: Final = "langgraph.node"
LANGGRAPH_STEP: Final = "langgraph.step"
LANGGRAPH_TASK_ID: Final = "langgraph.task_id"
LANGGRAPH_CHECKPOINT_NS: Final = "langgraph.checkpoint_ns"
LANGGRAPH_THREAD_ID: Final = "langgraph.thread_id"
LANGGRAPH_TRIGGERS: Final = "langgraph.triggers"
