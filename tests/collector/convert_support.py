"""Builders for conversion tests: spans written the way instrumentations write them, times in seconds.

(Helpers only; the tests are in the ``test_convert*`` modules.)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrace import semconv as sc
from orchestrace_collector.spans import Span, SpanEvent, SpanLink

GOLDEN = Path(__file__).parent / "golden"
T0_NS = 1_700_000_000_000_000_000


def ns(t: float) -> int:
    return T0_NS + round(t * 1e9)


class Spans:
    """Makes spans of one OTel trace with sequential span ids."""

    def __init__(self, trace_id: str = "ab" * 16, *, resource: dict[str, Any] | None = None) -> None:
        self.trace_id = trace_id
        self.resource = resource or {"service.name": "test-app"}
        self.spans: list[Span] = []

    def span(
        self,
        name: str,
        start: float,
        end: float,
        parent: Span | None = None,
        attrs: dict[str, Any] | None = None,
        events: list[SpanEvent] | None = None,
        links: list[SpanLink] | None = None,
        span_id: str | None = None,
    ) -> Span:
        span = Span(
            trace_id=self.trace_id,
            span_id=span_id or f"{len(self.spans) + 1:016x}",
            parent_span_id=parent.span_id if parent is not None else None,
            name=name,
            start_ns=ns(start),
            end_ns=ns(end),
            attributes=dict(attrs or {}),
            events=list(events or []),
            links=list(links or []),
            resource=self.resource,
        )
        self.spans.append(span)
        return span

    def workflow(self, name: str, start: float, end: float, parent: Span | None = None, **attrs: Any) -> Span:
        return self.span(
            f"invoke_workflow {name}",
            start,
            end,
            parent,
            {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.GEN_AI_WORKFLOW_NAME: name, **attrs},
        )

    def agent(
        self,
        name: str,
        start: float,
        end: float,
        parent: Span | None = None,
        *,
        role: str | None = None,
        events: list[SpanEvent] | None = None,
        **attrs: Any,
    ) -> Span:
        extra = {sc.ORCH_AGENT_ROLE: role} if role else {}
        return self.span(
            f"invoke_agent {name}",
            start,
            end,
            parent,
            {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: name, **extra, **attrs},
            events,
        )

    def node(
        self,
        name: str,
        start: float,
        end: float,
        parent: Span | None = None,
        events: list[SpanEvent] | None = None,
        **attrs: Any,
    ) -> Span:
        return self.span(
            name,
            start,
            end,
            parent,
            {sc.ORCH_OPERATION: sc.OPERATION_NODE, sc.ORCH_NODE_NAME: name, **attrs},
            events,
        )

    def tool(self, name: str, start: float, end: float, parent: Span | None = None, **attrs: Any) -> Span:
        return self.span(
            f"execute_tool {name}",
            start,
            end,
            parent,
            {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: name, **attrs},
        )

    def chat(
        self,
        start: float,
        end: float,
        parent: Span | None = None,
        *,
        model: str = "fake-model",
        tokens: tuple[int, int] = (10, 5),
        **attrs: Any,
    ) -> Span:
        return self.span(
            f"chat {model}",
            start,
            end,
            parent,
            {
                sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                sc.GEN_AI_REQUEST_MODEL: model,
                sc.GEN_AI_USAGE_INPUT_TOKENS: tokens[0],
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: tokens[1],
                **attrs,
            },
        )


def event(name: str, t: float, **attrs: Any) -> SpanEvent:
    return SpanEvent(name=name, time_ns=ns(t), attributes=attrs)


def traces_of(spans: Iterable[Span]) -> list[list[Span]]:
    """``spans`` by OTel trace, in order of first appearance."""
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    return list(traces.values())
