"""Span exporters by name, and the OTLP-JSON lines file exporter.

Names: ``otlp`` (OTLP http/protobuf, or gRPC when ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``), ``otlp-grpc``,
``jaeger`` (OTLP gRPC to a local Jaeger, ``localhost:4317``), ``console``, ``memory``, ``file:PATH``,
``none``.

When nothing listens at an OTLP endpoint (no collector running), the first batch and every batch after a
failed one check it with one TCP connection first, and are dropped at once, with one warning line for the
whole process, instead of being retried for seconds with a log line per attempt (which also held the program
at exit); ``ORCHESTRACE_QUIET=false`` gives the exporter's own retries and messages back.

The OTLP exporters encode their requests with :mod:`orchestrace.trace_encoder`: the bytes of OTel's encoder
for a fraction of its CPU, which the exporter's thread takes from the traced program.

The OTLP exporters never lose spans to a size limit: a batch whose request is larger than
``ORCHESTRACE_OTLP_MAX_REQUEST_BYTES`` (default 8 MiB, under the orchestrace collector's 16 MiB body
limit), or that the receiver refuses as too large (HTTP 413), is split in halves and each half sent. A
single span too large alone is sent without its content (its long string attributes left out, flagged
``orchestrace.content.truncated``; logged once, counted in ``cut_spans``): the trace keeps its structure,
refs and usage. Only a span still too large then is dropped, logged once and counted (``dropped_spans``).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from orchestrace import semconv as sc
from orchestrace.config import quiet
from orchestrace.failsafe import log_once, logger
from orchestrace.trace_encoder import encode_request

JAEGER_OTLP_GRPC_ENDPOINT = "http://localhost:4317"
ENV_MAX_REQUEST_BYTES = "ORCHESTRACE_OTLP_MAX_REQUEST_BYTES"
#: Largest OTLP request sent (serialized, before compression) unless ``ORCHESTRACE_OTLP_MAX_REQUEST_BYTES``
#: says otherwise: half the orchestrace collector's default body limit (16 MiB).
DEFAULT_MAX_REQUEST_BYTES = 8 << 20
_TOO_LARGE = 413
#: OTLP export timeout (seconds) unless ``OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT`` says otherwise: shorter than
#: OTel's 10 s so that a flush or exit with the endpoint down (retries until the timeout) stays short.
DEFAULT_OTLP_TIMEOUT_S = 5.0
_TRACES_PATH = "/v1/traces"
_GRPC_EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(item: dict[str, Any]) -> None:
    # proto3 JSON writes bytes as base64; OTLP-JSON wants trace and span ids as hex.
    for key in _ID_KEYS:
        if key in item:
            item[key] = base64.b64decode(item[key]).hex()


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One ``ExportTraceServiceRequest`` as OTLP-JSON (camelCase fields, integer enums, hex ids)."""
    data = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in data.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return data


class OtlpJsonFileExporter(SpanExporter):
    """Appends each batch as one OTLP-JSON ``ExportTraceServiceRequest`` per line, as the OpenTelemetry
    Collector's ``file`` exporter does; ``orchestrace convert`` reads these files."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            line = json.dumps(otlp_json(spans), separators=(",", ":"))
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(line + "\n")
        except Exception as exc:
            log_once("exporters.OtlpJsonFileExporter.export", exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing is held open between batches."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _timeout() -> float | None:
    configured = any(os.environ.get(name) for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                                                        "OTEL_EXPORTER_OTLP_TIMEOUT"))
    return None if configured else DEFAULT_OTLP_TIMEOUT_S


def max_request_bytes() -> int:
    """The largest OTLP request the exporters send (see the module docstring)."""
    raw = os.environ.get(ENV_MAX_REQUEST_BYTES, "").strip()
    try:
        return max(1, int(raw)) if raw else DEFAULT_MAX_REQUEST_BYTES
    except ValueError:
        logger.warning("orchestrace: ignoring %s=%r (not an integer)", ENV_MAX_REQUEST_BYTES, raw)
        return DEFAULT_MAX_REQUEST_BYTES


#: String attributes longer than this are content (messages, tool arguments and results, states).
_CONTENT_CHARS = 1024


def _small(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (attributes or {}).items()
            if not isinstance(value, str) or len(value) <= _CONTENT_CHARS}


def without_content(span: ReadableSpan) -> ReadableSpan:
    """``span`` without its long string attributes (its own and its events'), flagged truncated: its ids,
    times, names, refs and usage kept."""
    attributes = {**_small(span.attributes), sc.ORCH_CONTENT_TRUNCATED: True}
    events = [Event(e.name, _small(e.attributes), e.timestamp) for e in span.events]
    return ReadableSpan(span.name, span.context, span.parent, span.resource, attributes, events, span.links,
                        span.kind, status=span.status, start_time=span.start_time, end_time=span.end_time,
                        instrumentation_scope=span.instrumentation_scope)


class _Splitting:
    """What both OTLP exporters add to OTel's: requests encoded once by :mod:`orchestrace.trace_encoder`, a
    batch too large to send split in halves, a span too large alone sent without its content (``cut_spans``),
    else dropped (``dropped_spans``); each of those logged once (see the module docstring)."""

    _shutdown: bool

    def _split_batches(self, limit: int) -> None:
        self._limit = limit
        self.cut_spans = 0
        self.dropped_spans = 0
        self._counts_lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        return self._send(spans)

    def _send(self, spans: Sequence[ReadableSpan], stripped: bool = False) -> SpanExportResult:
        try:
            data = encode_request(spans)
        except Exception as exc:
            log_once(f"exporters.{type(self).__name__}.export", exc)
            return SpanExportResult.FAILURE
        size = len(data)
        if size <= self._limit:
            result = self._request(spans, data)
            del data  # not held while the halves are sent
            if result is not None:
                return result
            why = "refused as too large by the receiver (413)"
        else:
            del data
            why = f"over the {self._limit}-byte request limit ({ENV_MAX_REQUEST_BYTES})"
        if len(spans) > 1:
            first, second = spans[: len(spans) // 2], spans[len(spans) // 2 :]
            ok = self._send(first) == SpanExportResult.SUCCESS
            return SpanExportResult.SUCCESS if self._send(second) == SpanExportResult.SUCCESS and ok \
                else SpanExportResult.FAILURE
        with self._counts_lock:
            if stripped:
                self.dropped_spans += 1
                first_one = self.dropped_spans == 1
            else:
                self.cut_spans += 1
                first_one = self.cut_spans == 1
        if first_one:
            logger.error("orchestrace: %s span %r: %d bytes alone, %s (further ones are counted, not logged)",
                         "dropped" if stripped else "sending without its content", spans[0].name, size, why)
        return SpanExportResult.FAILURE if stripped else self._send([without_content(spans[0])], True)

    def _request(self, spans: Sequence[ReadableSpan], data: bytes) -> SpanExportResult | None:
        """Send one encoded request of ``spans``; ``None``: the receiver refused it as too large."""
        raise NotImplementedError


def _otlp_http(endpoint: str | None, headers: Mapping[str, str] | None = None) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    class SplittingHttpExporter(_Splitting, OTLPSpanExporter):
        def __init__(self, **options: Any) -> None:
            limit = max_request_bytes()
            super().__init__(max_request_size=limit, **options)
            self._split_batches(limit)

        def _request(self, spans: Sequence[ReadableSpan], data: bytes) -> SpanExportResult | None:
            result = self._client.export(data)
            if result.success:
                return SpanExportResult.SUCCESS
            return None if result.status_code == _TOO_LARGE else SpanExportResult.FAILURE

    if endpoint is not None and not endpoint.rstrip("/").endswith(_TRACES_PATH):
        endpoint = endpoint.rstrip("/") + _TRACES_PATH  # the base URL, as in OTEL_EXPORTER_OTLP_ENDPOINT
    # headers=None: the exporter reads OTEL_EXPORTER_OTLP[_TRACES]_HEADERS itself.
    return SplittingHttpExporter(endpoint=endpoint, timeout=_timeout(),
                                 headers=dict(headers) if headers else None)


def _otlp_grpc(endpoint: str | None, insecure: bool | None = None,
               headers: Mapping[str, str] | None = None) -> SpanExporter:
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    class EncodedRequestStub:
        """TraceService's client for requests already serialized: OTel's exporter calls ``Export`` with what
        ``_translate_data`` returns, here the bytes of :func:`encode_request`."""

        def __init__(self, channel: grpc.Channel) -> None:
            self.Export = channel.unary_unary(_GRPC_EXPORT_METHOD,
                                              response_deserializer=ExportTraceServiceResponse.FromString)

    class SplittingGrpcExporter(_Splitting, OTLPSpanExporter):
        """gRPC retries a request refused for its size (``RESOURCE_EXHAUSTED``) until its timeout: only the
        size limit splits here."""

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self._split_batches(max_request_bytes())
            # Also what a reconnection builds its client with. OTel types ``_client`` by its own stub.
            self._stub = EncodedRequestStub
            self._client = EncodedRequestStub(self._channel)  # type: ignore[assignment]

        def _request(self, spans: Sequence[ReadableSpan], data: bytes) -> SpanExportResult:
            return self._export((spans, data))  # type: ignore[arg-type]

        def _translate_data(self, data: Any) -> Any:
            return data[1]

        def _count_data(self, data: Any) -> int:
            return len(data[0])

    # gRPC metadata keys must be lowercase.
    metadata = {key.lower(): value for key, value in headers.items()} if headers else None
    return SplittingGrpcExporter(endpoint=endpoint, insecure=insecure, timeout=_timeout(), headers=metadata)


class ListeningExporter(SpanExporter):
    """Sends through ``inner`` (an OTLP exporter) only while something listens at its endpoint: see the
    module docstring. ``unreachable_spans``: the spans dropped because nothing did."""

    PROBE_TIMEOUT_S = 1.0
    _warned = False  # one warning line per process, whatever the number of exporters

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner = inner
        self.endpoint = endpoint
        parsed = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        self._address = (parsed.hostname or "localhost",
                         parsed.port or (443 if parsed.scheme == "https" else 80))
        self._check = True  # before the first batch, and after a failed one
        self.unreachable_spans = 0

    @property
    def dropped_spans(self) -> int:
        return int(getattr(self.inner, "dropped_spans", 0))

    @property
    def cut_spans(self) -> int:
        return int(getattr(self.inner, "cut_spans", 0))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._check and not self._listening():
            self.unreachable_spans += len(spans)
            if not ListeningExporter._warned:
                ListeningExporter._warned = True
                logger.warning("orchestrace: nothing listens at %s, spans are not exported (start "
                               "`orchestrace collect`; ORCHESTRACE_QUIET=false shows the exporter's retries)",
                               self.endpoint)
            return SpanExportResult.FAILURE
        result = self.inner.export(spans)
        self._check = result is not SpanExportResult.SUCCESS
        return result

    def _listening(self) -> bool:
        try:
            socket.create_connection(self._address, timeout=self.PROBE_TIMEOUT_S).close()
        except OSError:
            return False
        return True

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _listening_only(exporter: SpanExporter) -> SpanExporter:
    """``exporter`` behind a :class:`ListeningExporter` unless ``ORCHESTRACE_QUIET=false``."""
    endpoint = getattr(exporter, "_endpoint", None)  # resolved by the OTLP exporter (arguments, then OTEL_*)
    if not quiet() or not isinstance(endpoint, str):
        return exporter
    return ListeningExporter(exporter, endpoint)


def _otlp_protocol() -> str:
    return (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()


def create_exporter(name: str, endpoint: str | None = None,
                    headers: Mapping[str, str] | None = None) -> SpanExporter | None:
    """The exporter called ``name`` (see the module docstring); ``None`` for ``none`` or an unknown name.
    ``headers``: sent with every OTLP export (e.g. ``{"Authorization": "Bearer <token>"}``)."""
    key = name.strip()
    lowered = key.lower()
    if lowered == "none":
        return None
    if lowered == "otlp":
        if _otlp_protocol() == "grpc":
            return _listening_only(_otlp_grpc(endpoint, headers=headers))
        return _listening_only(_otlp_http(endpoint, headers))
    if lowered in ("otlp-grpc", "otlp_grpc"):
        return _listening_only(_otlp_grpc(endpoint, headers=headers))
    if lowered in ("otlp-http", "otlp_proto_http"):
        return _listening_only(_otlp_http(endpoint, headers))
    if lowered == "jaeger":
        return _listening_only(_otlp_grpc(endpoint or JAEGER_OTLP_GRPC_ENDPOINT, insecure=True))
    if lowered == "console":
        return ConsoleSpanExporter(out=sys.stdout)  # the stdout of now, not of import time
    if lowered == "memory":
        return InMemorySpanExporter()
    if lowered.startswith("file:") and len(key) > len("file:"):
        return OtlpJsonFileExporter(key[len("file:"):])
    logger.error("orchestrace: unknown exporter %r (expected otlp, otlp-grpc, jaeger, console, memory, "
                 "file:PATH or none); no spans are exported through it", name)
    return None
