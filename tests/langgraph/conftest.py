from __future__ import annotations

from collections.abc import Iterator

import pytest
from finished_spans import in_memory
from orchestrace_langgraph import LangGraphInstrumentor
from span_checks import Spans


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter, provider = in_memory()
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield Spans(exporter, provider)
    finally:
        instrumentor.uninstrument()
