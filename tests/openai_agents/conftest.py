"""Every test here: no OpenAI API key, the Agents SDK's own exporter on a transport that records requests
(and fails them) instead of the network, and orchestrace's processor on an in-memory provider."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import orchestrace as ot
import pytest
from agents import flush_traces
from agents.tracing import default_exporter
from agents_spans import SENT, Spans, refuse
from finished_spans import in_memory
from orchestrace.config import set_config
from orchestrace_openai_agents import OpenAIAgentsInstrumentor


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    exporter = default_exporter()
    # The SDK's exporter keeps its client (and its retry policy); only where its requests would go changes.
    monkeypatch.setattr(exporter, "_client", httpx2.Client(transport=httpx2.MockTransport(refuse)))
    monkeypatch.setattr(exporter, "max_retries", 1)
    sent_before = len(SENT)
    yield
    flush_traces()
    assert SENT[sent_before:] == [], "the Agents SDK's exporter tried to send traces"


@pytest.fixture
def spans() -> Iterator[Spans]:
    instrumentor = OpenAIAgentsInstrumentor()
    recorded = Spans(*in_memory())
    instrumentor.instrument(tracer_provider=recorded.provider)
    try:
        yield recorded
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def task_spans(spans: Spans) -> Iterator[Spans]:
    """The SDK (``ot.task``, ``@ot.tool``) on the instrumentor's provider: both record into the same spans."""
    handle = ot.configure(tracer_provider=spans.provider, exporter="none")
    yield spans
    handle.shutdown()
    set_config(None)
