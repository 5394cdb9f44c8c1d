"""OTLP/gRPC receiver: the ``TraceService/Export`` method on ``--grpc-port`` (grpcio, gzip handled by grpc).

Same path as OTLP/HTTP (``ingest.py``), with the status codes the OTLP spec gives: invalid spans are reported
in ``partial_success``; a malformed message is ``INVALID_ARGUMENT`` (the method takes raw bytes and decodes
them itself: grpc's own deserializer would answer ``INTERNAL``); an oversized one ``RESOURCE_EXHAUSTED``
(grpc's receive limit, without retry info: never retried); one that does not fit under the memory limit now
``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` delay (its bytes are counted against ``--memory-limit-mb`` as soon
as grpc hands them over, as the HTTP receiver counts a body it reads, and the server runs as many requests at
once as the limit has room for); a collector under pressure or whose storage fails answers ``UNAVAILABLE``
with a ``RetryInfo`` delay, which exporters retry after that delay; a missing or wrong bearer token is
``UNAUTHENTICATED``, spans of an episode another named sender opened ``PERMISSION_DENIED`` (``senders.py``).
An unexpected error is ``UNAVAILABLE`` too (nothing was acknowledged; a retry may succeed), never ``UNKNOWN``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import DecodeError
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from orchestrace_collector.ingest import Ingest, Overloaded
from orchestrace_collector.receiver_http import PROTOBUF, RETRY_AFTER_S, host_name, refusals
from orchestrace_collector.senders import Credentials, Forbidden

log = logging.getLogger(__name__)

_RETRY_INFO = RetryInfo(retry_delay=Duration(seconds=RETRY_AFTER_S)).SerializeToString()


_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


class _TraceService:
    """``TraceService/Export`` on the request's bytes as received."""

    def __init__(
        self, ingest: Ingest, credentials: Credentials | None, allowed_hosts: Collection[str] | None = None
    ) -> None:
        self.ingest = ingest
        self.credentials = credentials
        self.allowed_hosts = allowed_hosts

    def handler(self) -> grpc.GenericRpcHandler:
        export = grpc.unary_unary_rpc_method_handler(
            self.export, response_serializer=ExportTraceServiceResponse.SerializeToString
        )
        return grpc.method_handlers_generic_handler(_SERVICE, {"Export": export})

    def export(self, body: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        if self.allowed_hosts is not None:
            authority = _authority(context)
            if authority is not None and host_name(authority) not in self.allowed_hosts:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, f"host {host_name(authority)!r} not allowed")
        sender = None
        if self.credentials is not None:
            metadata = dict(context.invocation_metadata())
            sender = self.credentials.sender(str(metadata.get("authorization", "")))
            if sender is None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        if not self.ingest.try_reserve(len(body)):
            _retry_later(context, grpc.StatusCode.RESOURCE_EXHAUSTED, "collector over its memory limit")
        try:
            return self._export(body, sender, context)
        finally:
            self.ingest.release(len(body))

    def _export(
        self, body: bytes, sender: str | None, context: grpc.ServicerContext
    ) -> ExportTraceServiceResponse:
        try:
            request = ExportTraceServiceRequest.FromString(body)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"not an ExportTraceServiceRequest: {exc}")
        forwarded = body if self.ingest.forwarder is not None else None
        try:
            # Its bytes reused for the log; they hold their reservation (the memory limit's admission).
            accepted = self.ingest.submit(request, body, len(body), sender)
            self.ingest.wal.sync(accepted.seq)
        except Forbidden as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except Overloaded as exc:
            _unavailable(context, str(exc))
        except OSError as exc:
            refusals.log(logging.ERROR, "wal", "orchestrace: write-ahead log append failed: %s", exc)
            _unavailable(context, f"collector cannot store batches now: {exc.strerror or exc}")
        except Exception:
            log.exception("orchestrace: gRPC export failed")
            _unavailable(context, "collector error, retry later")
        if forwarded is not None and self.ingest.forwarder is not None:
            self.ingest.forwarder.submit(forwarded, PROTOBUF)
        response = ExportTraceServiceResponse()
        if accepted.rejected:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=accepted.rejected, error_message=accepted.reason)
            )
        return response


def _unavailable(context: grpc.ServicerContext, message: str) -> None:
    _retry_later(context, grpc.StatusCode.UNAVAILABLE, message)


def _retry_later(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> None:
    """Abort with ``code`` and a ``RetryInfo`` delay: the exporter retries after it."""
    context.set_trailing_metadata((("google.rpc.retryinfo-bin", _RETRY_INFO),))
    context.abort(code, message)


def bind_grpc_server(
    host: str,
    port: int,
    *,
    max_message_bytes: int = 16 << 20,
    workers: int = 8,
    memory_limit_bytes: int = 0,
    tls: tuple[bytes, bytes] | None = None,
    max_connection_idle_s: float = 300.0,
) -> tuple[grpc.Server, int]:
    """A server bound to ``host:port`` but not serving yet (``serve_grpc`` starts it), so that a taken port
    is an error before anything else starts; returns it and the bound port (``port=0`` picks a free one).
    ``workers``: requests handled at once, fewer when ``memory_limit_bytes`` has room for few of the largest
    (grpc holds each one whole before the handler can count it). ``tls``: the PEM certificate chain
    and private key."""
    # A limit with room for few of the largest requests: fewer at once, none waiting with its bytes held.
    tight = 0 < memory_limit_bytes < 32 * max_message_bytes
    if tight:
        workers = max(2, min(workers, memory_limit_bytes // (4 * max_message_bytes)))
    address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    if port:
        # grpcio reports a taken port only after logging it itself on stderr: ask the OS first.
        probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpcio binds
            probe.bind((host, port))
        except OSError as exc:
            raise OSError(f"cannot bind gRPC port {address}: {exc.strerror or exc}") from None
        finally:
            probe.close()
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="orchestrace-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),  # a second collector on the same port must fail, not share it
            ("grpc.max_connection_idle_ms", int(max_connection_idle_s * 1000)),
            # No receive window grown by bandwidth probes: a request waiting for a worker holds 64 KiB, not
            # megabytes, and one refused is not read whole.
            ("grpc.http2.bdp_probe", 0 if tight else 1),
        ],
        # Beyond this grpc answers RESOURCE_EXHAUSTED itself; under a memory limit no request waits (held).
        maximum_concurrent_rpcs=workers if tight else workers * 8,
    )
    try:
        if tls is not None:
            credentials = grpc.ssl_server_credentials([(tls[1], tls[0])])
            bound = server.add_secure_port(address, credentials)
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError:  # grpcio reports a busy port this way
        bound = 0
    if bound == 0:
        raise OSError(f"cannot bind gRPC port {address}")
    return server, bound


def serve_grpc(
    server: grpc.Server,
    ingest: Ingest,
    credentials: Credentials | None = None,
    allowed_hosts: Collection[str] | None = None,
) -> None:
    """Start answering ``TraceService/Export`` on a server from ``bind_grpc_server``. ``allowed_hosts``: the
    ``:authority`` host names accepted (the HTTP receiver's ``Host`` rule); None accepts any."""
    server.add_generic_rpc_handlers((_TraceService(ingest, credentials, allowed_hosts).handler(),))
    server.start()


def _authority(context: grpc.ServicerContext) -> str | None:
    """The call's ``:authority``. grpcio has no public accessor: read where its server keeps it, and None
    (no check) where another grpcio keeps it elsewhere."""
    host = getattr(getattr(getattr(context, "_rpc_event", None), "call_details", None), "host", None)
    if isinstance(host, bytes):
        return host.decode("ascii", "replace")
    return host if isinstance(host, str) else None
