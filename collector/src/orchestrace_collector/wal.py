"""Write-ahead log: every accepted batch is on disk before the receiver acknowledges it.

Layout: ``<out>/wal/<segment:010d>.wal``, each segment a sequence of records ``[4 bytes "OWL1"][u32 length]
[u32 crc32 of kind+payload][u8 kind][payload]`` (little endian). Kinds: ``BATCH`` (a serialized
``ExportTraceServiceRequest`` holding only the spans that were accepted), ``WRITTEN`` (a small JSON marker
the assembler appends after it has written an episode, so a replay does not write it a second time) and
``OPEN`` (a JSON marker the assembler's compaction writes before it logs an open episode's spans again, so a
replay resumes the episode at the revision it had). A replay ignores kinds it does not know.

A restarted collector never appends to an old segment: it replays them all in order and then opens a new one.
A torn or corrupt record (a crash cut the write short, a full disk left half a record) is skipped: replay
looks for the next record marker after it and goes on, so one bad record never hides the ones after it. An
append that fails (``ENOSPC``) truncates the segment back to where the record began, so the record it could
not finish is not left in the live segment either. Rotation opens the next segment before it closes the
current one: when the new file cannot be created, appends go on to the current segment and the rotation is
retried later, so a closed descriptor is never written to. Segments
are deleted oldest first, once no open episode and no batch still in flight needs them; deleting only a
prefix keeps every ``WRITTEN`` marker as long as the batches it refers to.

Durability (``fsync`` policy), the trade-off between safety and ingest speed:

* ``batch`` (default): the receiver waits for an ``fsync`` covering its record before it answers 200.
  Concurrent requests share one ``fsync`` (group commit), so throughput grows with concurrency while every
  acknowledged span survives a process crash, an OS crash and a power loss.
* ``interval``: records are handed to the OS with ``write(2)`` before the 200 and a background thread calls
  ``fsync`` every ``interval_s``. Acknowledged spans survive a crash of the collector (``kill -9``: the kernel
  still holds the pages) but an OS crash or power loss may lose the last interval.
* ``none``: never ``fsync``; the same process-crash guarantee as ``interval``, and the OS flushes when it
  likes.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import threading
import zlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

FsyncPolicy = Literal["batch", "interval", "none"]
FSYNC_POLICIES: tuple[FsyncPolicy, ...] = ("batch", "interval", "none")

KIND_BATCH = 1
KIND_WRITTEN = 2
KIND_OPEN = 3
MAGIC = b"OWL1"
_HEADER = struct.Struct("<4sIIB")
_SUFFIX = ".wal"
_LOCK = "LOCK"
#: A segment's size before the log rotates to the next, unless told otherwise.
SEGMENT_BYTES = 64 << 20


class LogInUse(OSError):
    """Another process writes this log (a running collector, or a convert into the same output)."""


class WriteAheadLog:
    def __init__(
        self,
        directory: Path,
        *,
        fsync: FsyncPolicy = "batch",
        segment_bytes: int = SEGMENT_BYTES,
        interval_s: float = 0.05,
        max_bytes: int = 0,
        suffix: str = _SUFFIX,
        exclusive: bool = False,
    ) -> None:
        """``exclusive``: hold the directory's lock while open (:class:`LogInUse` when another process holds
        it): the writers of an output directory (collect, convert, trace_dir) replay and delete segments."""
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy must be one of {FSYNC_POLICIES}, not {fsync!r}")
        directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _hold(directory / _LOCK) if exclusive else -1
        self.directory = directory
        self.suffix = suffix
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        #: 0: no limit. Above it the assembler compacts (see ``Assembler._compact``): episodes stop holding
        #: old segments, so they are deleted.
        self.max_bytes = max_bytes
        self._lock = threading.Lock()  # guards the open segment and the counters below
        self._sync_lock = threading.Lock()  # one fsync at a time; the others find their record covered
        self._segments = sorted(self._existing())
        self._inflight: defaultdict[int, int] = defaultdict(int)
        self._written_seq = 0
        self._synced_seq = 0
        self._segment = (self._segments[-1] + 1) if self._segments else 1
        self._fd = -1
        self._size = 0
        self._closed = False
        #: Bytes of every segment on disk (the ``--wal-max-mb`` bound compares against it).
        self.total_bytes = sum(_size_of(self._path(s)) for s in self._segments)
        #: Why the last append failed (None once an append succeeds again): ``/healthz`` reports it.
        self.error: str | None = None
        self._fd = self._create_segment(self._segment)
        self._segments.append(self._segment)
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if fsync == "interval":
            self._flusher = threading.Thread(
                target=self._flush_loop, args=(interval_s,), name="orchestrace-wal-fsync", daemon=True
            )
            self._flusher.start()

    # --- writing --------------------------------------------------------------------------------------------

    def append(self, payload: bytes, kind: int = KIND_BATCH) -> tuple[int, int]:
        """Append one record. Returns ``(segment, seq)``: pass ``seq`` to :meth:`sync` before acknowledging,
        and ``segment`` to :meth:`done` once the batch has been handed to assembly."""
        segment, seq, _ = self.append_at(payload, kind)
        return segment, seq

    def append_at(self, payload: bytes, kind: int = KIND_BATCH) -> tuple[int, int, int]:
        """:meth:`append`, also returning where the payload starts in its segment (for :meth:`read`)."""
        record = frame(kind, payload)
        with self._lock:
            if self._closed:
                raise RuntimeError("write-ahead log is closed")
            try:
                _write_all(self._fd, record)
            except OSError as exc:
                self.error = f"write-ahead log append failed: {exc}"
                # Cut the half-written record off so the segment stays a sequence of whole records.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)
                raise
            self.error = None
            offset = self._size + _HEADER.size
            self._size += len(record)
            self.total_bytes += len(record)
            self._written_seq += 1
            seq, segment = self._written_seq, self._segment
            if kind == KIND_BATCH:
                self._inflight[segment] += 1
            if self._size >= self.segment_bytes:
                self._rotate()
        return segment, seq, offset

    def read(self, segment: int, offset: int, length: int) -> bytes:
        """``length`` bytes of a payload that :meth:`append_at` placed at ``offset`` of ``segment``."""
        fd = os.open(self._path(segment), os.O_RDONLY)
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        if len(data) != length:
            raise OSError(f"{self._path(segment)}: {len(data)} of {length} bytes at {offset}")
        return data

    def needs_sync(self, seq: int) -> bool:
        return self.fsync == "batch" and self._synced_seq < seq

    def sync(self, seq: int) -> None:
        """Make every record up to ``seq`` durable (under the ``batch`` policy; a no-op otherwise)."""
        if self.needs_sync(seq):
            self._fsync_written()

    def _fsync_written(self) -> None:
        with self._sync_lock:
            with self._lock:
                if self._closed:
                    return
                target = self._written_seq
                if self._synced_seq >= target:
                    return
                # A duplicate descriptor, so a concurrent rotation may close the original meanwhile.
                fd = os.dup(self._fd)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            with self._lock:
                self._synced_seq = max(self._synced_seq, target)

    def _flush_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self._fsync_written()
            except OSError:
                log.exception("orchestrace: WAL fsync failed")

    def _create_segment(self, segment: int) -> int:
        fd = os.open(self._path(segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            if self.fsync != "none":
                _fsync_dir(self.directory)  # the new file's directory entry must survive too
        except OSError:
            os.close(fd)
            raise
        return fd

    def _rotate(self) -> None:
        """Switch to a new segment; on failure keep appending to the current one (retried next append)."""
        try:
            if self.fsync != "none":
                os.fsync(self._fd)
            fd = self._create_segment(self._segment + 1)
        except OSError as exc:
            log.warning("orchestrace: WAL segment rotation failed (retried later): %s", exc)
            return
        if self.fsync != "none":
            self._synced_seq = self._written_seq
        old, self._fd = self._fd, fd
        os.close(old)
        self._segment += 1
        self._size = 0
        self._segments.append(self._segment)

    # --- retention ------------------------------------------------------------------------------------------

    def done(self, segment: int) -> None:
        """A batch of ``segment`` has been handed to assembly (its episodes now hold the segment open)."""
        with self._lock:
            self._inflight[segment] -= 1
            if self._inflight[segment] <= 0:
                del self._inflight[segment]

    def retire(self, keep_from: int | None) -> int:
        """Delete the oldest segments below ``keep_from`` (None: no open episode needs any) that are sealed
        and have no batch in flight. Returns how many were deleted."""
        deleted = 0
        with self._lock:
            while len(self._segments) > 1:
                oldest = self._segments[0]
                if oldest == self._segment or self._inflight.get(oldest, 0) > 0:
                    break
                if keep_from is not None and oldest >= keep_from:
                    break
                path = self._path(oldest)
                size = _size_of(path)
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                self.total_bytes -= size
                self._segments.pop(0)
                deleted += 1
        return deleted

    @property
    def segments(self) -> list[int]:
        with self._lock:
            return list(self._segments)

    # --- replay ---------------------------------------------------------------------------------------------

    def replay(self) -> Iterator[tuple[int, int, bytes]]:
        """Yield ``(segment, kind, payload)`` for every intact record of the segments left by a previous
        run."""
        for segment, _, kind, payload in self.replay_at():
            yield segment, kind, payload

    def replay_at(self) -> Iterator[tuple[int, int, int, bytes]]:
        """:meth:`replay` with each payload's offset in its segment: ``(segment, offset, kind, payload)``."""
        for segment in [s for s in self.segments if s != self._segment]:
            try:
                data = self._path(segment).read_bytes()
            except FileNotFoundError:
                continue
            for offset, kind, payload in records_at(data, str(self._path(segment))):
                yield segment, offset, kind, payload

    def close(self) -> None:
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self.fsync != "none":
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)
                if self._lock_fd >= 0:
                    os.close(self._lock_fd)  # releases the lock

    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:010d}{self.suffix}"

    def _existing(self) -> Iterator[int]:
        for path in self.directory.glob(f"*{self.suffix}"):
            if path.stem.isdigit():
                yield int(path.stem)


def iter_records(data: bytes, where: str = "WAL") -> Iterator[tuple[int, bytes]]:
    """``(kind, payload)`` of every intact record; a torn or corrupt stretch is skipped up to the next
    record marker (and logged)."""
    for _, kind, payload in records_at(data, where):
        yield kind, payload


def records_at(data: bytes, where: str = "WAL") -> Iterator[tuple[int, int, bytes]]:
    """:func:`iter_records` with the offset of each payload: ``(offset, kind, payload)``."""
    offset = 0
    while offset < len(data):
        if offset + _HEADER.size <= len(data):
            magic, length, crc, kind = _HEADER.unpack_from(data, offset)
            start = offset + _HEADER.size
            payload = data[start : start + length]
            if magic == MAGIC and len(payload) == length and _crc(kind, payload) == crc:
                yield start, kind, payload
                offset = start + length
                continue
        following = data.find(MAGIC, offset + 1)
        resume = len(data) if following < 0 else following
        log.warning(
            "orchestrace: %s: torn or corrupt record at byte %d, %d bytes skipped",
            where,
            offset,
            resume - offset,
        )
        offset = resume


def frame(kind: int, payload: bytes) -> bytes:
    """One record: header, then payload."""
    return _HEADER.pack(MAGIC, len(payload), _crc(kind, payload), kind) + payload


def is_wal(data: bytes) -> bool:
    return data[: len(MAGIC)] == MAGIC


def batches_as_request(data: bytes) -> bytes:
    """The ``BATCH`` records of a segment as one serialized ``ExportTraceServiceRequest`` (protobuf merges
    concatenated messages: their ``resource_spans`` add up). How ``convert`` reads a spool."""
    return b"".join(payload for kind, payload in iter_records(data) if kind == KIND_BATCH)


def _crc(kind: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(bytes((kind,))))


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _hold(path: Path) -> int:
    """Open ``path`` and take its exclusive lock (released when the descriptor closes or the process ends)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogInUse(f"{path.parent} is in use by another process (a collector or a convert)") from None
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
