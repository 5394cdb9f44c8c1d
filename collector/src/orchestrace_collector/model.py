"""The written orchestration trace (the upstream seed schema) and the per-turn training sample (pydantic).

These are the collector's output boundary. ``Trace.model_dump(exclude_none=True)`` must validate against the
packaged ``schema/trace_schema.json`` unchanged. Extra event fields that orchestrace adds are all declared on
``Event`` below, in this one place.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

EventType = Literal[
    "orchestrator_decision", "spawn", "despawn", "message", "tool_call", "tool_result", "return", "aggregate",
    "human_intervention", "safety_event",
]
EdgeType = Literal[
    "temporal", "causal", "spawn", "message", "tool_dependency", "return", "aggregate", "safety_flow",
]
Topology = Literal[
    "centralized", "planner_executor_critic", "debate", "swarm", "hierarchical", "harness", "mixed",
    "unknown",
]
Decision = Literal["spawn", "delegate", "communicate", "aggregate", "stop"]
#: Metrics the writer and the assembler set: the trace's revision, the spans it was built from, span ids seen
#: again with other content.
REVISION = "revision"
SPAN_COUNT = "spans"
SPAN_CONFLICTS = "span_conflicts"
#: Metrics that are counts, written as JSON integers.
INTEGER_METRICS = frozenset(
    {
        REVISION, SPAN_COUNT, "critical_steps", "incomplete", "rejected_rewards", "truncated",
        "truncated_bytes", "end_before_start", "truncated_events",
    }
)


def _is_count(metric: str) -> bool:
    return metric in INTEGER_METRICS or metric.startswith("rejected_rewards:")


def json_metrics(metrics: dict[str, float]) -> dict[str, float | int]:
    """Metrics as written: counts (``revision``, ``spans``, ``rejected_rewards``) are JSON integers,
    whatever their type here."""
    return {k: int(v) if _is_count(k) and float(v).is_integer() else v for k, v in metrics.items()}


class Event(BaseModel):
    """One event of the trace. Schema fields first, then orchestrace's documented extras."""

    model_config = ConfigDict(populate_by_name=True)

    # --- schema fields
    id: str
    t: float = Field(ge=0)  # seconds from the trace's first span
    type: EventType
    agent: str  # the agent's stable name (a graph node's name); a tool's name on ``tool_result``; ``human``
    role: str | None = None
    from_: str | None = Field(default=None, alias="from")
    to: str | None = None
    tool: str | None = None
    content_ref: str | None = None  # ``sha256:<hex>``
    trusted: bool | None = None

    # --- orchestrace extras (allowed by the schema's open events)
    #: Which instance of ``agent`` it is: 1-based start order among the episode's instances of that name
    #: (absent when ``agent`` is not an actor: a tool's result, a human). Names never carry it: ``agent``,
    #: ``from`` and ``to`` are stable names, and each has its activation in a field of its own.
    activation: int | None = None
    #: Which activation of ``from`` / ``to`` is meant, when the field names one instance of an actor (absent
    #: for a decision that fanned out to several instances of its target, or a name no instance ran under).
    from_activation: int | None = None
    to_activation: int | None = None
    decision: Decision | None = None  # orchestrator_decision only: the orchestration sub-decision
    #: orchestrator_decision only: the agents it could choose from, when recorded
    #: (``orchestrace.decision.options``: a conditional edge's path map, a node's declared destinations).
    options: list[str] | None = None
    label: str | None = None  # a decision kind that is not one of the five, or a human / safety kind
    reason: str | None = None
    handoff: bool | None = None  # a delegate that transfers control without a return
    severity: str | None = None  # safety_event only: the finding's severity, as recorded
    #: safety_event only: where the finding came from, as recorded (a tool call id or a span id); the
    #: ``safety_flow`` edge from the event it names says which
    source: str | None = None
    agent_id: str | None = None  # raw ``gen_ai.agent.id`` (or node instance id) behind ``agent``
    t_end: float | None = None  # end time (seconds) for events that last (a tool call, an aggregate)
    t_start: float | None = None  # ``return`` only: when the activation that returns started
    #: ``return`` only: when its activation waited for work it handed out (``orchestrace.waits``), flat
    #: ``[start, end, ...]`` seconds; present (maybe empty) when it records them: its own time is then its
    #: duration less these and less what ran inside it that is not ``concurrent``
    waits: list[float] | None = None
    #: ``return``, ``tool_call``, ``aggregate``: its span ran beside its parent (handed to a worker), so it is
    #: not time its parent spent on it (see ``waits``)
    concurrent: bool | None = None
    span_id: str | None = None  # the OTel span the event came from
    otel_trace_id: str | None = None  # the OTel trace of that span (an episode may stitch several)
    tokens: int | None = None
    reward: float | None = None  # rewards recorded for the unit this event stands for (agent, tool, event)
    credit: float | None = None  # share of the team-unit rewards assigned by the credit strategy
    incomplete: bool | None = None  # the span behind it never arrived complete (orphan, missing parent)
    #: The span it closes ended with status ERROR (``tool_result`` of a failed tool, ``return`` of a failed
    #: actor, ``aggregate``); control flow that LangGraph signals with exceptions (``Command.PARENT``
    #: handoffs, interrupts) is not an error and never sets it.
    error: bool | None = None
    error_type: str | None = None  # ``error.type``, else the recorded exception's ``exception.type``


class Edge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    src: str
    dst: str
    type: EdgeType


class Costs(BaseModel):
    """The schema's costs; it allows other costs, numbers (``embedding_tokens``: the tokens of models used
    without generating, embeddings and retrievals, which are no turns)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, float] = Field(init=False)

    tokens: float = Field(ge=0)
    wall_clock_s: float = Field(ge=0)
    tool_calls: float = Field(default=0, ge=0)
    messages: float = Field(default=0, ge=0)


class Trace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trace_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    system: str | None = None
    topology: Topology | None = None
    events: list[Event] = Field(min_length=1)
    edges: list[Edge]
    rewards: dict[str, float]
    costs: Costs
    metrics: dict[str, float] = Field(default_factory=dict)

    @field_serializer("metrics")
    def _metrics(self, metrics: dict[str, float]) -> dict[str, float | int]:
        return json_metrics(metrics)

    def to_json_dict(self) -> dict[str, object]:
        """The trace as written: aliases (``from``) applied, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def _repr_html_(self) -> str:
        """In a notebook, the trace shows itself as the view's timeline (offline, in an iframe)."""
        from orchestrace_collector.view.export import trace_html  # the view's pages load only when shown

        return trace_html(self)


class ToolCallFunction(BaseModel):
    name: str
    #: The arguments as a JSON object when they parse as one (what chat templates iterate over), else the
    #: raw text.
    arguments: dict[str, Any] | str


class ToolCall(BaseModel):
    """A tool-call request of an assistant message, shaped as Hugging Face chat templates and TRL read it."""

    id: str | None = None
    type: Literal["function"] = "function"
    function: ToolCallFunction


class Message(BaseModel):
    """One chat message of a turn's ``prompt`` / ``completion``, in the conversational format of Hugging Face
    ``datasets`` / TRL. Written with ``exclude_none``, so a plain message stays ``{role, content}``.

    ``tool_calls``: the tool calls an assistant message requested (its ``content`` is the text beside them,
    often empty). ``tool_call_id`` / ``name``: on a ``tool`` message, the call it answers and the tool's name,
    when the instrumentation recorded them. ``reasoning_content``: an assistant's reasoning / thinking text
    (Anthropic ``thinking`` blocks, OpenAI reasoning summaries, vLLM / DeepSeek ``reasoning_content``), the
    field reasoning models' chat templates read.
    """

    role: str
    content: str
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None


class ToolDefinition(BaseModel):
    """A tool offered to the model, in the Chat Completions shape chat templates read (``tools=``)."""

    type: Literal["function"] = "function"
    function: dict[str, Any]  # {"name", "description", "parameters" (JSON Schema)}


class Turn(BaseModel):
    """One model call: a training sample. Written one per line to ``turns*.jsonl``."""

    trace_id: str
    task_id: str
    turn_id: str  # the span id of the model call
    agent: str  # the stable name of the agent that made the call
    activation: int | None = None  # which instance of it (1-based start order in the episode)
    agent_id: str | None = None
    model: str | None = None
    provider: str | None = None
    t: float  # start of the model call, seconds from the trace's first span
    t_end: float | None = None  # its end
    concurrent: bool | None = None  # it ran beside its agent's own work (see ``Event.waits``)
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_ref: str | None = None
    output_ref: str | None = None
    event_ids: list[str] = Field(default_factory=list)  # trace events this turn led to
    reward: float | None = None  # credited to this turn: the sum of ``credit``
    #: The turn's share of each reward channel (``rewards`` key -> share); see ``convert/credit.py``.
    credit: dict[str, float] | None = None
    prompt: list[Message] | None = None  # when content was captured
    completion: list[Message] | None = None
    #: The prompt is known only in part: it was stored as a reference to an earlier model call's history
    #: (``orchestrace.content.prefix_span_id``) that could not be followed whole (that call missing or
    #: without content, a reference loop, fewer messages than the call received); ``prompt`` keeps the rest.
    prompt_incomplete: bool | None = None
    #: The prompt held untrusted content: an untrusted tool result's, or content that carried it on (a
    #: message, an agent's return, a model's reply after reading it); the ``safety_flow`` edges into the
    #: events this call led to say from where (``convert/provenance.py``). Filter or weigh these samples.
    tainted: bool | None = None
    #: The model call failed (its span ended with status ERROR): ``completion`` is what it produced before
    #: failing, if anything. Trainers usually filter these samples out, or learn from them on purpose.
    error: bool | None = None
    error_type: str | None = None  # ``error.type``, else the recorded exception's ``exception.type``
    #: The tools offered to the model (``gen_ai.tool.definitions``): render the prompt with them.
    tools: list[ToolDefinition] | None = None
    #: What the size limit cut from the captured content: ``{"prompt" | "completion": UTF-8 bytes cut}``.
    #: Absent when nothing was cut; a turn with it holds less than the model saw or said.
    truncated: dict[str, int] | None = None
    #: Token ids and the sampled tokens' logprobs, when the inference engine returned them (vLLM's
    #: ``return_token_ids``, ``logprobs``): train on these rather than on re-tokenized text.
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    #: Sampling parameters of the call: ``gen_ai.request.*`` (but the model) and ``orchestrace.request.*``
    #: by their short names (``temperature``, ``top_p``, ``max_tokens``, ``seed``, ``stop_sequences``, ...).
    request: dict[str, Any] | None = None
    response_id: str | None = None
    response_model: str | None = None
    #: The version of the policy that served the call (``orchestrace.policy.version``); the served model
    #: or LoRA adapter is ``response_model``.
    policy_version: str | None = None
    #: Why the model stopped: ``stop``, ``length``, ``tool_calls``, ``content_filter``, or another word.
    finish_reason: str | None = None
    #: The parts of ``input_tokens`` read from the provider's prompt cache and written to it
    #: (``gen_ai.usage.cache_read.input_tokens``, ``gen_ai.usage.cache_creation.input_tokens``).
    #: ``input_tokens`` is the whole prompt for every provider, these included.
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    #: The reply stream ended before the reply did (its reader stopped, or it failed midway): ``completion``
    #: is cut and ``finish_reason`` is what the model had said by then. Exports flag such turns.
    completion_incomplete: bool | None = None
