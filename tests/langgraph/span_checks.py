"""Finished spans of one test, with the lookups the parent checks use."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Spans:
    """Finished spans of one test, with lookups used by the parent checks."""

    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.provider = provider

    @property
    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    @property
    def ours(self) -> list[ReadableSpan]:
        return [s for s in self.all if s.instrumentation_scope is not None
                and s.instrumentation_scope.name == "orchestrace_langgraph"]

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.all])
        return found[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        for s in self.all:
            if s.context.span_id == span.parent.span_id:
                return s
        raise AssertionError(f"parent of {span.name} not exported")

    def parent_name(self, span: ReadableSpan) -> str | None:
        p = self.parent(span)
        return p.name if p is not None else None

    def events(self, span: ReadableSpan, name: str) -> list[dict]:
        return [dict(e.attributes or {}) for e in span.events if e.name == name]

    def clear(self) -> None:
        self.exporter.clear()
