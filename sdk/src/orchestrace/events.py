"""Orchestration events recorded on one span: what ``ot.spawn`` / ``ot.delegate`` / ... record on the current
span, and what an integration records on the span of the invocation that decided (``invocation.events``).

Every method is a no-op on a span that does not record and never raises. Agents may be named by a string or
by the ``@ot.agent`` function itself. Content given to an event always gets its ``sha256:`` ref; its text
only when the capture settings allow. Event encodings are described in :mod:`orchestrace.semconv`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import Span

from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig
from orchestrace.content import capture_value, content_ref
from orchestrace.context import AgentFrame
from orchestrace.declared import declared_agent_of
from orchestrace.failsafe import failsafe, log_once

Attributes = dict[str, Any]
AgentRef = Any  # a name, an @ot.agent-decorated callable, or an instance handle (``ot.current_agent()``)


def agent_name_role(agent: AgentRef) -> tuple[str, str | None]:
    """The name (and declared role) of an agent given by name, as its ``@ot.agent`` function or by an
    instance handle."""
    if isinstance(agent, str):
        return agent, None
    if isinstance(agent, AgentFrame):
        return agent.name, agent.role
    declared = declared_agent_of(agent)
    if declared is not None:
        return declared.name, declared.role
    return str(getattr(agent, "__name__", agent)), None


def _put(attributes: Attributes, key: str, value: Any) -> None:
    if value is not None:
        attributes[key] = value


class Events:
    """The orchestration events of one span, with the capture settings that decide their content."""

    __slots__ = ("capture", "span")

    def __init__(self, span: Span, capture: CaptureConfig) -> None:
        self.span = span
        self.capture = capture

    def _emit(self, name: str, attributes: Attributes) -> None:
        # Every caller checked that the span records before building the attributes.
        self.span.add_event(name, attributes)

    def _content(self, attributes: Attributes, content: Any, ref: str | None = None) -> None:
        """The content's ref always (``ref``: computed by the caller already); the (redacted, truncated)
        content itself only with capture on."""
        if content is None:
            return
        attributes[sc.ORCH_CONTENT_REF] = ref or content_ref(content)
        if self.capture.capture_content:  # checked here too: a fan-out spawns many, most with capture off
            captured = capture_value(content, self.capture)
            if captured is not None:
                attributes.update(captured.attributes(sc.ORCH_CONTENT))

    @staticmethod
    def _target(agent: AgentRef, agent_id: str | None, role: str | None, reason: str | None) -> Attributes:
        name, declared_role = agent_name_role(agent)
        attributes: Attributes = {sc.ORCH_TARGET_AGENT: name}
        _put(attributes, sc.ORCH_TARGET_ID, agent_id)
        _put(attributes, sc.ORCH_TARGET_ROLE, role or declared_role)
        _put(attributes, sc.ORCH_REASON, reason)
        return attributes

    # spawn, decide and stop are what an integration records at every route: guarded inline rather than by
    # @failsafe, one call fewer each.
    def spawn(self, agent: AgentRef, *, agent_id: str | None = None, role: str | None = None,
              reason: str | None = None, content: Any = None, ref: str | None = None) -> None:
        """A new agent instance is created (matched to that agent's next span by the collector);
        ``content``: what it is given (e.g. a fan-out's payload), ``ref``: its content ref when the caller
        computed it already."""
        try:
            if self.span.is_recording():
                if type(agent) is str and agent_id is None and role is None:  # an integration's: no lookups
                    attributes: Attributes = {sc.ORCH_TARGET_AGENT: agent}
                    if reason is not None:
                        attributes[sc.ORCH_REASON] = reason
                else:
                    attributes = self._target(agent, agent_id, role, reason)
                self._content(attributes, content, ref)
                self.span.add_event(sc.EVENT_SPAWN, attributes)
        except Exception as exc:
            log_once(_SPAWN, exc)

    @failsafe(default=None)
    def delegate(self, agent: AgentRef, *, agent_id: str | None = None, role: str | None = None,
                 reason: str | None = None, handoff: bool = False, sender: AgentRef | None = None,
                 content: Any = None, options: Sequence[str] | None = None) -> None:
        """Work is handed to ``agent``; ``handoff=True`` for a transfer of control without return;
        ``sender``: who hands off, when not the span's own agent (a handoff then names both ends,
        ``orchestrace.from`` and ``orchestrace.to``); ``content``: the work handed over (as for a spawn);
        ``options``: whom else it could have handed to (as :meth:`decide` records them)."""
        if self.span.is_recording():
            attributes = self._target(agent, agent_id, role, reason)
            self._content(attributes, content)
            if options is not None:
                attributes[sc.ORCH_DECISION_OPTIONS] = [str(option) for option in options]
            if handoff:
                attributes[sc.ORCH_HANDOFF] = True
            if sender is not None:
                attributes[sc.ORCH_FROM] = agent_name_role(sender)[0]
                if handoff:
                    attributes[sc.ORCH_TO] = attributes[sc.ORCH_TARGET_AGENT]
            self._emit(sc.EVENT_DELEGATE, attributes)

    @failsafe(default=None)
    def message(self, to: AgentRef, content: Any = None, *, sender: AgentRef | None = None) -> None:
        """A message to ``to``. ``orchestrace.from`` is only set for an explicit ``sender``: otherwise the
        sender is the agent whose span carries the event, which stays exact when several instances share a
        name."""
        if self.span.is_recording():
            attributes: Attributes = {sc.ORCH_TO: agent_name_role(to)[0]}
            if isinstance(to, AgentFrame):
                attributes[sc.ORCH_TARGET_ID] = to.id  # that instance, not the latest of its name
            if sender is not None:
                attributes[sc.ORCH_FROM] = agent_name_role(sender)[0]
            self._content(attributes, content)
            self._emit(sc.EVENT_MESSAGE, attributes)

    def decide(self, kind: str, *, target: AgentRef | None = None, reason: str | None = None,
               options: Sequence[str] | None = None) -> None:
        """An orchestration decision: one of ``semconv.DECISION_KINDS`` (spawn, delegate, communicate,
        aggregate, stop) or a free label, with the chosen target and the options considered."""
        try:
            if self.span.is_recording():
                attributes: Attributes = {sc.ORCH_DECISION_KIND: str(kind)}
                if target is not None:  # a name (an integration's routes) is the common case: no lookup
                    name = target if type(target) is str else agent_name_role(target)[0]
                    attributes[sc.ORCH_TARGET_AGENT] = name
                if reason is not None:
                    attributes[sc.ORCH_REASON] = reason
                if options is not None:
                    attributes[sc.ORCH_DECISION_OPTIONS] = [str(option) for option in options]
                self.span.add_event(sc.EVENT_DECISION, attributes)
        except Exception as exc:
            log_once(_DECIDE, exc)

    def stop(self, reason: str | None = None, *, sender: AgentRef | None = None,
             options: Sequence[str] | None = None) -> None:
        """The decision to stop the run; ``sender``: who decided, when not the span's own agent;
        ``options``: the alternatives it had."""
        try:
            if self.span.is_recording():
                attributes: Attributes = {}
                if reason is not None:
                    attributes[sc.ORCH_REASON] = reason
                if options is not None:
                    attributes[sc.ORCH_DECISION_OPTIONS] = [str(option) for option in options]
                if sender is not None:
                    attributes[sc.ORCH_FROM] = sender if type(sender) is str else agent_name_role(sender)[0]
                self.span.add_event(sc.EVENT_STOP, attributes)
        except Exception as exc:
            log_once(_STOP, exc)

    @failsafe(default=None)
    def human_intervention(self, kind: str = "feedback", *, actor: str | None = None, content: Any = None,
                           reason: str | None = None) -> None:
        """A human stepped in: ``interrupt`` (also ``interrupt_before`` / ``interrupt_after`` for a pause at
        a breakpoint), ``resume``, ``approve``, ``edit``, ``reject`` or ``feedback``."""
        if self.span.is_recording():
            attributes: Attributes = {sc.ORCH_HUMAN_KIND: kind}
            _put(attributes, sc.ORCH_HUMAN_ACTOR, actor)
            _put(attributes, sc.ORCH_REASON, reason)
            self._content(attributes, content)
            self._emit(sc.EVENT_HUMAN_INTERVENTION, attributes)

    @failsafe(default=None)
    def safety_event(self, category: str, *, severity: str | None = None, action: str | None = None,
                     source: str | None = None, target: AgentRef | None = None) -> None:
        """A safety finding (e.g. ``prompt_injection``, a tripped guardrail), its severity, what was done,
        where it came from (a tool call id or span id) and the agent it concerns (a name, an ``@ot.agent``
        function or an instance handle)."""
        if self.span.is_recording():
            attributes: Attributes = {sc.ORCH_SAFETY_CATEGORY: category}
            _put(attributes, sc.ORCH_SAFETY_SEVERITY, severity)
            _put(attributes, sc.ORCH_SAFETY_ACTION, action)
            _put(attributes, sc.ORCH_SAFETY_SOURCE, source)
            if target is not None:
                attributes[sc.ORCH_TARGET_AGENT] = agent_name_role(target)[0]
                if isinstance(target, AgentFrame):
                    attributes[sc.ORCH_TARGET_ID] = target.id  # that instance, not the latest of its name
            self._emit(sc.EVENT_SAFETY, attributes)


_SPAWN = f"{__name__}.Events.spawn"
_DECIDE = f"{__name__}.Events.decide"
_STOP = f"{__name__}.Events.stop"
