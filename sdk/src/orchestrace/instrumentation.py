"""The public API an integration uses to record a framework's runs as orchestrace spans.

Everything an instrumentor needs is here (and in :mod:`orchestrace.semconv` for attribute names); the other
``orchestrace.*`` modules are private. The SDK's own decorators (``@ot.agent``, ``@ot.tool``, ``@ot.llm``,
``ot.task``) are built on the same invocations. The shape follows OpenTelemetry's ``opentelemetry-util-genai``
(a handler that starts agent, tool, workflow and inference invocations, each ended by ``stop`` or ``fail``)
and OpenInference's ``TraceConfig`` (one frozen object decides what content is captured).

Telemetry
    A :class:`Telemetry` is a tracer provider plus capture settings (:class:`CaptureConfig`, frozen).
    ``ot.configure`` returns one; an instrumentor accepts one (``instrument(telemetry=...)``), defaulting to
    :func:`configured` (resolved when used: ``ot.configure`` may run after ``instrument``). Take your own
    instrumentation scope with ``telemetry.scoped(__name__, __version__)``. The capture settings make every
    content decision (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: ``true`` / ``span_only`` /
    ``span_and_event`` capture, ``event_only`` puts no content on spans): an integration hands values to the
    invocation and never decides itself. Content refs (``sha256:``) are always recorded.

Invocations
    ``start_workflow``, ``start_agent``, ``start_tool``, ``start_model_call``, ``start_step`` start an
    :class:`Invocation` (a non-recording one if orchestrace itself failed: the work runs as usual, untraced;
    the failure is logged once). Each takes ``context`` (the parent; default: the current context),
    ``attributes`` (the integration's own, e.g. ``langgraph.node``), ``links`` (e.g. :func:`resume_link`) and
    ``values`` (context values the invocation's code should see). Then::

        invocation = start_agent(telemetry, "triage", input=question)
        token = invocation.resume()              # run the agent's code in its context
        try:
            answer = run_the_agent()
        except BaseException as exc:
            invocation.fail(exc, token)          # status ERROR, error.type, the exception event
            raise
        invocation.stop(answer, token)           # status OK, the output's ref (and content)

    A generator or stream: ``resume()`` before each step, ``suspend(token)`` after it; ``close(token)`` when
    it is abandoned. A pause for a human (an interrupt) is not an error: ``events.human_intervention(
    "interrupt")`` then ``stop()``; the run that resumes it links back with ``links=[resume_link(span)]``.
    ``set_input(value, ref=False)`` / ``set_output(value, ref=False)`` record content without a ref, for
    framework states too large to hash on every step; ``stop(result, ref=...)`` takes a ref already computed.
    A framework that fills a span only as it ends: ``set_input`` then, ``set_request(model, request)`` for a
    model call started before its model was known (renames it), ``set_usage(Usage(...))`` for usage stated
    apart from the reply; an error reported as data, without an exception: ``fail_with(error_type, text)``.
    Anything else an integration knows goes in ``attributes`` or on ``invocation.span``.

    A model call that only callbacks see (nothing runs inside it): :func:`start_chat` gives a
    :class:`ChatCall` whose span is written whole at its end, with an optional :class:`PromptHistory` so that
    an agent loop's history is exported once; :func:`chat_spec` makes what a model's calls share once (a
    :class:`ChatSpec`, whose ``start`` begins each call).

Orchestration
    ``invocation.events`` (an :class:`Events`) records spawn, delegate (and handoffs), message, decide, stop,
    human intervention and safety events on that invocation's span. Code running inside an agent invocation
    sees it as ``ot.current_agent()``; :func:`as_agent` gives that to code under a span the integration did
    not start. :func:`already_traced` tells an ``@ot.agent`` / ``@ot.tool`` function that the integration's
    own span traces its next call (one span, not two); :func:`declared_tool` / :func:`declared_agent` read
    what such a function declared.

Failures
    Instrumentation never breaks the program: guard your own code with :func:`failsafe` (logged once per
    site, swallowed); call the user's code outside it, so their exceptions pass through unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Link, SpanContext, SpanKind

from orchestrace import semconv as sc
from orchestrace.arguments import request_attributes
from orchestrace.chat import UNTRACED, ChatCall, ChatSpec, chat_call, chat_spec
from orchestrace.config import CaptureConfig, quiet
from orchestrace.content import content_ref
from orchestrace.context import (
    AGENT_KEY,
    SPAN_KEY,
    AgentFrame,
    TaskFrame,
    current_agent,
    current_task,
    traced_by_caller,
)
from orchestrace.declared import AGENT, TOOL, declared_spec
from orchestrace.errors import record_error
from orchestrace.events import Events
from orchestrace.failsafe import failsafe, log_once
from orchestrace.history import PromptHistory
from orchestrace.invocation import (
    NOTHING,
    AgentSpec,
    Invocation,
    LlmSpec,
    Spec,
    StepSpec,
    ToolSpec,
    WorkflowSpec,
)
from orchestrace.messages import PromptRefs, genai_message, message_ref, messages_ref, prompt_refs
from orchestrace.telemetry import DEFAULT, Telemetry, configured
from orchestrace.usage import Usage, extract_usage

__all__ = [
    "NOTHING",
    "SPAN_KEY",
    "AgentFrame",
    "CaptureConfig",
    "ChatCall",
    "ChatSpec",
    "Declared",
    "Events",
    "Invocation",
    "PromptHistory",
    "PromptRefs",
    "TaskFrame",
    "Telemetry",
    "Usage",
    "already_traced",
    "as_agent",
    "chat_spec",
    "configured",
    "content_ref",
    "current_agent",
    "current_task",
    "declared_agent",
    "declared_tool",
    "extract_usage",
    "failsafe",
    "genai_message",
    "log_once",
    "message_ref",
    "messages_ref",
    "prompt_refs",
    "quiet",
    "record_error",
    "resume_link",
    "start_agent",
    "start_chat",
    "start_model_call",
    "start_step",
    "start_tool",
    "start_workflow",
]

Declared = Spec  # what a decorated function declared: ``.name``, and ``.role`` / ``.trusted`` by kind
_P = ParamSpec("_P")
_UNTRACED = StepSpec("untraced")


def _untraced(where: str, exc: Exception, context: object) -> Invocation:
    """What a ``start_*`` returns on an internal failure (logged once): a non-recording invocation in the
    parent context, so the integration runs the work as usual, untraced."""
    log_once(where, exc)
    parent = context if isinstance(context, Context) else otel_context.get_current()
    return Invocation(_UNTRACED, INVALID_SPAN, parent, DEFAULT)


def _guarded(start: Callable[_P, Invocation]) -> Callable[_P, Invocation]:
    """A ``start_*`` that never raises (see :func:`_untraced`)."""
    where = f"{start.__module__}.{start.__qualname__}"

    @functools.wraps(start)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> Invocation:
        try:
            return start(*args, **kwargs)
        except Exception as exc:
            return _untraced(where, exc, kwargs.get("context"))

    return guarded


def _open(telemetry: Telemetry, spec: Spec, context: Context | None, value: Any,
          attributes: Mapping[str, Any] | None, links: Sequence[Link] | None,
          values: Mapping[str, object] | None, extra: Mapping[str, Any] | None = None) -> Invocation:
    parent = otel_context.get_current() if context is None else context
    name, kind, attrs = spec.describe((), {}, parent)
    if extra:
        attrs.update(extra)
    if attributes:
        attrs.update(attributes)
    return spec.open(telemetry, parent, name, kind, attrs, value, links, values)


@_guarded
def start_workflow(telemetry: Telemetry, name: str | None = None, *, input: Any = NOTHING,
                   episode: bool = False, episode_id: str | None = None, task_id: str | None = None,
                   topology: str | None = None, system: str | None = None, label: str | None = None,
                   context: Context | None = None, attributes: Mapping[str, Any] | None = None,
                   links: Sequence[Link] | None = None, values: Mapping[str, object] | None = None,
                   runner: bool = False) -> Invocation:
    """``invoke_workflow {label or name}``: a workflow run (``gen_ai.workflow.name`` = ``name``).
    ``runner=True``: a framework runner's entrypoint (one conversation turn the framework steers, as the
    OpenAI Agents SDK's ``Runner.run``), ``handle_conversation_turn`` under the latest GenAI conventions.

    ``episode=True`` makes it a rollout, as ``ot.task`` does (an episode id: ``episode_id``, else the
    enclosing episode's, else a new one; a task id: ``task_id``, else the episode id; the code inside belongs
    to that episode). Otherwise ``episode_id`` only names the episode the run is part of
    (``orchestrace.episode.id`` = ``gen_ai.conversation.id``). ``topology`` / ``system`` describe the team.
    ``input``: its ref, and its messages with capture on."""
    spec = WorkflowSpec(label or name, task_id, topology, system, name, episode_id, episode, runner)
    return _open(telemetry, spec, context, input, attributes, links, values)


@_guarded
def start_agent(telemetry: Telemetry, name: str, *, agent_id: str | None = None, role: str | None = None,
                input: Any = NOTHING, context: Context | None = None,
                attributes: Mapping[str, Any] | None = None, links: Sequence[Link] | None = None,
                values: Mapping[str, object] | None = None) -> Invocation:
    """``invoke_agent {name}``: one agent invocation, a fresh instance (``agent_id``: its id, default
    ``{name}-{12 hex}``), a child of the agent running in ``context`` (``orchestrace.agent.parent_id``);
    code in its context sees it as ``ot.current_agent()``. ``input``: its ref, and its messages with capture
    on."""
    return _open(telemetry, AgentSpec(name, role, agent_id), context, input, attributes, links, values)


@_guarded
def start_tool(telemetry: Telemetry, name: str, *, call_id: str | None = None, description: str | None = None,
               trusted: bool = False, arguments: Any = NOTHING, context: Context | None = None,
               attributes: Mapping[str, Any] | None = None, links: Sequence[Link] | None = None,
               values: Mapping[str, object] | None = None) -> Invocation:
    """``execute_tool {name}``: one tool call (``call_id``: the model's id for it, when there is one). Its
    result (``stop(result)``) is an untrusted tool result unless ``trusted``. ``arguments``: their ref, and
    their text with capture on."""
    spec = ToolSpec(name, description, trusted, call_id, new_call_id=False)
    return _open(telemetry, spec, context, arguments, attributes, links, values)


@_guarded
def start_model_call(telemetry: Telemetry, model: str | None = None, *, provider: str | None = None,
                     operation: str = sc.OP_CHAT, input: Any = NOTHING,
                     request: Mapping[str, Any] | None = None, context: Context | None = None,
                     attributes: Mapping[str, Any] | None = None, links: Sequence[Link] | None = None,
                     values: Mapping[str, object] | None = None,
                     prompt_history: PromptHistory | None = None) -> Invocation:
    """``{operation} {model}`` (CLIENT): one model call (a turn) whose span is current while it runs (wrap a
    client call with it). ``input``: the prompt as the call got it (messages of any common shape); its
    ref, and its messages with capture on. ``request``: the call's other arguments (sampling parameters
    become ``gen_ai.request.*``; the ``tools`` offered are recorded with capture on; anything else is
    ignored). End it with ``stop(reply)``: any reply shape of :mod:`orchestrace.replies` (usage, response
    model, finish reason, and the completion with capture on); streamed chunks through ``on_item``.
    ``prompt_history``: the exported histories its prompt may refer to (:mod:`orchestrace.history`; default
    the process's)."""
    spec = LlmSpec(model, provider, operation=operation, prompt_history=prompt_history)
    extra = request_attributes(request, telemetry.capture.capture_content) if request else None
    return _open(telemetry, spec, context, input, attributes, links, values, extra)


def start_step(telemetry: Telemetry, name: str, *, operation: str = sc.OPERATION_NODE,
               context: Context | None = None, attributes: Mapping[str, Any] | None = None,
               links: Sequence[Link] | None = None, values: Mapping[str, object] | None = None,
               ) -> Invocation:
    """``{name}``: a step of the orchestration that is not an agent (a graph node; ``operation``:
    ``orchestrace.operation``, e.g. ``tool_node``). An actor of the trace: its events are its decisions;
    ``stop(output)`` records the output's ref (a step's states are not captured as content)."""
    # Every node execution of a graph starts here: guarded inline and without ``describe`` (a step's span
    # is its name and two fixed attributes), calls fewer than the other kinds' path.
    try:
        spec = _step_spec(name, operation)
        parent = otel_context.get_current() if context is None else context
        attrs = {**spec.fixed_attributes, **attributes} if attributes else {**spec.fixed_attributes}
        return spec.open(telemetry, parent, name, SpanKind.INTERNAL, attrs, NOTHING, links, values)
    except Exception as exc:
        return _untraced(_START_STEP, exc, context)


_START_STEP = f"{__name__}.start_step"


@functools.lru_cache(maxsize=1024)
def _step_spec(name: str, operation: str) -> StepSpec:
    """A step's spec (it holds only these two): made once per node of a graph, not per execution."""
    return StepSpec(name, operation)


@failsafe(default=UNTRACED)
def start_chat(telemetry: Telemetry, messages: Sequence[Any], *, model: str | None = None,
               label: str | None = None, provider: str | None = None, operation: str = sc.OP_CHAT,
               request: Mapping[str, Any] | None = None, context: Context | None = None,
               history: PromptHistory | None = None) -> ChatCall:
    """A model call seen through callbacks (see :mod:`orchestrace.chat`): ``{operation} {label or model}``,
    written whole when it ends (``ChatCall.stop(message, usage=...)`` / ``fail(exc)``). ``messages``: the
    prompt as chat messages (any common shape); ``request``: sampling parameters and tools, as for
    :func:`start_model_call`; ``history``: export an agent loop's history once. On an internal failure (logged
    once) the call runs untraced: its ``stop`` and ``fail`` do nothing."""
    parent = otel_context.get_current() if context is None else context
    return chat_call(telemetry, messages, parent, model=model, label=label, provider=provider,
                     operation=operation, request=request, history=history)


def resume_link(span_context: SpanContext) -> Link:
    """The link of a run that resumes one paused for a human, to the span that asked."""
    return Link(span_context, {sc.ORCH_LINK_TYPE: sc.LINK_RESUME_OF})


def as_agent(name: str, agent_id: str, role: str | None = None) -> dict[str, object]:
    """Context values (``values=`` of a ``start_*``, or ``otel_context.set_value``) under which code runs as
    the agent instance ``agent_id`` (``ot.current_agent()``, ``ot.message`` / ``ot.spawn`` senders, the parent
    of ``@ot.agent`` calls), for code under a span that is not an ``invoke_agent`` one."""
    return {AGENT_KEY: AgentFrame(name, agent_id, role)}


def declared_agent(functions: Iterable[Any]) -> AgentSpec | None:
    """What the first ``@ot.agent`` function among ``functions`` declared (``.name``, ``.role``)."""
    spec = declared_spec(functions, AGENT)
    return spec if isinstance(spec, AgentSpec) else None


def declared_tool(functions: Iterable[Any]) -> ToolSpec | None:
    """What the first ``@ot.tool`` function among ``functions`` declared (``.name``, ``.trusted``,
    ``.description``)."""
    spec = declared_spec(functions, TOOL)
    return spec if isinstance(spec, ToolSpec) else None


def already_traced(declared: Declared | None) -> dict[str, object]:
    """Context values telling the decorated function that ``declared`` (:func:`declared_agent` /
    :func:`declared_tool`) that its next call in this context is traced by the integration's own span: it
    adds no second one (calls it makes itself, recursion, are traced as usual). Empty for ``None``."""
    return traced_by_caller(declared) if declared is not None else {}

