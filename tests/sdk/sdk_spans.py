"""The SDK tests' helpers: a test's finished spans and an in-memory provider of its own.

A module of its own, not the conftest: `from conftest import` names whichever conftest pytest imported first.
"""

from __future__ import annotations

from typing import Any

import orchestrace as ot
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider


class Spans:
    """The finished spans of one test, with the lookups the tests use."""

    def __init__(self, handle: ot.TracingHandle) -> None:
        self.handle = handle

    @property
    def all(self) -> list[ReadableSpan]:
        return list(self.handle.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"expected one {name!r} span, got {[s.name for s in self.all]}"
        return found[0]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        matches = [s for s in self.all if s.context.span_id == span.parent.span_id]
        return matches[0] if matches else None


def new_provider() -> TracerProvider:
    """A provider of one test (not shut down at exit: tests shut down what they configure)."""
    return TracerProvider(shutdown_on_exit=False)


def configure_memory(**options: Any) -> ot.TracingHandle:
    return ot.configure(exporter="memory", tracer_provider=new_provider(), batch=False, **options)
