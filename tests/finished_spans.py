"""Finished spans of one test on an in-memory provider, with the lookups parent checks use (every
integration's tests)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def in_memory() -> tuple[InMemorySpanExporter, TracerProvider]:
    """A provider that hands every span, as it ends, to an in-memory exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


class FinishedSpans:
    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.provider = provider

    @property
    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

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

    def events(self, span: ReadableSpan, name: str) -> list[dict[str, Any]]:
        return [dict(e.attributes or {}) for e in span.events if e.name == name]

    def clear(self) -> None:
        self.exporter.clear()
