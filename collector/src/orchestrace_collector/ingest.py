"""The receivers' common hot path: validate a decoded batch, log it, queue it for assembly.

Both receivers (HTTP and gRPC) call :meth:`Ingest.submit` and acknowledge once :meth:`Ingest.wait_durable`
returned. Converting protobuf spans to :class:`Span` and assembling them happens on one assembly thread, off
the request path, so a request costs one protobuf parse, one id check and one ``write(2)`` (plus the fsync
policy).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from orchestrace_collector.assemble import Assembler
from orchestrace_collector.decode import count_spans, drop_invalid_spans, spans_from_request
from orchestrace_collector.forward import Forwarder
from orchestrace_collector.wal import KIND_BATCH, KIND_WRITTEN, WriteAheadLog

log = logging.getLogger(__name__)

_TICK_S = 0.1


class Overloaded(Exception):
    """The assembly queue is over its bound: answer 503 / UNAVAILABLE so that the exporter retries later."""


@dataclass(frozen=True, slots=True)
class Accepted:
    spans: int
    rejected: int
    reason: str
    seq: int  # WAL record to be durable before acknowledging (0: nothing was logged)


class Ingest:
    def __init__(
        self,
        wal: WriteAheadLog,
        assembler: Assembler,
        *,
        forwarder: Forwarder | None = None,
        max_queued_batches: int = 512,
    ) -> None:
        self.wal = wal
        self.assembler = assembler
        self.forwarder = forwarder
        self.max_queued_batches = max_queued_batches
        self._queue: queue.SimpleQueue[tuple[ExportTraceServiceRequest, int] | bool | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._assembly_loop, name="orchestrace-assembly", daemon=True)
        self.accepted_spans = 0
        self.rejected_spans = 0

    def start(self) -> None:
        self._thread.start()

    @property
    def overloaded(self) -> bool:
        return self._queue.qsize() >= self.max_queued_batches

    def submit(self, request: ExportTraceServiceRequest, raw_protobuf: bytes | None = None) -> Accepted:
        """Log one batch (its valid spans) and queue it. ``raw_protobuf``: the request's own bytes, reused
        for the log when every span is valid. Raises :class:`Overloaded`."""
        if self.overloaded:
            raise Overloaded
        rejected, reason = drop_invalid_spans(request)
        spans = count_spans(request)
        seq = 0
        if spans:
            payload = (
                raw_protobuf if raw_protobuf is not None and not rejected else request.SerializeToString()
            )
            segment, seq = self.wal.append(payload, KIND_BATCH)
            self._queue.put((request, segment))
        self.accepted_spans += spans
        self.rejected_spans += rejected
        return Accepted(spans=spans, rejected=rejected, reason=reason, seq=seq)

    def replay(self) -> int:
        """Feed the WAL left by a previous run to the assembler (before serving). Returns batches replayed."""
        batches = 0
        for segment, kind, payload in self.wal.replay():
            if kind == KIND_BATCH:
                request = ExportTraceServiceRequest()
                request.ParseFromString(payload)
                self.assembler.add(spans_from_request(request), segment)
                batches += 1
            elif kind == KIND_WRITTEN:
                self.assembler.replay_marker(payload)
        return batches

    def _assembly_loop(self) -> None:
        next_tick = time.monotonic() + _TICK_S
        while True:
            try:
                item = self._queue.get(timeout=_TICK_S)
            except queue.Empty:
                item = False  # nothing new: only the completion check is due
            if item is None:
                return
            try:
                if isinstance(item, tuple):
                    request, segment = item
                    self.assembler.add(spans_from_request(request), segment)
                    self.wal.done(segment)
                if (
                    time.monotonic() >= next_tick
                ):  # checking completion walks every open episode: not per batch
                    self.assembler.tick()
                    next_tick = time.monotonic() + _TICK_S
            except Exception:
                log.exception("orchestrace: assembly failed on a batch; continuing")

    def stop(self) -> None:
        """Assemble everything still queued, then write every open episode (shutdown)."""
        self._queue.put(None)
        self._thread.join()
        self.assembler.flush()
