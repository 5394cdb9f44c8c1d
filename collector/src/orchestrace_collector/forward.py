"""``--forward URL``: pass every received batch on, byte for byte, to another OTLP/HTTP endpoint (e.g. Jaeger,
or another collector).

Ingest never waits for the target: :meth:`Forwarder.submit` only appends the batch to the forward queue,
and one background thread posts the batches in order with the original body, ``Content-Type`` and
``Content- Encoding``, plus the configured ``headers`` (``--forward-headers``, ``--forward-token-file``: a
target that requires a token). A failed post (connection error, 429, 5xx) is retried with exponential
backoff up to ``max_backoff_s``, and never sooner than the target's ``Retry-After`` (seconds or an HTTP
date; new batches arriving meanwhile do not cut the wait short); a 4xx other than 429 will never succeed
and is dropped (:attr:`Forwarder.rejected`). Spans a target accepts the batch without (an OTLP
``partial_success``) are counted in :attr:`Forwarder.rejected_spans`. The queue is bounded in bytes
(``max_queued_bytes``, the queue on disk too: its segments are at most a quarter of it) and batches
(``max_queued``): past that the oldest batches are dropped, counted in :attr:`Forwarder.dropped` and
logged. The counts are kept in the queue's markers, so they survive a restart, a ``kill -9`` included.

The queue on disk: with a ``state_dir`` each batch is appended there (WAL-framed segments ``<n>.fwd``) as
it is queued, before the receiver answers, and a ``done`` marker follows each batch that leaves the queue
(sent, rejected or dropped); memory holds only where each queued batch lies. So the queue survives a clean
stop and a ``kill -9`` alike: the next start sends what no marker covers, first. Delivery is at least once:
a batch sent just before a crash, whose marker the crash cut off, is sent again (a receiver that dedups
span ids, like this collector, absorbs it). The queue is not ``fsync``-ed: after an OS crash or power loss
its last batches may not be forwarded (the spans themselves are safe in the WAL). When the disk refuses a
batch (full), it is held in memory instead, and lost by a crash.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from orchestrace_collector.wal import KIND_BATCH, KIND_WRITTEN, WriteAheadLog

log = logging.getLogger(__name__)

_RETRYABLE = frozenset({429, 502, 503, 504})
#: The longest wait a ``Retry-After`` is trusted with (a date far ahead would stall forwarding).
MAX_RETRY_AFTER_S = 300.0
SEGMENT_SUFFIX = ".fwd"


@dataclass(slots=True)
class _Batch:
    number: int  # arrival order, across restarts (the ``done`` markers count in it)
    size: int
    content_type: str
    content_encoding: str | None
    body: bytes | None = None  # held in memory only when the disk refused it
    segment: int = 0  # where its body lies in the queue on disk
    offset: int = 0


def traces_url(url: str) -> str:
    """An OTLP base URL (``http://host:4318``) gets the ``/v1/traces`` path; a full path is kept."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1/traces")
    return urlunsplit(parts)


class Forwarder:
    def __init__(
        self,
        url: str,
        *,
        max_queued: int = 10_000,
        max_queued_bytes: int = 256 << 20,
        timeout_s: float = 10.0,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        state_dir: Path | None = None,
        headers: dict[str, str] | None = None,
        verify: ssl.SSLContext | bool = True,
        segment_bytes: int = 16 << 20,
    ) -> None:
        self.url = traces_url(url)
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.headers = headers or {}
        self.attempts = 0  # posts tried (sent or not)
        self._queue: deque[_Batch] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closing = False
        self._client = httpx.Client(timeout=timeout_s, verify=verify)
        self.sent = 0
        self.dropped = 0  # oldest batches dropped because the queue was full
        self.rejected = 0  # batches the target answered with a non-retryable 4xx
        self.rejected_spans = 0  # spans of accepted batches the target refused (``partial_success``)
        self.resumed = 0  # batches found on disk at start (left by the previous run)
        self._waiting = False  # the last post failed: waiting to retry (the target is down or busy)
        self._warned = False
        self._warned_drop = False
        self._warned_disk = False
        self._next = 1
        self._spool: WriteAheadLog | None = None
        if state_dir is not None:
            self._spool = WriteAheadLog(
                state_dir,
                fsync="none",
                segment_bytes=max(1 << 16, min(segment_bytes, max_queued_bytes // 4)),
                suffix=SEGMENT_SUFFIX,
            )
            for batch in self._resume():
                self._enqueue(batch)
            self.resumed = len(self._queue)
            self._retire()
        self._thread = threading.Thread(target=self._run, name="orchestrace-forward", daemon=True)
        self._thread.start()

    def submit(self, body: bytes, content_type: str, content_encoding: str | None = None) -> None:
        with self._cond:
            if self._closing:
                return
            batch = _Batch(self._next, len(body), content_type, content_encoding)
            self._next += 1
            self._store(batch, body)
            self._enqueue(batch)
            self._cond.notify()

    def _store(self, batch: _Batch, body: bytes) -> None:
        """On disk when it can be (else in memory)."""
        if self._spool is not None:
            meta = {"n": batch.number, "type": batch.content_type, "encoding": batch.content_encoding}
            head = json.dumps(meta).encode() + b"\n"
            try:
                segment, _, offset = self._spool.append_at(head + body, KIND_BATCH)
            except OSError as exc:
                if not self._warned_disk:
                    self._warned_disk = True
                    log.warning("orchestrace forward: cannot queue on disk (%s): batches held in memory", exc)
            else:
                self._spool.done(segment)  # the spool's in-flight count is the collector WAL's, unused here
                batch.segment, batch.offset = segment, offset + len(head)
                return
        batch.body = body

    def _enqueue(self, batch: _Batch) -> None:
        self._queue.append(batch)
        self._queued_bytes += batch.size
        dropped = 0
        while len(self._queue) > 1 and (
            len(self._queue) > self.max_queued or self._queued_bytes > self.max_queued_bytes
        ):
            self._queued_bytes -= self._queue.popleft().size
            dropped += 1
        if dropped:
            self.dropped += dropped
            self._mark_done(self._queue[0].number - 1)
            if not self._warned_drop:
                self._warned_drop = True
                log.warning("orchestrace forward: queue full (target down?): dropping the oldest batches")

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    def _run(self) -> None:
        delay = self.backoff_s
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                batch = self._queue[0]
            retry_after = self._post(batch)
            self._waiting = retry_after is not None
            with self._cond:
                if retry_after is None:
                    if self._queue and self._queue[0] is batch:
                        self._queue.popleft()
                        self._queued_bytes -= batch.size
                        self._mark_done(batch.number)
                    delay = self.backoff_s
                    continue
                # Wait the whole delay: a submit's notify must not cut it short (that hammered a target
                # asking for Retry-After while traffic flowed).
                resume = time.monotonic() + max(retry_after, delay)
                while not self._closing and (left := resume - time.monotonic()) > 0:
                    self._cond.wait(left)
                if self._closing:
                    return  # the target is down at shutdown: the queue stays on disk
                delay = min(delay * 2, self.max_backoff_s)

    def _post(self, batch: _Batch) -> float | None:
        """Post one batch. None when done with it (sent or not worth retrying), else seconds to wait."""
        self.attempts += 1
        headers = {**self.headers, "Content-Type": batch.content_type}
        if batch.content_encoding:
            headers["Content-Encoding"] = batch.content_encoding
        try:
            body = batch.body
            if body is None:
                assert self._spool is not None
                body = self._spool.read(batch.segment, batch.offset, batch.size)
        except OSError as exc:
            with self._cond:
                if self._queue and self._queue[0] is batch:  # else dropped meanwhile (queue full)
                    log.error("orchestrace forward: a queued batch cannot be read back, dropped: %s", exc)
                    self.dropped += 1
            return None
        try:
            response = self._client.post(self.url, content=body, headers=headers)
        except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: closed at shutdown meanwhile
            self._warn_once(f"cannot reach {self.url}: {exc}; retrying")
            return 0.0
        if response.status_code < 300:
            self.sent += 1
            refused = _rejected_spans(response)
            if refused:
                self.rejected_spans += refused
                self._warn_once(f"{self.url} refused {refused} spans of an accepted batch (partial_success)")
            return None
        if response.status_code in _RETRYABLE:
            return _retry_after(response.headers.get("Retry-After"))
        self.rejected += 1
        self._warn_once(
            f"{self.url} rejected a batch with HTTP {response.status_code}: {response.text[:200]}"
        )
        return None

    def _mark_done(self, number: int) -> None:
        """Every batch up to ``number`` has left the queue (called with ``_cond`` held)."""
        if self._spool is None:
            return
        counts = {"dropped": self.dropped, "rejected": self.rejected, "rejected_spans": self.rejected_spans}
        try:
            self._spool.append(json.dumps({"done": number, **counts}).encode(), KIND_WRITTEN)
        except (OSError, RuntimeError) as exc:  # a full disk, or closed: those batches are sent again
            log.debug("orchestrace forward: done marker not written: %s", exc)
        self._retire()

    def _retire(self) -> None:
        """Delete the segments before the one holding the oldest queued batch."""
        if self._spool is not None:
            # Segments only grow along the queue: the first batch on disk holds the oldest one needed.
            self._spool.retire(next((b.segment for b in self._queue if b.body is None), None))

    def _resume(self) -> list[_Batch]:
        """The batches a previous run queued and no ``done`` marker covers, in order."""
        assert self._spool is not None
        found: list[_Batch] = []
        done = 0
        for segment, offset, kind, payload in self._spool.replay_at():
            if kind == KIND_WRITTEN:
                marker = json.loads(payload)
                done = max(done, int(marker["done"]))
                # The counts of the run that wrote the last marker (they only grow within a run).
                self.dropped = int(marker.get("dropped", self.dropped))
                self.rejected = int(marker.get("rejected", self.rejected))
                self.rejected_spans = int(marker.get("rejected_spans", self.rejected_spans))
            elif kind == KIND_BATCH:
                head, _, body = payload.partition(b"\n")
                meta = json.loads(head)
                number = int(meta["n"])
                self._next = max(self._next, number + 1)
                found.append(
                    _Batch(number, len(body), str(meta["type"]), meta.get("encoding"),
                           segment=segment, offset=offset + len(head) + 1)
                )
        return [b for b in found if b.number > done]

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("orchestrace forward: %s", message)

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued for up to ``timeout_s`` while the target takes it, then stop (the rest stays
        on disk; with the target down, at once)."""
        deadline = time.monotonic() + timeout_s
        while self.queued and not (self._waiting and self._spool is not None) and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._cond:
            self._closing = True
            left = len(self._queue)
            in_memory = sum(b.body is not None for b in self._queue)
            self._cond.notify_all()
        # A post in flight gets until the deadline; the thread is a daemon, its marker is then sent again.
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()) + 0.5)
        self._client.close()
        with self._cond:
            if self._spool is not None:
                self._spool.close()
        if left or self.dropped:
            log.warning(
                "orchestrace forward: %d batches not forwarded at shutdown (%s), %d dropped while the "
                "target was unavailable",
                left,
                f"{left - in_memory} kept for the next start" if self._spool is not None else "lost",
                self.dropped,
            )


def _retry_after(value: str | None) -> float:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds, or an HTTP date."""
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return 0.0  # neither: our own backoff
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)


def _rejected_spans(response: httpx.Response) -> int:
    """``partial_success.rejected_spans`` of an OTLP answer (protobuf or JSON), 0 when there is none."""
    if not response.content:
        return 0
    message = ExportTraceServiceResponse()
    try:
        if "json" in response.headers.get("content-type", ""):
            json_format.Parse(response.content, message, ignore_unknown_fields=True)
        else:
            message.ParseFromString(response.content)
    except (DecodeError, json_format.ParseError, UnicodeDecodeError):
        return 0  # not an OTLP answer (a proxy's page): nothing to count
    return int(message.partial_success.rejected_spans)
