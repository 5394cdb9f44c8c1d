"""Synthetic OTLP traffic shaped like an orchestrace-instrumented run, for the collector benchmarks.

A trace is one ``invoke_workflow`` root with agent invocations under it; each agent makes model calls
(``chat``) and tool calls (``execute_tool``), and some agents record delegate/message span events. Spans come
children first and the root last, the order in which an OTel SDK exports them. Ids are derived from the trace
index, so the same arguments always give the same bytes (the outputs of two conversion engines can be
compared).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from orchestrace import semconv as sc

AGENT_NAMES = ("planner", "researcher", "coder", "critic", "writer", "tester", "reviewer", "summarizer")
#: One agent invocation: the agent span, then (chat, tool) pairs.
TURNS_PER_AGENT = 4
SPANS_PER_AGENT = 1 + 2 * TURNS_PER_AGENT
#: Spans per OTLP request, the BatchSpanProcessor's default batch size.
BATCH = 512
START_NS = 1_700_000_000_000_000_000
_SPAN_NS = 1_000_000


def _kv(key: str, value: str | int | bool) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _messages(tag: str, size: int) -> list[KeyValue]:
    """A model call's prompt and reply (``size`` and ``size // 4`` characters), distinct per call."""
    if not size:
        return []
    prompt = [{"role": "user", "content": (f"question {tag} " * size)[:size]}]
    reply = [{"role": "assistant", "content": (f"answer {tag} " * size)[: size // 4]}]
    return [
        _kv(sc.GEN_AI_INPUT_MESSAGES, json.dumps(prompt)),
        _kv(sc.GEN_AI_OUTPUT_MESSAGES, json.dumps(reply)),
    ]


def trace_id(index: int, seed: int = 0) -> bytes:
    return struct.pack(">QQ", seed + 1, index + 1)


def trace_spans(
    index: int, n_spans: int, *, seed: int = 0, complete: bool = True, content: int = 0
) -> list[PbSpan]:
    """The spans of trace ``index`` (at least 1: the root), root last (left out unless ``complete``).
    ``content``: each model call also carries its messages, a prompt of about that many characters and a
    reply of a quarter of it."""
    tid = trace_id(index, seed)
    index_bits = index << 24  # span ids: the trace index above a per-trace counter, so all ids are distinct
    ids = iter(range(1, n_spans + 1))
    root_id = struct.pack(">Q", index_bits | next(ids))
    t = START_NS + index * _SPAN_NS
    spans: list[PbSpan] = []

    def span(name: str, parent: bytes, start: int, end: int, attrs: list[KeyValue]) -> PbSpan:
        sid = struct.pack(">Q", index_bits | next(ids))
        pb = PbSpan(
            trace_id=tid,
            span_id=sid,
            parent_span_id=parent,
            name=name,
            kind=PbSpan.SPAN_KIND_INTERNAL,
            start_time_unix_nano=start,
            end_time_unix_nano=end,
            attributes=attrs,
        )
        spans.append(pb)
        return pb

    remaining = n_spans - 1
    k = 0
    while remaining > 0:
        name = AGENT_NAMES[k % len(AGENT_NAMES)]
        turns = min(TURNS_PER_AGENT, (remaining - 1) // 2)
        agent_start, agent_end = t + 1, t + (2 * turns + 1) * _SPAN_NS
        agent = span(
            f"invoke_agent {name}",
            root_id,
            agent_start,
            agent_end,
            [
                _kv(sc.GEN_AI_OPERATION_NAME, sc.OP_INVOKE_AGENT),
                _kv(sc.GEN_AI_AGENT_NAME, name),
                _kv(sc.GEN_AI_AGENT_ID, f"{name}-{index}-{k}"),
            ],
        )
        if k % 3 == 1:
            agent.events.add(
                name=sc.EVENT_MESSAGE,
                time_unix_nano=agent_start + 10,
                attributes=[
                    _kv(sc.ORCH_FROM, name),
                    _kv(sc.ORCH_TO, AGENT_NAMES[(k + 1) % len(AGENT_NAMES)]),
                ],
            )
        for turn in range(turns):
            start = agent_start + 2 * turn * _SPAN_NS
            span(
                "chat fake-model",
                agent.span_id,
                start,
                start + _SPAN_NS // 2,
                [
                    _kv(sc.GEN_AI_OPERATION_NAME, sc.OP_CHAT),
                    _kv(sc.GEN_AI_REQUEST_MODEL, "fake-model"),
                    _kv(sc.GEN_AI_PROVIDER_NAME, "fake"),
                    _kv(sc.GEN_AI_USAGE_INPUT_TOKENS, 120),
                    _kv(sc.GEN_AI_USAGE_OUTPUT_TOKENS, 30),
                    *_messages(f"{k}.{turn}", content),
                ],
            )
            span(
                "execute_tool search",
                agent.span_id,
                start + _SPAN_NS // 2,
                start + _SPAN_NS,
                [
                    _kv(sc.GEN_AI_OPERATION_NAME, sc.OP_EXECUTE_TOOL),
                    _kv(sc.GEN_AI_TOOL_NAME, "search"),
                    _kv(sc.GEN_AI_TOOL_CALL_ID, f"call-{k}-{turn}"),
                ],
            )
        remaining -= 1 + 2 * turns
        t = agent_end
        k += 1
    if complete:
        root = PbSpan(
            trace_id=tid,
            span_id=root_id,
            name="invoke_workflow bench",
            kind=PbSpan.SPAN_KIND_INTERNAL,
            start_time_unix_nano=START_NS + index * _SPAN_NS,
            end_time_unix_nano=t + 1,
            attributes=[
                _kv(sc.GEN_AI_OPERATION_NAME, sc.OP_INVOKE_WORKFLOW),
                _kv(sc.GEN_AI_WORKFLOW_NAME, "bench"),
                _kv(sc.ORCH_TASK_ID, f"task-{index}"),
            ],
        )
        spans.append(root)
    return spans


def requests(traces: Iterable[list[PbSpan]], batch: int = BATCH) -> Iterator[ExportTraceServiceRequest]:
    """Pack spans into OTLP requests of ``batch`` spans, in order (a trace may straddle two requests)."""
    request = _new_request()
    scope = request.resource_spans[0].scope_spans[0]
    for spans in traces:
        for pb in spans:
            scope.spans.append(pb)
            if len(scope.spans) >= batch:
                yield request
                request = _new_request()
                scope = request.resource_spans[0].scope_spans[0]
    if scope.spans:
        yield request


def _new_request() -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(_kv("service.name", "bench"))
    resource_spans.scope_spans.add().scope.name = "orchestrace.bench"
    return request


def encoded_requests(indices: Iterable[int], spans_per_trace: int, *, complete: bool = True) -> list[bytes]:
    """Serialized OTLP requests carrying the traces ``indices`` (without their roots unless ``complete``)."""
    traces = (trace_spans(i, spans_per_trace, complete=complete) for i in indices)
    return [r.SerializeToString() for r in requests(traces)]


def write_dumps(
    directory: Path, n_traces: int, spans_per_trace: int, n_files: int, *, seed: int = 0
) -> list[Path]:
    """Protobuf dump files of consecutive traces; each file is its requests concatenated (still one valid
    ``ExportTraceServiceRequest``: protobuf merges repeated fields of concatenated messages)."""
    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-n_traces // n_files)
    paths = []
    for f in range(n_files):
        indices = range(f * per_file, min(n_traces, (f + 1) * per_file))
        path = directory / f"dump-{f:04d}.pb"
        with path.open("wb") as out:
            for request in requests(trace_spans(i, spans_per_trace, seed=seed) for i in indices):
                out.write(request.SerializeToString())
        paths.append(path)
    return paths
