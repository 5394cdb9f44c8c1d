"""Finished spans of one test, with the lookups used by the parent checks."""

from __future__ import annotations

from finished_spans import FinishedSpans
from opentelemetry.sdk.trace import ReadableSpan


class Spans(FinishedSpans):
    @property
    def ours(self) -> list[ReadableSpan]:
        return [s for s in self.all if s.instrumentation_scope is not None
                and s.instrumentation_scope.name == "orchestrace_langgraph"]
