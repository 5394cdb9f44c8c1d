"""Fixtures of the SDK tests: a fresh TracerProvider with an in-memory exporter per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from orchestrace.config import set_config
from sdk_spans import Spans, configure_memory


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spans]:
    """Memory exporter on a provider of this test only; content capture off."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    handle = configure_memory(capture_content=False)
    yield Spans(handle)
    handle.shutdown()
    set_config(None)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spans]:
    """Like ``spans`` with content capture on and a 64-byte limit."""
    handle = configure_memory(capture_content=True, max_content_bytes=64)
    yield Spans(handle)
    handle.shutdown()
    set_config(None)
