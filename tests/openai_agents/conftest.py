"""Every test here: no OpenAI API key, the Agents SDK's own exporter on a transport that records requests
(and fails them) instead of the network, and orchestrace's processor on an in-memory provider."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import orchestrace as ot
import pytest
from agents import flush_traces
from agents.tracing import default_exporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace.config import set_config
from orchestrace_openai_agents import OpenAIAgentsInstrumentor
from span_checks import Spans

#: Requests the Agents SDK's default exporter tried to send during the session (each test expects none new).
SENT: list[httpx2.Request] = []


def _refuse(request: httpx2.Request) -> httpx2.Response:
    SENT.append(request)
    return httpx2.Response(500)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    exporter = default_exporter()
    # The SDK's exporter keeps its client (and its retry policy); only where its requests would go changes.
    monkeypatch.setattr(exporter, "_client", httpx2.Client(transport=httpx2.MockTransport(_refuse)))
    monkeypatch.setattr(exporter, "max_retries", 1)
    sent_before = len(SENT)
    yield
    flush_traces()
    assert SENT[sent_before:] == [], "the Agents SDK's exporter tried to send traces"


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield Spans(exporter, provider)
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def task_spans(spans: Spans) -> Iterator[Spans]:
    """The SDK (``ot.task``, ``@ot.tool``) on the instrumentor's provider: both record into the same spans."""
    handle = ot.configure(tracer_provider=spans.provider, exporter="none")
    yield spans
    handle.shutdown()
    set_config(None)
