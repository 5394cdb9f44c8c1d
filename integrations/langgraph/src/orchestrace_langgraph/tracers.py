"""The tracers the integration starts spans with: OTel's ``suppress_instrumentation()`` honoured, and the
tracer provider given to ``instrument`` also used for the SDK's spans inside graph runs.

Every span of the integration starts through ``Suppressible``: under ``suppress_instrumentation()`` it starts
a non-recording span, so that all code after it (events, links, context) runs unchanged and records nothing.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.trace import INVALID_SPAN, Span, Tracer, TracerProvider
from orchestrace.tracing import TRACER_KEY
from orchestrace.version import __version__ as sdk_version


def suppressed() -> bool:
    return bool(otel_context.get_value(_SUPPRESS_INSTRUMENTATION_KEY))


class Suppressible(Tracer):
    """A tracer that starts nothing (a non-recording span) under ``suppress_instrumentation()``."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        if suppressed():
            return INVALID_SPAN
        return self._tracer.start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        # Through start_span, so that the check above holds here too.
        return trace.use_span(self.start_span(*args, **kwargs), end_on_exit=True)


def sdk_scope(provider: TracerProvider | None) -> dict[str, object]:
    """Context values that make the SDK's decorated functions inside a graph run report to ``provider`` (the
    one given to ``instrument``); none without one (the SDK then uses its own configuration)."""
    if provider is None:
        return {}
    return {TRACER_KEY: trace.get_tracer("orchestrace", sdk_version, provider)}
