"""OTLP/HTTP receiver: ``POST /v1/traces`` (protobuf or JSON, identity or gzip), answering as the OTLP spec
says.

* 200 with an ``ExportTraceServiceResponse`` in the request's encoding; ``partial_success`` carries
  ``rejected_spans`` and an ``error_message`` when some spans were invalid (bad id lengths).
* 400 with a ``google.rpc.Status`` message for a payload that cannot be decoded (malformed protobuf or JSON,
  corrupt gzip, JSON nested too deeply).
* 413 when the body is larger than ``max_body_bytes``, before or after gunzip. Decompression stops at the
  limit, so a gzip bomb costs at most ``max_body_bytes`` of memory.
* 415 for a content type other than ``application/x-protobuf`` / ``application/json`` or an encoding other
  than gzip. The OTLP spec only requires the two media types; the OpenTelemetry Collector answers 415 here
  too, and 415 (not 400) tells the sender the payload was never looked at.
* 503 with ``Retry-After`` when the assembly queue is over its bound: OTLP exporters retry 503 after that
  delay.
* ``GET /healthz``: 200 once serving (what the test fixture and orchestration scripts wait for).
"""

from __future__ import annotations

import logging
import zlib

from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from orchestrace_collector.decode import PayloadError, parse_otlp_json, parse_otlp_protobuf
from orchestrace_collector.ingest import Ingest, Overloaded

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_PROTOBUF_ALIASES = frozenset({PROTOBUF, "application/protobuf"})
RETRY_AFTER_S = 1


class _TooLarge(Exception):
    pass


def create_app(ingest: Ingest, *, max_body_bytes: int = 16 << 20) -> Starlette:
    async def export(request: Request) -> Response:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media in _PROTOBUF_ALIASES:
            media = PROTOBUF
        elif media != JSON:
            return PlainTextResponse(
                f"unsupported content type {media or '(none)'!r}: use {PROTOBUF} or {JSON}", status_code=415
            )
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip", ""):
            return PlainTextResponse(f"unsupported content encoding {encoding!r}: use gzip", status_code=415)
        if ingest.overloaded:
            return _status(media, 503, "collector busy, retry later", {"Retry-After": str(RETRY_AFTER_S)})
        try:
            raw = await _read_body(request, max_body_bytes)
            body = _gunzip(raw, max_body_bytes) if encoding == "gzip" else raw
        except _TooLarge:
            return _status(media, 413, f"payload larger than {max_body_bytes} bytes")
        except PayloadError as exc:
            return _status(media, 400, str(exc))
        except ClientDisconnect:
            return Response(status_code=400)
        try:
            message = parse_otlp_protobuf(body) if media == PROTOBUF else parse_otlp_json(body)
            accepted = ingest.submit(message, body if media == PROTOBUF else None)
        except PayloadError as exc:
            return _status(media, 400, str(exc))
        except Overloaded:
            return _status(media, 503, "collector busy, retry later", {"Retry-After": str(RETRY_AFTER_S)})
        except (
            OSError
        ) as exc:  # the log cannot be written (disk full): nothing acknowledged, let the sender retry
            log.error("orchestrace: write-ahead log append failed: %s", exc)
            return _status(
                media, 503, "collector cannot store batches now", {"Retry-After": str(RETRY_AFTER_S)}
            )
        if ingest.wal.needs_sync(accepted.seq):
            await run_in_threadpool(ingest.wal.sync, accepted.seq)
        if ingest.forwarder is not None:
            ingest.forwarder.submit(
                raw, request.headers.get("content-type", media), request.headers.get("content-encoding")
            )
        response = ExportTraceServiceResponse()
        if accepted.rejected:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=accepted.rejected, error_message=accepted.reason)
            )
        return _encode(media, response, 200)

    async def health(_: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[
            Route("/v1/traces", export, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ]
    )


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _gunzip(data: bytes, limit: int) -> bytes:
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(data, limit + 1)  # never inflates more than the limit allows
    except zlib.error as exc:
        raise PayloadError(f"corrupt gzip body: {exc}") from None
    if len(out) > limit or decompressor.unconsumed_tail:
        raise _TooLarge
    if not decompressor.eof:
        raise PayloadError("truncated gzip body")
    return out


def _status(media: str, code: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _encode(media, Status(code=_GRPC_CODE.get(code, 2), message=message), code, headers)


# google.rpc.Status codes matching the HTTP status, as the OTLP/HTTP spec recommends.
_GRPC_CODE = {400: 3, 413: 8, 503: 14}


def _encode(
    media: str, message: Message, status_code: int, headers: dict[str, str] | None = None
) -> Response:
    if media == JSON:
        body = json_format.MessageToJson(message, indent=None).encode()
    else:
        body = message.SerializeToString()
    return Response(body, status_code=status_code, media_type=media, headers=headers)
