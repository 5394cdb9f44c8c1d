"""OTLP/gRPC receiver: the ``TraceService/Export`` method on ``--grpc-port`` (grpcio, gzip handled by grpc).

Same path as OTLP/HTTP (``ingest.py``): invalid spans are reported in ``partial_success``, a malformed message
is ``INVALID_ARGUMENT`` (grpc itself rejects undecodable bytes), an oversized one ``RESOURCE_EXHAUSTED``
(grpc's receive limit), and an overloaded collector answers ``UNAVAILABLE``, the code OTLP exporters retry.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from orchestrace_collector.ingest import Ingest, Overloaded
from orchestrace_collector.receiver_http import PROTOBUF

log = logging.getLogger(__name__)


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, ingest: Ingest) -> None:
        self.ingest = ingest

    def Export(
        self, request: ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> ExportTraceServiceResponse:
        forwarded = request.SerializeToString() if self.ingest.forwarder is not None else None
        try:
            accepted = self.ingest.submit(request)
        except Overloaded:
            context.abort(grpc.StatusCode.UNAVAILABLE, "collector busy, retry later")
        except OSError as exc:
            log.error("orchestrace: write-ahead log append failed: %s", exc)
            context.abort(grpc.StatusCode.UNAVAILABLE, "collector cannot store batches now")
        self.ingest.wal.sync(accepted.seq)
        if forwarded is not None and self.ingest.forwarder is not None:
            self.ingest.forwarder.submit(forwarded, PROTOBUF)
        response = ExportTraceServiceResponse()
        if accepted.rejected:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=accepted.rejected, error_message=accepted.reason)
            )
        return response


def start_grpc_server(
    ingest: Ingest, host: str, port: int, *, max_message_bytes: int = 16 << 20, workers: int = 8
) -> tuple[grpc.Server, int]:
    """Start serving; returns the server and the bound port (``port=0`` picks a free one)."""
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="orchestrace-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),  # a second collector on the same port must fail, not share it
        ],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(ingest), server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # grpcio reports a busy port this way
        raise OSError(f"cannot bind gRPC port {host}:{port}: {exc}") from None
    if bound == 0:
        raise OSError(f"cannot bind gRPC port {host}:{port}")
    server.start()
    return server, bound
