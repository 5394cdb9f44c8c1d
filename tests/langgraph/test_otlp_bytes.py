"""The OTLP requests orchestrace's exporters send for LangGraph runs of random shapes and hostile names are
byte for byte OTel's (``encode_spans``): the encoder of ``orchestrace.trace_encoder`` changes no data."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from orchestrace.trace_encoder import encode_request
from random_graphs import random_app
from span_checks import Spans
from test_random_graphs import run


@pytest.mark.parametrize("seed", range(0, 40, 4))
async def test_requests_are_otels_bytes(seed: int, spans: Spans) -> None:
    await run(random_app(seed), spans)
    finished = spans.all
    assert len(finished) >= 2
    assert encode_request(finished) == encode_spans(finished).SerializeToString()
