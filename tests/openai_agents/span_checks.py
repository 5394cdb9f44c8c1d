"""Finished spans of one test, and the written trace they convert to."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace_collector.convert import Episode, convert_episode
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.validate import validate_trace


class Spans:
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
        found = self.parent(span)
        return found.name if found is not None else None

    def events(self, span: ReadableSpan, name: str) -> list[dict[str, Any]]:
        return [dict(e.attributes or {}) for e in span.events if e.name == name]

    def convert(self) -> tuple[dict[str, Any], Episode]:
        """The written trace of every span (one episode), after checking that it validates."""
        episode = convert_episode([span_from_readable(s) for s in self.all])
        written = json.loads(json.dumps(episode.trace.to_json_dict()))
        assert validate_trace(written) == [], validate_trace(written)
        return written, episode


def of_type(written: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [e for e in written["events"] if e["type"] == type_]


def edges_of(written: dict[str, Any], type_: str) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in written["edges"] if e["type"] == type_}
