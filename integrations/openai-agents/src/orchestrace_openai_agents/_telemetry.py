"""Every use of the orchestrace SDK by this integration, through its public API only
(``orchestrace.instrumentation``): the spans and orchestration events of one instrumentation.

An Agents SDK span is filled as it ends, so a tool's arguments, a model call's model, prompt, request and
usage are recorded at its end (``set_input``, ``set_request``, ``set_usage``), and an error the Agents SDK
reports as data (``SpanError``: a message and data, no exception) ends its invocation with ``fail_with``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from orchestrace.instrumentation import (
    Invocation,
    Telemetry,
    Usage,
    extract_usage,
    failsafe,
    log_once,
    start_agent,
    start_model_call,
    start_tool,
    start_workflow,
)

__all__ = ["Invocation", "Recorder", "failsafe", "log_once"]

#: ``orchestrace.reason`` of the delegate a handoff records, and of the spawn of an agent used as a tool.
REASON_HANDOFF = "handoff"
REASON_AGENT_AS_TOOL = "agent_as_tool"
#: ``orchestrace.safety.action`` of a guardrail whose tripwire stopped the run.
ACTION_TRIPWIRE = "tripwire_triggered"


class Recorder:
    """The spans and events of one instrumentation, recorded with ``telemetry`` (provider and capture)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    @staticmethod
    def root() -> Context:
        """The parent of a run's first span: the caller's context."""
        return otel_context.get_current()

    def workflow(self, name: str, parent: Context) -> Invocation:
        """``invoke_workflow {name}``: one Agents SDK trace, one episode (or part of an enclosing task's); a
        runner's entrypoint, so ``handle_conversation_turn {name}`` under the latest GenAI conventions."""
        return start_workflow(self.telemetry, name, episode=True, context=parent, runner=True)

    def agent(self, name: str, parent: Context) -> Invocation:
        """``invoke_agent {name}``: one agent instance."""
        return start_agent(self.telemetry, name, context=parent)

    def tool(self, name: str, parent: Context) -> Invocation:
        """``execute_tool {name}``; its arguments come with its end (:meth:`tool_arguments`)."""
        return start_tool(self.telemetry, name, context=parent)

    def model_call(self, parent: Context) -> Invocation:
        """``chat``: one model call; its request and reply come at its end (:meth:`model_request`)."""
        return start_model_call(self.telemetry, context=parent)

    @staticmethod
    def tool_arguments(invocation: Invocation, arguments: str | None) -> None:
        if arguments is not None:
            invocation.set_input(arguments)

    @staticmethod
    def model_request(invocation: Invocation, model: str | None, messages: Sequence[Any] | None,
                      request: Mapping[str, Any], usage: Usage | None) -> None:
        """The call's model, prompt (OpenAI chat messages), sampling parameters and tools offered
        (``request["tools"]``), and usage when the Agents SDK stated it apart from the reply."""
        invocation.set_request(model, request)
        if messages is not None:
            invocation.set_input(list(messages))
        if usage is not None:
            invocation.set_usage(usage)

    @staticmethod
    def shown_input(invocation: Invocation, messages: Sequence[Any]) -> None:
        """An agent's or a run's input (chat messages), as content only: the Agents SDK states none."""
        invocation.set_input(list(messages), ref=False)

    @staticmethod
    def shown_output(invocation: Invocation, reply: Any) -> None:
        """An agent's or a run's output (a model's reply), as content only."""
        invocation.set_output(reply, ref=False)

    @staticmethod
    def finish(invocation: Invocation, result: Any = None) -> None:
        invocation.stop(result)

    @staticmethod
    def fail(invocation: Invocation, message: str, data: Mapping[str, Any] | None,
             exc: BaseException | None) -> None:
        """The Agents SDK recorded an error on the span (``message``, ``data``); ``exc``: the exception in
        flight as it ended, when there is one (the user's own when the SDK wrapped it)."""
        if exc is not None:
            invocation.fail(exc.__cause__ or exc)
            return
        detail = (data or {}).get("error")
        invocation.fail_with(message, f"{message}: {detail}" if detail else message)

    @staticmethod
    def end(invocation: Invocation) -> None:
        """End a span whose Agents SDK span never ended (its run was abandoned)."""
        invocation.close()

    # --- orchestration events, on the span of the actor (or tool) they belong to ---------------------------
    @staticmethod
    def handoff(actor: Invocation, source: str | None, target: str) -> None:
        actor.events.delegate(target, reason=REASON_HANDOFF, handoff=True, sender=source or None)

    @staticmethod
    def spawn(caller: Invocation, target: str) -> None:
        caller.events.spawn(target, reason=REASON_AGENT_AS_TOOL)

    @staticmethod
    def tripwire(actor: Invocation, guardrail: str) -> None:
        actor.events.safety_event(guardrail, action=ACTION_TRIPWIRE)


def usage_of(value: Any) -> Usage | None:
    """The Agents SDK's usage (a span's ``{"input_tokens", "output_tokens", "input_tokens_details":
    {"cached_tokens"}, ...}``, a ``ModelResponse``'s ``Usage``) as the SDK's ``Usage``, read by the SDK's one
    usage reader: the cached part of the input is the cache-read count, as for every provider."""
    return extract_usage({"usage": value}) if value is not None else None
