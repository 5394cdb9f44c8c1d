"""Mutated OTLP from a real run: the payload is refused with a PayloadError, or every episode it holds
converts to a valid trace, or fails with the one documented ValueError. Nothing else may escape."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from collector_fixtures import encode_protobuf, record_run
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from orchestrace import semconv as sc
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.decode import PayloadError, decode_bytes
from written_traces import checked

_NAMES = {name: value for name, value in vars(sc).items() if name.isupper() and isinstance(value, str)}
_KEYS = sorted(v for n, v in _NAMES.items() if "." in v and " " not in v and not n.startswith("EVENT_"))
_EVENTS = [*sorted(v for n, v in _NAMES.items() if n.startswith("EVENT_")), "exception", ""]
_WORDS = sorted(v for v in _NAMES.values() if v and "." not in v and " " not in v)  # operation names, kinds
_TEXTS = ["", "x" * 3000, "\u0000\u2603", "null", "{", "sha256:" + "0" * 64,
          '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]']


def _value(rng: random.Random, value: AnyValue, depth: int = 0) -> None:
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        value.string_value = rng.choice(_TEXTS + _WORDS)
    elif kind == 1:
        value.int_value = rng.choice([0, -1, 7, 2**63 - 1, -(2**63)])
    elif kind == 2:
        value.double_value = rng.choice([float("nan"), float("inf"), -0.0, 1e308, 0.5])
    elif kind == 3:
        value.bool_value = rng.random() < 0.5
    elif kind == 4:
        value.bytes_value = rng.randbytes(rng.randrange(10))
    elif kind == 5:
        for _ in range(rng.randrange(3)):
            _value(rng, value.array_value.values.add(), depth + 1)
    elif kind == 6:
        for _ in range(rng.randrange(3)):
            item = value.kvlist_value.values.add()
            item.key = rng.choice(_KEYS)
            _value(rng, item.value, depth + 1)
    # else: an AnyValue with nothing set


def _mutate(rng: random.Random, spans: list[PbSpan]) -> None:
    ids = [span.span_id for span in spans] + [b"", bytes(8), b"\x01" * 8]
    for _ in range(rng.randrange(1, 20)):
        span = rng.choice(spans)
        kind = rng.randrange(9)
        if kind == 0 and span.attributes:
            _value(rng, rng.choice(span.attributes).value)
        elif kind == 1 and span.attributes:
            del span.attributes[rng.randrange(len(span.attributes))]
        elif kind == 2:
            item = span.attributes.add()
            item.key = rng.choice(_KEYS)
            _value(rng, item.value)
        elif kind == 3:
            span.parent_span_id = rng.choice(ids)
        elif kind == 4:
            span.start_time_unix_nano, span.end_time_unix_nano = rng.choice(
                [(0, 0), (10, 5), (2**63, 1), (span.end_time_unix_nano, span.start_time_unix_nano)])
        elif kind == 5:
            spans.append(PbSpan.FromString(span.SerializeToString()))
        elif kind == 6:
            span.name = rng.choice(["", "x" * 5000, "\u2603", *_WORDS])
        elif kind == 7:
            event = span.events.add()
            event.name = rng.choice(_EVENTS)
            event.time_unix_nano = rng.choice([0, span.start_time_unix_nano, 2**64 - 1])
            for _ in range(rng.randrange(1, 4)):
                item = event.attributes.add()
                item.key = rng.choice(_KEYS)
                _value(rng, item.value)
        else:
            span.status.code = rng.choice([0, 1, 2, 7])
            span.status.message = "boom"


def _base() -> ExportTraceServiceRequest:
    """Two recorded runs, plus a model call with token usage beside each tool call."""
    request = ExportTraceServiceRequest.FromString(
        encode_protobuf(record_run("fuzz", tools=3) + record_run("fuzz-2", tools=1)))
    spans = request.resource_spans[0].scope_spans[0].spans
    for index, tool in enumerate([span for span in spans if span.name.startswith("execute_tool")]):
        chat = spans.add()
        chat.CopyFrom(tool)
        chat.span_id = bytes([0xC0 + index]) * 8
        chat.name = "chat m"
        del chat.attributes[:]
        for key, number in ((sc.GEN_AI_USAGE_INPUT_TOKENS, 3), (sc.GEN_AI_USAGE_OUTPUT_TOKENS, 4)):
            item = chat.attributes.add()
            item.key = key
            item.value.int_value = number
        for key, text in ((sc.GEN_AI_OPERATION_NAME, sc.OP_CHAT), (sc.GEN_AI_REQUEST_MODEL, "m")):
            item = chat.attributes.add()
            item.key = key
            item.value.string_value = text
    return request


def mutated_runs(rng: random.Random, count: int) -> Iterator[list[Any] | None]:
    """``count`` mutations of ``_base()``, decoded and grouped by trace (``None``: refused by the decoder)."""
    base = _base()
    for _ in range(count):
        request = ExportTraceServiceRequest()
        request.CopyFrom(base)
        spans = request.resource_spans[0].scope_spans[0].spans
        mutated = list(spans)
        _mutate(rng, mutated)
        del spans[:]
        spans.extend(mutated)
        try:
            decoded = decode_bytes(request.SerializeToString())
        except PayloadError:
            yield None
            continue
        by_trace: dict[str, list[Any]] = defaultdict(list)
        for span in decoded:
            by_trace[span.trace_id].append(span)
        yield list(by_trace.values())


# Two seeds in the fast suite; six more run with the slow tests (``make test-slow``).
@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 8))])
def test_mutated_otlp_converts_or_is_refused(seed: int) -> None:
    outcomes: dict[str, int] = defaultdict(int)
    for traces in mutated_runs(random.Random(seed), 150):
        if traces is None:
            outcomes["refused"] += 1
            continue
        for trace_spans in traces:
            try:
                checked(convert_episode(trace_spans))
            except ValueError as error:  # only the documented one
                assert "event" in str(error), error
                outcomes["no event"] += 1
            else:
                outcomes["converted"] += 1
    assert outcomes["converted"] > 0, outcomes  # the mutations leave most runs convertible
