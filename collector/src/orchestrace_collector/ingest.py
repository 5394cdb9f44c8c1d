"""The receivers' common hot path: validate a decoded batch, log it, queue it for assembly.

Both receivers (HTTP and gRPC) call :meth:`Ingest.submit` and acknowledge once :meth:`Ingest.wait_durable`
returned. A request's spans are decoded to :class:`Span` once, on the request's thread, in the pass that
checks their ids; the assembly thread gets them decoded (decoding the logged bytes there again cost a second
parse and a second pass over every span). Assembling, converting and writing run on that one thread, off the
request path.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from orchestrace_collector.assemble import Assembler
from orchestrace_collector.decode import (
    count_spans,
    drop_invalid_spans,
    parse_otlp_protobuf,
    received_spans,
    spans_from_export,
)
from orchestrace_collector.spans import Span, resident_bytes
from orchestrace_collector.wal import KIND_BATCH, KIND_OPEN, KIND_WRITTEN, WriteAheadLog

if TYPE_CHECKING:  # only the collector forwards and names senders: ``replay`` runs in-process too
    from orchestrace_collector.forward import Forwarder
    from orchestrace_collector.senders import Owners

log = logging.getLogger(__name__)

_TICK_S = 0.1
#: Decoded batches waiting for the assembly thread, at most (their :func:`resident_bytes`): past it a request
#: waits, before it decodes, until assembly catches up. Decoded spans cost several times their wire bytes, and
#: a backlog of them (a burst of 200,000 spans) left the resident set up by 60 MiB after it was assembled.
MAX_QUEUED_BYTES = 32 << 20
#: How long a request waits for that room before it is answered 503 (nothing logged, the sender retries).
QUEUE_WAIT_S = 5.0
#: A request body being read or parsed, per byte: the body, plus its parse (measured 0.8 x for large
#: attribute values to 7.5 x for small SDK spans) before the batch's own estimate is known.
REQUEST_FACTOR = 8


def _parsed(request: ExportTraceServiceRequest | None, raw: bytes) -> ExportTraceServiceRequest:
    return request if request is not None else parse_otlp_protobuf(raw)


class Overloaded(Exception):
    """Over a bound (queue, memory) or storage failing: answer 503 / UNAVAILABLE with Retry-After so that the
    exporter retries later. The message says which."""


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
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        memory_limit_bytes: int = 0,
        spool_only: bool = False,
        owners: Owners | None = None,
    ) -> None:
        self.wal = wal
        #: Which named sender opened each episode (None: one sender, nothing to check).
        self.owners = owners
        #: Only log batches (the WAL segments are kept as the spool ``convert`` assembles); no assembly.
        self.spool_only = spool_only
        self.assembler = assembler
        self.forwarder = forwarder
        self.max_queued_batches = max_queued_batches
        self.max_queued_bytes = max_queued_bytes
        #: 0: no limit. Else the estimated resident bytes of queued batches, open and retained spans
        #: (:func:`resident_bytes`) and request bodies being read (:data:`REQUEST_FACTOR`), above which
        #: requests are refused with 503.
        self.memory_limit_bytes = memory_limit_bytes
        # The assembler sheds held spans before the limit refuses requests for long.
        assembler.max_bytes = memory_limit_bytes * 3 // 4
        self.queued_bytes = 0
        self.request_bytes = 0  # bodies the receivers hold right now
        self._bytes_lock = threading.Lock()
        #: Notified as the assembly thread takes batches off the queue (:meth:`_wait_for_room`).
        self._dequeued = threading.Condition(self._bytes_lock)
        #: (decoded spans, WAL segment, estimated cost, offset in the segment); no spans with ``spool_only``.
        #: Queued in the order the WAL holds them (``_order``): a written episode records the WAL position it
        #: took spans up to, which a replay trusts (``Assembler.replay_done``).
        self._queue: queue.SimpleQueue[tuple[list[Span], int, int, int] | bool | None] = queue.SimpleQueue()
        self._order = threading.Lock()
        self._thread = threading.Thread(target=self._assembly_loop, name="orchestrace-assembly", daemon=True)
        self._deadline: float | None = None  # set by :meth:`stop`: batches still queued then stay in the WAL
        self.batches_left = 0  # batches not assembled at shutdown (they stay in the WAL)
        self.accepted_spans = 0
        self.rejected_spans = 0
        #: Requests refused unread as larger than the body limit (HTTP 413): their spans are lost unless the
        #: sender splits them (the orchestrace SDK does).
        self.too_large_requests = 0

    def start(self) -> None:
        self._thread.start()

    @property
    def memory_bytes(self) -> int:
        """What the memory limit counts (an estimate of the resident bytes these spans cost)."""
        held = self.queued_bytes + self.assembler.open_bytes + self.assembler.retained_bytes
        return held + self.request_bytes * REQUEST_FACTOR

    def pressure(self, reserved: int = 0) -> str | None:
        """Why new batches are refused now (None: they are accepted). ``reserved``: bytes the asking request
        already holds (it passed the memory limit's admission with them)."""
        if self._queue.qsize() >= self.max_queued_batches:
            return "collector busy (assembly queue full), retry later"
        used = self.memory_bytes - reserved * REQUEST_FACTOR
        if self.memory_limit_bytes and used >= self.memory_limit_bytes:
            return "collector over its memory limit, retry later"
        return self.storage_error()

    def storage_error(self) -> str | None:
        """Why storage fails now: the WAL cannot be appended to, or traces cannot be written."""
        return self.wal.error or self.assembler.storage_error

    @property
    def overloaded(self) -> bool:
        return self.pressure() is not None

    def reserve(self, nbytes: int) -> None:
        """A receiver holds a request body of ``nbytes`` (counted until :meth:`release`)."""
        with self._bytes_lock:
            self.request_bytes += nbytes

    def try_reserve(self, nbytes: int) -> bool:
        """:meth:`reserve` if ``nbytes`` more fit under the memory limit, or if the request is larger than
        the limit allows and no other request holds any (it still gets through, alone). A large request (over
        a sixteenth of the limit) fits only under three quarters of it: the rest is kept for small ones, so
        senders of large batches cannot starve the others."""
        with self._bytes_lock:
            limit = self.memory_limit_bytes
            cost = nbytes * REQUEST_FACTOR
            if limit and cost > limit // 16:
                limit = limit * 3 // 4
            alone = self.request_bytes == 0 and cost > limit
            if limit and not alone and self.memory_bytes + cost > limit:
                # When held spans alone keep it out (queued batches and bodies drain by themselves), the
                # assembler makes room: under its own bound it would keep them, and their senders, refused,
                # would never end those episodes (they would wait for the idle timeout).
                held = self.assembler.open_bytes + self.assembler.retained_bytes
                if held + cost > limit:
                    self.assembler.make_room(held + cost - limit)
                return False
            self.request_bytes += nbytes
            return True

    def release(self, nbytes: int) -> None:
        with self._bytes_lock:
            self.request_bytes -= nbytes

    def submit(
        self,
        request: ExportTraceServiceRequest | None,
        raw_protobuf: bytes | None = None,
        reserved: int = 0,
        sender: str | None = None,
    ) -> Accepted:
        """Log one batch (its valid spans) and queue it. ``raw_protobuf``: the request's own bytes, reused
        for the log when every span is valid; with them ``request`` may be None: it is parsed only when needed
        (bad ids, named senders, ``spool_only``), the decoder checking the bytes otherwise; ``reserved``: see
        :meth:`pressure`; ``sender``: who sent it, checked against :attr:`owners` when there are named
        senders. Raises :class:`Overloaded`, ``senders.Forbidden``, ``PayloadError`` (malformed bytes);
        ``OSError`` when the log cannot be written (nothing was acknowledged)."""
        pressure = self.pressure(reserved)
        # A failing WAL is tried again by every request (the append is the probe that sees storage return);
        # the other pressures refuse before any work.
        if pressure is not None and not (self.wal.error and pressure == self.wal.error):
            raise Overloaded(pressure)
        self._wait_for_room()
        if raw_protobuf is not None:
            received = raw_protobuf
        elif request is not None:
            received = request.SerializeToString()
        else:
            raise ValueError("submit needs the request or its bytes")
        decoded: list[Span] = []
        if self.spool_only:  # logged as received, never assembled here: nothing to decode
            request = _parsed(request, received)
            rejected, reason = drop_invalid_spans(request)
            spans = count_spans(request)
        else:
            decoded, rejected, reason = received_spans(received)
            spans = len(decoded)
            if rejected:
                request = _parsed(request, received)
                drop_invalid_spans(request)  # for the log and the owners, as ``decoded`` left them out
        if self.owners is not None and sender is not None:
            request = _parsed(request, received)
            self.owners.claim(sender, request)
        seq = 0
        if spans:
            payload = received if request is None or not rejected else request.SerializeToString()
            cost = resident_bytes(decoded, len(payload))
            with self._order:
                segment, seq, offset = self.wal.append_at(payload, KIND_BATCH)
                with self._bytes_lock:
                    self.queued_bytes += cost
                self._queue.put((decoded, segment, cost, offset))
        self.accepted_spans += spans
        self.rejected_spans += rejected
        return Accepted(spans=spans, rejected=rejected, reason=reason, seq=seq)

    def _wait_for_room(self) -> None:
        """Wait while queued batches cost :attr:`max_queued_bytes` (the memory a backlog of decoded spans
        holds is bounded, not only counted); :class:`Overloaded` after :data:`QUEUE_WAIT_S`. Nothing is
        logged yet, so nothing acknowledged waits here."""
        with self._dequeued:
            if self.queued_bytes < self.max_queued_bytes:
                return
            if not self._dequeued.wait_for(
                lambda: self.queued_bytes < self.max_queued_bytes, timeout=QUEUE_WAIT_S
            ):
                raise Overloaded("collector busy (assembly behind), retry later")

    def replay(self) -> int:
        """Feed the WAL left by a previous run to the assembler (before serving). Returns batches replayed."""
        return 0 if self.spool_only else replay(self.assembler, self.wal)

    def _assembly_loop(self) -> None:
        next_tick = time.monotonic() + _TICK_S
        while True:
            try:
                item = self._queue.get(timeout=_TICK_S)
            except queue.Empty:
                item = False  # nothing new: only the completion check is due
            if item is None:
                return
            if self._deadline is not None and time.monotonic() >= self._deadline:
                # Shutdown ran out of time: this batch and those queued after it stay in the WAL.
                self.batches_left = self._queue.qsize() + isinstance(item, tuple) - 1  # less the stop marker
                return
            try:
                if isinstance(item, tuple):
                    spans, segment, nbytes, offset = item
                    if not self.spool_only:
                        self.assembler.add(spans, segment, nbytes, offset)
                    self.wal.done(segment)
                    with self._dequeued:
                        self.queued_bytes -= nbytes
                        self._dequeued.notify_all()
                if (
                    time.monotonic() >= next_tick
                ):  # checking completion walks every open episode: not per batch
                    self.assembler.tick()
                    next_tick = time.monotonic() + _TICK_S
            except Exception:
                log.exception("orchestrace: assembly failed on a batch; continuing")

    def stop(self, timeout_s: float | None = None) -> int:
        """Assemble everything still queued, then write every open episode (shutdown), within
        ``timeout_s``: the batches not assembled (:attr:`batches_left`) and the episodes not written by then
        stay in the WAL for the next start. Returns how many episodes are left open."""
        if timeout_s is not None:
            self._deadline = time.monotonic() + timeout_s
        self._queue.put(None)
        self._thread.join(None if timeout_s is None else timeout_s + _TICK_S)
        if self._thread.is_alive():  # one conversion outlasting the timeout: the WAL keeps everything
            return self.assembler.open_episodes
        if self._deadline is None:
            self.assembler.flush()
        else:
            left = max(0.0, self._deadline - time.monotonic())
            self.assembler.flush(deadline=self.assembler.clock() + left)
        return self.assembler.open_episodes


def replay(assembler: Assembler, wal: WriteAheadLog) -> int:
    """Feed what ``wal`` holds from earlier runs to ``assembler``: its unfinished episodes open again, its
    written ones are retained (a late span makes their next revision). Returns the batches replayed."""
    batches = 0
    for segment, offset, kind, payload in wal.replay_at():
        if kind == KIND_BATCH:
            spans = spans_from_export(payload)
            assembler.add(spans, segment, resident_bytes(spans, len(payload)), offset)
            batches += 1
        elif kind == KIND_WRITTEN:
            assembler.replay_marker(payload)
        elif kind == KIND_OPEN:
            assembler.replay_open(payload)
    assembler.replay_done()
    return batches
