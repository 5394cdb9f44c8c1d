"""``--forward URL``: pass every received batch on, byte for byte, to another OTLP/HTTP endpoint (e.g.
Jaeger).

Ingest never waits for the target: :meth:`Forwarder.submit` only appends to a queue bounded in bytes
(``max_queued_bytes``), and one background thread posts the batches in order with the original body,
``Content-Type`` and ``Content-Encoding``. A failed post (connection error, 429, 5xx) is retried with
exponential backoff up to ``max_backoff_s``, and never sooner than the target's ``Retry-After`` (new batches
arriving meanwhile do not cut the wait short); a 4xx other than 429 will never succeed and is dropped
(:attr:`Forwarder.rejected`). When the target stays down long enough for the queue to fill, the oldest
batches are dropped and counted in :attr:`Forwarder.dropped` (and logged).

Restarts: with a ``state_dir``, what is still queued at shutdown is saved there (``pending.wal``, WAL-framed
records) and sent first by the next start. A ``kill -9`` loses the queue held in memory.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from orchestrace_collector.wal import KIND_BATCH, frame, iter_records

log = logging.getLogger(__name__)

_RETRYABLE = frozenset({429, 502, 503, 504})
PENDING_FILE = "pending.wal"


@dataclass(frozen=True, slots=True)
class _Batch:
    body: bytes
    content_type: str
    content_encoding: str | None


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
    ) -> None:
        self.url = traces_url(url)
        self.max_queued = max_queued
        self.max_queued_bytes = max_queued_bytes
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.state_dir = state_dir
        self.headers = headers or {}
        self.attempts = 0  # posts tried (sent or not)
        self._queue: deque[_Batch] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closing = False
        self._client = httpx.Client(timeout=timeout_s)
        self.sent = 0
        self.dropped = 0  # oldest batches dropped because the queue was full
        self.rejected = 0  # batches the target answered with a non-retryable 4xx
        self._warned = False
        self._warned_drop = False
        for batch in self._load_pending():
            self._enqueue(batch)
        self._thread = threading.Thread(target=self._run, name="orchestrace-forward", daemon=True)
        self._thread.start()

    def submit(self, body: bytes, content_type: str, content_encoding: str | None = None) -> None:
        with self._cond:
            self._enqueue(_Batch(body, content_type, content_encoding))
            self._cond.notify()

    def _enqueue(self, batch: _Batch) -> None:
        self._queue.append(batch)
        self._queued_bytes += len(batch.body)
        while len(self._queue) > 1 and (
            len(self._queue) > self.max_queued or self._queued_bytes > self.max_queued_bytes
        ):
            dropped = self._queue.popleft()
            self._queued_bytes -= len(dropped.body)
            self.dropped += 1
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
                if not self._queue:
                    return
                batch = self._queue[0]
            retry_after = self._post(batch)
            with self._cond:
                if retry_after is None:
                    if self._queue and self._queue[0] is batch:
                        self._queue.popleft()
                        self._queued_bytes -= len(batch.body)
                    delay = self.backoff_s
                    continue
                # Wait the whole delay: a submit's notify must not cut it short (that hammered a target
                # asking for Retry-After while traffic flowed).
                resume = time.monotonic() + max(retry_after, delay)
                while not self._closing and (left := resume - time.monotonic()) > 0:
                    self._cond.wait(left)
                if self._closing:
                    return  # the target is down at shutdown: close() saves what is queued
                delay = min(delay * 2, self.max_backoff_s)

    def _post(self, batch: _Batch) -> float | None:
        """Post one batch. None when done with it (sent or not worth retrying), else seconds to wait."""
        self.attempts += 1
        headers = {**self.headers, "Content-Type": batch.content_type}
        if batch.content_encoding:
            headers["Content-Encoding"] = batch.content_encoding
        try:
            response = self._client.post(self.url, content=batch.body, headers=headers)
        except httpx.HTTPError as exc:
            self._warn_once(f"cannot reach {self.url}: {exc}; retrying")
            return 0.0
        if response.status_code < 300:
            self.sent += 1
            return None
        if response.status_code in _RETRYABLE:
            return _retry_after(response.headers.get("Retry-After"))
        self.rejected += 1
        self._warn_once(
            f"{self.url} rejected a batch with HTTP {response.status_code}: {response.text[:200]}"
        )
        return None

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("orchestrace forward: %s", message)

    def close(self, timeout_s: float = 5.0) -> None:
        """Try to send what is queued for up to ``timeout_s``, then stop."""
        deadline = time.monotonic() + timeout_s
        while self.queued and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._cond:
            self._closing = True
            left = len(self._queue)
            self._cond.notify_all()
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()) + 1.0)
        self._client.close()
        saved = self._save_pending()
        if left or self.dropped:
            log.warning(
                "orchestrace forward: %d batches not forwarded at shutdown (%s), %d dropped while the "
                "target was unavailable",
                left,
                "saved for the next start" if saved else "lost",
                self.dropped,
            )

    def _save_pending(self) -> bool:
        if self.state_dir is None:
            return False
        with self._cond:
            batches = list(self._queue)
        path = self.state_dir / PENDING_FILE
        if not batches:
            path.unlink(missing_ok=True)
            return True
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as out:
            for batch in batches:
                meta = json.dumps({"type": batch.content_type, "encoding": batch.content_encoding})
                out.write(frame(KIND_BATCH, meta.encode() + b"\n" + batch.body))
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(path)
        return True

    def _load_pending(self) -> list[_Batch]:
        if self.state_dir is None:
            return []
        path = self.state_dir / PENDING_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        batches = []
        for _, payload in iter_records(data, str(path)):
            meta, _, body = payload.partition(b"\n")
            fields = json.loads(meta)
            batches.append(_Batch(body, str(fields["type"]), fields.get("encoding")))
        path.unlink()
        return batches


def _retry_after(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0  # an HTTP date: fall back to our own backoff
