"""Span exporters by name, and the OTLP-JSON lines file exporter.

Names: ``otlp`` (OTLP http/protobuf, or gRPC when ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``), ``otlp-grpc``,
``jaeger`` (OTLP gRPC to a local Jaeger, ``localhost:4317``), ``console``, ``memory``, ``file:PATH``,
``none``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from orchestrace.failsafe import log_once, logger

JAEGER_OTLP_GRPC_ENDPOINT = "http://localhost:4317"
#: OTLP export timeout (seconds) unless ``OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT`` says otherwise: shorter than
#: OTel's 10 s so that a flush or exit with the endpoint down (retries until the timeout) stays short.
DEFAULT_OTLP_TIMEOUT_S = 5.0
_TRACES_PATH = "/v1/traces"
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


def _otlp_http(endpoint: str | None, headers: Mapping[str, str] | None = None) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if endpoint is not None and not endpoint.rstrip("/").endswith(_TRACES_PATH):
        endpoint = endpoint.rstrip("/") + _TRACES_PATH  # the base URL, as in OTEL_EXPORTER_OTLP_ENDPOINT
    # headers=None: the exporter reads OTEL_EXPORTER_OTLP[_TRACES]_HEADERS itself.
    return OTLPSpanExporter(endpoint=endpoint, timeout=_timeout(), headers=dict(headers) if headers else None)


def _otlp_grpc(endpoint: str | None, insecure: bool | None = None,
               headers: Mapping[str, str] | None = None) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    # gRPC metadata keys must be lowercase.
    metadata = {key.lower(): value for key, value in headers.items()} if headers else None
    return OTLPSpanExporter(endpoint=endpoint, insecure=insecure, timeout=_timeout(), headers=metadata)


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
            return _otlp_grpc(endpoint, headers=headers)
        return _otlp_http(endpoint, headers)
    if lowered in ("otlp-grpc", "otlp_grpc"):
        return _otlp_grpc(endpoint, headers=headers)
    if lowered in ("otlp-http", "otlp_proto_http"):
        return _otlp_http(endpoint, headers)
    if lowered == "jaeger":
        return _otlp_grpc(endpoint or JAEGER_OTLP_GRPC_ENDPOINT, insecure=True)
    if lowered == "console":
        return ConsoleSpanExporter(out=sys.stdout)  # the stdout of now, not of import time
    if lowered == "memory":
        return InMemorySpanExporter()
    if lowered.startswith("file:") and len(key) > len("file:"):
        return OtlpJsonFileExporter(key[len("file:"):])
    logger.error("orchestrace: unknown exporter %r (expected otlp, otlp-grpc, jaeger, console, memory, "
                 "file:PATH or none); no spans are exported through it", name)
    return None
