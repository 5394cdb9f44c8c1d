from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace_langgraph import LangGraphInstrumentor
from span_checks import Spans


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield Spans(exporter, provider)
    finally:
        instrumentor.uninstrument()
