"""Orchestration calls: span events on the current span (and ``aggregate``, a span of its own).

Every call is a no-op outside a recording span and never raises. Agents may be named by a string or by the
``@ot.agent`` function itself. Event encodings are described in :mod:`orchestrace.semconv`.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import threading
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode

from orchestrace import results
from orchestrace import semconv as sc
from orchestrace import telemetry as _telemetry
from orchestrace.content import content_ref
from orchestrace.context import MODEL_CALL_KEY, AgentFrame, current_agent
from orchestrace.errors import record_error
from orchestrace.events import AgentRef, Events, agent_name_role
from orchestrace.failsafe import failsafe, logger
from orchestrace.invocation import Invocation, set_usage_on
from orchestrace.messages import capture_messages, output_messages
from orchestrace.usage import Usage

Attributes = dict[str, Any]


def _recording_span() -> Span | None:
    span = trace.get_current_span()
    return span if span.is_recording() else None


def _events() -> Events | None:
    """The events of the current span, with the capture settings of the invocation running here."""
    span = _recording_span()
    return Events(span, _telemetry.current().capture) if span is not None else None


def _put(attributes: Attributes, key: str, value: Any) -> None:
    if value is not None:
        attributes[key] = value


@failsafe(default=None)
def spawn(agent: AgentRef, *, agent_id: str | None = None, role: str | None = None,
          reason: str | None = None, content: Any = None) -> None:
    """The current agent creates a new agent instance (matched to that agent's next span by the collector).

    ``content``: what the instance is given (a fan-out's payload). The collector matches the spawn to the
    instance whose input it is (an ``@ot.agent`` called with it as its one argument) and numbers a fan-out's
    instances in the order of their spawns, whichever thread started first."""
    events = _events()
    if events is not None:
        events.spawn(agent, agent_id=agent_id, role=role, reason=reason, content=content)


@failsafe(default=None)
def delegate(agent: AgentRef, *, agent_id: str | None = None, role: str | None = None,
             reason: str | None = None, handoff: bool = False, content: Any = None,
             options: Sequence[str] | None = None) -> None:
    """The current agent hands work to ``agent``; ``handoff=True`` for a transfer of control without return.

    Calling an ``@ot.agent`` function is already a delegation with a return: this call adds the reason.
    ``content``: the work handed over, paired with the instance whose input it is, as for :func:`spawn`;
    ``options``: the agents it could have handed to, as ``ot.decide`` records them.
    """
    events = _events()
    if events is not None:
        events.delegate(agent, agent_id=agent_id, role=role, reason=reason, handoff=handoff, content=content,
                        options=options)


@failsafe(default=None)
def message(to: AgentRef, content: Any = None, *, sender: AgentRef | None = None) -> None:
    """A message from the current agent (or ``sender``) to ``to``.

    ``orchestrace.from`` is only set for an explicit ``sender``: otherwise the sender is the agent whose span
    carries the event, which stays exact when several instances share a name.
    """
    events = _events()
    if events is not None:
        events.message(to, content, sender=sender)


@failsafe(default=None)
def decide(kind: str, *, target: AgentRef | None = None, reason: str | None = None,
           options: Sequence[str] | None = None) -> None:
    """An orchestration decision: one of ``semconv.DECISION_KINDS`` (spawn, delegate, communicate,
    aggregate, stop) or a free label, with the chosen target and the options considered."""
    events = _events()
    if events is not None:
        events.decide(kind, target=target, reason=reason, options=options)


@failsafe(default=None)
def stop(reason: str | None = None, *, options: Sequence[str] | None = None) -> None:
    """The decision to stop the run; ``options``: what else it could have done (for example the agents it
    could have delegated to), as ``ot.decide`` records them."""
    events = _events()
    if events is not None:
        events.stop(reason, options=options)


@failsafe(default=None)
def human_intervention(kind: str = "feedback", *, actor: str | None = None, content: Any = None) -> None:
    """A human stepped in: ``interrupt``, ``resume``, ``approve``, ``edit``, ``reject`` or ``feedback``."""
    events = _events()
    if events is not None:
        events.human_intervention(kind, actor=actor, content=content)


@failsafe(default=None)
def safety_event(category: str, *, severity: str | None = None, action: str | None = None,
                 source: str | None = None, target: AgentRef | None = None) -> None:
    """A safety finding (e.g. ``prompt_injection``), its severity, what was done, where it came from (a
    tool call id or span id) and the agent it concerns (a name, an ``@ot.agent`` function or a handle)."""
    events = _events()
    if events is not None:
        events.safety_event(category, severity=severity, action=action, source=source, target=target)


_rejected: dict[str, int] = {}
_rejected_lock = threading.Lock()


def rejected_rewards() -> dict[str, int]:
    """How many ``ot.reward`` calls this process refused, by reason (``semconv.REWARD_REJECTIONS``)."""
    with _rejected_lock:
        return dict(_rejected)


def _reject(reason: str, detail: str) -> None:
    with _rejected_lock:
        first = reason not in _rejected
        _rejected[reason] = _rejected.get(reason, 0) + 1
    if first:  # once per reason: a reward in a hot loop must not flood the logs
        logger.warning("orchestrace: reward rejected (%s): %s; further %s rejections are counted, not logged",
                       reason, detail, reason)


def _reward_problem(value: object, family: str | None, unit: str | None) -> tuple[str, str] | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "not_a_number", f"value {value!r} is not a number"
    if not math.isfinite(float(value)):
        return "not_finite", f"value {value!r} is not finite"
    if family is not None and family not in sc.REWARD_FAMILIES:
        return "unknown_family", f"family {family!r} is not one of {', '.join(sc.REWARD_FAMILIES)}"
    if unit is not None and unit not in sc.REWARD_UNITS:
        return "unknown_unit", f"unit {unit!r} is not one of {', '.join(sc.REWARD_UNITS)}"
    return None


def _target_name(target: object) -> str:
    """An instance handle (``ot.current_agent()``) names its activation by id; anything else by name."""
    if isinstance(target, AgentFrame):
        return target.id
    if isinstance(target, str):
        return target
    return agent_name_role(target)[0]


@failsafe(default=None)
def reward(value: float, *, name: str | None = None, family: str | None = None, unit: str | None = None,
           target: AgentRef | AgentFrame | None = None, label: str | None = None,
           explanation: str | None = None) -> None:
    """A reward, as a GenAI ``gen_ai.evaluation.result`` event.

    ``unit`` says what it is credited to and ``family`` what kind it is (the table in
    ``semconv.REWARD_UNIT_FAMILY`` / ``REWARD_FAMILY_UNIT``; each defaults from the other, both to ``team``;
    ``shared`` and ``outcome`` are other names of ``team``). The team-unit families (``team``, ``verifier``,
    ``hybrid``) add up to the episode's outcome. ``name`` keeps rewards of one family apart (the key is
    ``family:name``). ``target`` picks the unit's instance: an agent name (the activation that last finished
    before this call), an agent id or ``ot.current_agent()`` handle, a role, a tool name or call id, a model
    call's span id; with a target and neither family nor unit, the unit is the target's (an agent's reward,
    never the team's). A value that is not a finite number, an unknown family or unit, or a call outside any
    episode is rejected: logged once per reason, counted (``rejected_rewards()``, and
    ``metrics.rejected_rewards`` in the trace), never credited.
    """
    span = _recording_span()
    if span is None:
        _reject("outside_episode", "ot.reward called outside any traced task or agent")
        return
    family = sc.REWARD_FAMILY_ALIASES.get(family, family) if family is not None else None
    attributes: Attributes = {sc.GEN_AI_EVALUATION_NAME: name or family or "reward"}
    problem = _reward_problem(value, family, unit)
    if problem is not None:
        _reject(*problem)
        attributes[sc.ORCH_REWARD_REJECTED] = problem[0]
    else:
        attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] = float(value)
    _put(attributes, sc.GEN_AI_EVALUATION_SCORE_LABEL, label)
    _put(attributes, sc.GEN_AI_EVALUATION_EXPLANATION, explanation)
    _put(attributes, sc.ORCH_REWARD_FAMILY, family)
    _put(attributes, sc.ORCH_REWARD_UNIT, unit)
    if target is not None:
        attributes[sc.ORCH_REWARD_TARGET] = _target_name(target)
    span.add_event(sc.EVENT_EVALUATION_RESULT, attributes)


@failsafe(default=None)
def set_usage(input_tokens: int | None = None, output_tokens: int | None = None, *,
              cache_read_input_tokens: int | None = None, cache_creation_input_tokens: int | None = None,
              ) -> None:
    """Token usage of the current ``@ot.llm`` call (wins over what its result says). ``input_tokens`` is the
    whole prompt; the cached counts are the parts of it read from and written to the prompt cache."""
    invocation = otel_context.get_value(MODEL_CALL_KEY)
    if isinstance(invocation, Invocation):
        invocation.explicit_usage = True
        span: Span | None = invocation.span
    else:
        span = _recording_span()
        if not sc.gen_ai_names().cache_counts_outside_model_calls:
            cache_read_input_tokens = cache_creation_input_tokens = None
    if span is not None:
        set_usage_on(span, Usage(input_tokens, output_tokens, cache_read_input_tokens,
                                 cache_creation_input_tokens))


# --- aggregate ----------------------------------------------------------------------------------------------
def _links(inputs: Iterable[Any]) -> list[Link]:
    links: list[Link] = []
    seen: set[tuple[int, int]] = set()
    attributes = {sc.ORCH_LINK_TYPE: sc.LINK_AGGREGATE_INPUT}
    for value in inputs:
        if isinstance(value, Span):
            value = value.get_span_context()
        candidates = [value] if isinstance(value, SpanContext) else results.producers(content_ref(value))
        # Newest first: an agent passing on its tool's result returned it last and is the one that handed it
        # over. Equal values from several producers: link the next producer not linked yet.
        for candidate in reversed(candidates):
            key = (candidate.trace_id, candidate.span_id)
            if candidate.is_valid and key not in seen:
                seen.add(key)
                links.append(Link(candidate, attributes))
                break
    return links


class Aggregation:
    """The merge in progress: ``set_result(value)`` records what it produced."""

    def __init__(self, span: Span | None) -> None:
        self.span = span

    @failsafe(default=None)
    def set_result(self, value: Any) -> None:
        if self.span is None or not self.span.is_recording() or value is None:
            return
        ref = content_ref(value)
        self.span.set_attribute(sc.ORCH_OUTPUT_REF, ref)
        results.record(ref, self.span.get_span_context())
        capture = _telemetry.current().capture
        captured = (capture_messages(output_messages(value), capture)
                    if capture.capture_content else None)
        if captured is not None:
            self.span.set_attribute(sc.OUTPUT_VALUE, captured.text)


class aggregate(contextlib.AbstractContextManager["Aggregation"],  # lower case: used like a function
                contextlib.AbstractAsyncContextManager["Aggregation"]):
    """``with ot.aggregate(results) as merge:``: an ``aggregate {agent}`` span linked to the spans that
    produced ``results`` (values returned by ``@ot.agent`` / ``@ot.tool`` calls, or ``SpanContext`` /
    ``Span`` objects). Values nobody is known to have produced are simply not linked."""

    def __init__(self, inputs: Iterable[Any] = (), *, agent: AgentRef | None = None,
                 reason: str | None = None) -> None:
        self._inputs = inputs
        self._agent = agent
        self._reason = reason
        # Per context, so one instance can be entered by concurrent asyncio tasks or threads.
        self._state: ContextVar[tuple[tuple[Span | None, object], ...]] = ContextVar(
            "orchestrace_aggregate", default=())

    @failsafe(default=None)
    def _start(self) -> tuple[Span, object] | None:
        parent = _recording_span()
        if parent is None:
            return None
        inputs = list(self._inputs)
        if self._agent is not None:
            label = agent_name_role(self._agent)[0]
        else:
            frame = current_agent()
            label = frame.name if frame else sc.OPERATION_AGGREGATE
        attributes: Attributes = {sc.ORCH_OPERATION: sc.OPERATION_AGGREGATE,
                                  sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_CHAIN,
                                  sc.ORCH_INPUT_REF: content_ref(inputs)}
        _put(attributes, sc.ORCH_REASON, self._reason)
        telemetry = _telemetry.current()
        span = telemetry.start_span(f"{sc.OPERATION_AGGREGATE} {label}", otel_context.get_current(),
                                    attributes=attributes, links=_links(inputs))
        return span, otel_context.attach(trace.set_span_in_context(span))

    def __enter__(self) -> Aggregation:
        started = self._start()
        self._state.set((*self._state.get(), started or (None, None)))
        return Aggregation(started[0] if started else None)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        state = self._state.get()
        if not state:
            return
        self._state.set(state[:-1])
        span, token = state[-1]
        if span is not None:
            self._end(span, token, exc)

    @failsafe(default=None)
    def _end(self, span: Span, token: object, exc: BaseException | None) -> None:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
            if exc is not None:
                record_error(span, exc)
            else:
                span.set_status(Status(StatusCode.OK))
        finally:
            span.end()

    async def __aenter__(self) -> Aggregation:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, traceback)

