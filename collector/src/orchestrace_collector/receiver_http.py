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
* 503 with ``Retry-After`` when the collector is under pressure (assembly queue full, over its memory
  limit) or its storage fails (disk full, no descriptors left): OTLP exporters retry 503 after that delay.
  Nothing was acknowledged, so nothing is lost.
* 401 without the bearer token (when the collector has one), 403 for a ``Host`` header that is not the
  loopback address the collector is bound to (DNS rebinding: a web page's script reaching a loopback port),
  408 when the body does not arrive within ``body_timeout_s``.
* ``GET /healthz``: 200 ``ok`` once serving; 503 with the reason while storage fails (recovers by itself).

Decoding, the WAL append and its ``fsync`` run in a worker thread, so one client's large body does not stall
the event loop that serves the others.
"""

from __future__ import annotations

import asyncio
import logging
import re
import zlib
from collections.abc import Collection

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

from orchestrace_collector.decode import PayloadError, parse_otlp_json
from orchestrace_collector.feed_http import episodes_endpoint
from orchestrace_collector.feed_index import FeedIndex
from orchestrace_collector.ingest import Accepted, Ingest, Overloaded
from orchestrace_collector.senders import ANY_SENDER, Credentials, Forbidden
from orchestrace_collector.throttle import ThrottledLog

log = logging.getLogger(__name__)
_PATH = re.compile(r"'?/[^'\s]*'?")
#: One line per reason per interval for refused requests (the gRPC receiver's too).
refusals = ThrottledLog(log)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_PROTOBUF_ALIASES = frozenset({PROTOBUF, "application/protobuf"})
RETRY_AFTER_S = 1


class _TooLarge(Exception):
    pass


def create_app(
    ingest: Ingest,
    *,
    max_body_bytes: int = 16 << 20,
    credentials: Credentials | None = None,
    allowed_hosts: Collection[str] | None = None,
    body_timeout_s: float = 30.0,
    feed: FeedIndex | None = None,
) -> Starlette:
    """``credentials``: the tokens required as ``Authorization: Bearer <token>``, by sender.
    ``allowed_hosts``: the ``Host`` header values (without port) accepted; None accepts any.
    ``feed``: serve the live feed of its output directory (``GET /v1/episodes``, ``feed_http.py``)."""

    def refused(request: Request, *, auth: bool = True) -> Response | None:
        if allowed_hosts is not None:
            host = host_name(request.headers.get("host", ""))
            if host not in allowed_hosts:
                return PlainTextResponse(f"host {host!r} not allowed", status_code=403)
        if (
            auth
            and credentials is not None
            and credentials.sender(request.headers.get("authorization")) is None
        ):
            return PlainTextResponse(
                "missing or wrong bearer token", status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        return None

    async def export(request: Request) -> Response:
        denied = refused(request)
        if denied is not None:
            return denied
        sender = credentials.sender(request.headers.get("authorization")) if credentials else None
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
        pressure = ingest.pressure()
        if pressure is not None and pressure != ingest.wal.error:  # a failing WAL is probed by the append
            return _unavailable(media, pressure)
        held = _Held()
        try:
            raw = await asyncio.wait_for(_read_body(request, max_body_bytes, ingest, held), body_timeout_s)
            body = await run_in_threadpool(_gunzip, raw, max_body_bytes) if encoding == "gzip" else raw
            if len(body) > held.bytes:
                ingest.reserve(len(body) - held.bytes)
                held.bytes = len(body)
            content_type = request.headers.get("content-type", media)
            forward = (raw, content_type, request.headers.get("content-encoding"))
            accepted = await run_in_threadpool(_store, ingest, media, body, held.bytes, forward, sender)
        except Forbidden as exc:
            return _status(media, 403, str(exc))
        except _TooLarge:
            ingest.too_large_requests += 1
            if ingest.too_large_requests == 1:
                log.warning(
                    "orchestrace: refused a request larger than %d bytes (413); its spans are lost unless "
                    "the sender splits it (counted on the stop line)",
                    max_body_bytes,
                )
            return _status(media, 413, f"payload larger than {max_body_bytes} bytes")
        except PayloadError as exc:
            return _status(media, 400, str(exc))
        except ClientDisconnect:
            return Response(status_code=400)
        except TimeoutError:
            return _status(
                media, 408, f"body not received within {body_timeout_s} s", {"Connection": "close"}
            )
        except Overloaded as exc:
            return _unavailable(media, str(exc))
        except OSError as exc:  # the log cannot be written (disk full): nothing acknowledged, retry later
            refusals.log(logging.ERROR, "wal", "orchestrace: write-ahead log append failed: %s", exc)
            return _unavailable(media, f"collector cannot store batches now: {exc.strerror or exc}")
        finally:
            ingest.release(held.bytes)
        response = ExportTraceServiceResponse()
        if accepted.rejected:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=accepted.rejected, error_message=accepted.reason)
            )
        return _encode(media, response, 200)

    async def health(request: Request) -> Response:
        denied = refused(request, auth=False)  # health tells no data: no token needed
        if denied is not None:
            return denied
        problem = ingest.storage_error()
        if problem is not None:
            # What fails, for anyone; where (file paths), only for a sender with a token.
            if credentials is None or credentials.sender(request.headers.get("authorization")) is None:
                problem = _PATH.sub("<path>", problem)
            return PlainTextResponse(problem, status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})
        return PlainTextResponse("ok")

    routes = [
        Route("/v1/traces", export, methods=["POST"]),
        Route("/healthz", health, methods=["GET"]),
    ]
    if feed is not None:
        routes.append(Route("/v1/episodes", episodes_endpoint(feed, refused), methods=["GET"]))
    return Starlette(routes=routes)


def _store(
    ingest: Ingest,
    media: str,
    body: bytes,
    reserved: int,
    forward: tuple[bytes, str, str | None],
    sender: str | None,
) -> Accepted:
    """Decode, log and make durable, then queue for ``--forward`` (the request as received): a worker
    thread's part of a request. Protobuf is parsed by the decoder alone (``Ingest.submit``)."""
    if media == PROTOBUF:
        accepted = ingest.submit(None, body, reserved, sender)
    else:
        accepted = ingest.submit(parse_otlp_json(body), None, reserved, sender)
    ingest.wal.sync(accepted.seq)
    if ingest.forwarder is not None:
        ingest.forwarder.submit(*forward)
    return accepted


def _unavailable(media: str, message: str) -> Response:
    return _status(media, 503, message, {"Retry-After": str(RETRY_AFTER_S)})


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether ``header`` (``Authorization``) carries ``token``: :class:`Credentials` with one token."""
    return Credentials({ANY_SENDER: token}).sender(header) is not None


def host_name(host: str) -> str:
    """The host part of a ``Host`` header, lower-cased as host names compare (``[::1]:4318`` -> ``::1``)."""
    host = host.lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Held:
    """Bytes of memory a request has reserved (released when it is answered)."""

    bytes = 0


async def _read_body(request: Request, limit: int, ingest: Ingest, held: _Held) -> bytes:
    """Read the body, reserving its size against the memory limit first (the declared length up front):
    when many large bodies arrive at once, the ones that do not fit are refused before they are read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        if int(declared) > limit:
            raise _TooLarge
        _reserve(ingest, held, int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        if size > held.bytes:
            _reserve(ingest, held, size - held.bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _reserve(ingest: Ingest, held: _Held, nbytes: int) -> None:
    if not ingest.try_reserve(nbytes):
        raise Overloaded("collector over its memory limit, retry later")
    held.bytes += nbytes


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
_GRPC_CODE = {400: 3, 403: 7, 413: 8, 503: 14}


def _encode(
    media: str, message: Message, status_code: int, headers: dict[str, str] | None = None
) -> Response:
    if media == JSON:
        body = json_format.MessageToJson(message, indent=None).encode()
    else:
        body = message.SerializeToString()
    return Response(body, status_code=status_code, media_type=media, headers=headers)
