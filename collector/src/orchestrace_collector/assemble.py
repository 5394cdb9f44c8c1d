"""Assembly: spans arrive in any order, from any number of processes; episodes leave, complete, as traces.

Grouping. An *episode* (one rollout) is keyed by the ``orchestrace.episode.id`` attribute found on any span
of an OTel trace, else by the OTel trace id. ``gen_ai.conversation.id`` never groups: a conversation (a chat
session, a LangGraph thread) may hold many rollouts. Spans of an OTel trace that arrived before the
attribute did are moved into the episode when it appears, so a LangGraph interrupt and its resume (two OTel
traces, one thread id) become one orchestration trace. A span id seen twice (an exporter retry) counts once.

Continued traces. A root span that names no episode and whose links point into one other OTel trace (not
counting orchestrace's own typed links) continues that trace: its OTel trace joins that trace's episode, as
an episode id would join it, whichever of the two arrives first. Runtimes that hand work over by message
start a trace per message and link it to the sender's span (AutoGen's runtime with no span around the run:
one trace per message); the converter puts such a root under the span it links to. A root linking into
several traces (a batch consumer) joins none.

Completion. An episode is written when one of its root spans (no parent) has ended and no span arrived for
``quiet_period_s``; when no span arrived for ``idle_timeout_s`` whatever its state (orphans whose parent never
comes: the converter marks what is missing as incomplete); on :meth:`flush` (force flush, shutdown).

Late spans. A written episode is retained (its spans, up to ``retain_spans`` spans over all retained episodes)
so that a span arriving later reopens it and writes it again as the next revision (see ``output.py``). A late
span for an episode no longer retained is written as a separate fragment trace whose ``trace_id`` gets the
suffix ``.late<revision>``, so it never replaces the full trace for readers that take the last revision.

Storage failures. Writing an episode that fails with ``OSError`` (disk full, no file descriptor left) leaves
the episode open and unmarked: nothing is lost, :attr:`Assembler.storage_error` says why (the receivers answer
503 and ``/healthz`` reports it) and the write is retried every ``retry_s`` until it works. Only once the
written lines are ``fsync``-ed (``durable``) does the WAL get the ``WRITTEN`` marker. The marker counts the
spans written: a batch logged before the marker but assembled after the write (acknowledged while the
episode was being written) makes a replay hold more spans than that, and the episode then stays open as the
next revision instead of counting as written.

Revisions across restarts. Each written episode's key and revision are also appended to ``written.idx`` next
to the WAL, so a restarted collector knows what it wrote even after the WAL segments holding the marker were
deleted: a late span for such an episode becomes a ``.late<n>`` fragment, never a revision 0 that would
supersede the full trace. Episodes still in the WAL are rebuilt as retained on replay, so a late span merges
into them as the next revision. Each write also records the episode's task and its OTel traces other than its
key, so that a late fragment keeps the task and a late span naming only its OTel trace (a straggler's, under
the task's span) still finds the episode. ``written.idx`` holds the newest ``max_known_episodes`` keys: it is
rewritten with just those whenever it reaches twice as many lines, at start and while running. ``convert`` and
``trace_dir`` keep the same log in the output directory (:meth:`Assembler.keep_retained`): one rule on every
path.

Conflicts. A span id seen again with different content keeps the first copy; the trace counts the copies it
refused in ``metrics.span_conflicts``.

Exactly once. A span seen again with the same content (an exporter retry, a client that sends everything
again) is absorbed: it reopens nothing and makes no revision (:attr:`Assembler.duplicates` counts them). That
holds for open and retained episodes by their spans, for episodes let go by the ids of their spans (the newest
``remember_spans``), and across restarts by ``written.idx``, which records with each write its span count and
a digest of its span ids: an episode about to be written as a fragment whose first spans are exactly a
recorded write's (a torn WAL tail lost its ``WRITTEN`` marker, or a sender re-sent a released episode) is that
write. With no more spans it is not written again; with more it is that write's next revision rather than a
fragment. Each recorded write also holds the WAL position of the last batch it took spans from (batches are
assembled in the order the WAL holds them): after a replay, a fragment whose every span came from the log at
or before that position is what a torn log (a segment cut short, ``WRITTEN`` markers and some of the
episode's batches gone) left of that write, and is let go unwritten (:meth:`Assembler.replay_done`).

Bounds. Memory is held by the open episodes plus the retention budget, not by the total traffic; both are
bounded: above ``max_open_episodes`` or ``max_bytes`` (the estimated resident bytes of open and retained
spans, ``spans.resident_bytes``) retained episodes are let go and the oldest open ones written as they are;
so are they when a request that held spans keep out of the memory limit asks for room (:meth:`make_room`).
Converting an episode costs a few times what its spans hold (about 5 KiB a span, most of it the trace's
records and lines), so one whose spans pass a third of ``max_bytes`` is written as it is, in parts as it
grows: it is then too large to be retained, so its later spans make ``.late<n>`` fragments, and no single
conversion outgrows the memory limit.
With a write-ahead log, the oldest segment any open or retained episode still needs is kept and older ones
are deleted. Above the log's ``max_bytes`` it is compacted while running (``_compact``, one segment a tick):
written episodes stop holding segments, and the open episodes holding the oldest segment have their spans
logged again at the log's end (an ``OPEN`` marker, then one batch), so the segment, whose other records are
all written episodes', is deleted; a long-open episode never pins the log. Only open episodes too large to
carry (over a quarter of ``max_bytes``) are written as they are instead. A ``WRITTEN`` marker per written
episode lets a replay skip what was already written.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrace_semconv import ORCH_EPISODE_ID

from orchestrace_collector.encode import request_from_spans
from orchestrace_collector.keyed_index import KeyedIndex
from orchestrace_collector.model import SPAN_CONFLICTS, SPAN_COUNT, Trace, Turn
from orchestrace_collector.spans import Span, continued_link
from orchestrace_collector.wal import KIND_BATCH, KIND_OPEN, KIND_WRITTEN, WriteAheadLog

log = logging.getLogger(__name__)

#: Next to the WAL segments: one ``{"key": .., "revision": ..}`` line per written episode.
WRITTEN_INDEX = "written.idx"
_MASK64 = (1 << 64) - 1


def span_hash(span: Span) -> int:
    """A 64-bit name of a span (its trace and span ids), the same in every process: what the written index's
    digests and the memory of let-go spans hold instead of the ids."""
    return (_trace_hash(span.trace_id) ^ int(span.span_id, 16)) & _MASK64


def _trace_hash(trace_id: str) -> int:
    """The trace id's part of :func:`span_hash` (the same for every span of a trace)."""
    return int(trace_id, 16) * 0x9E3779B97F4A7C15 & _MASK64


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """What one write of an episode was: its revision and fragment number, how many spans, their digest,
    and where in the WAL the last batch it took spans from is (``(segment, offset)``, None: not known)."""

    revision: int
    late: int
    spans: int
    digest: int
    upto: tuple[int, int] | None = None
    task_id: str | None = None  # the written trace's: a late fragment of the episode is of that task too
    #: Its OTel traces other than its key: a late span naming only its OTel trace (a straggler's, under the
    #: task's span) still finds the episode once its spans were let go.
    traces: tuple[str, ...] = ()


class ConvertedEpisode(Protocol):
    """What the converter returns (``orchestrace_collector.convert.Episode``)."""

    trace: Trace
    turns: list[Turn]
    contents: dict[str, str]
    trace_id: str  # the trace's, without making its model
    task_id: str  # the trace's and its turns' (set: both)

    @property
    def metrics(self) -> dict[str, float]: ...  # the trace's, without making its model

    def record_lines(self, revision: int, max_trace_bytes: int) -> tuple[bytes, list[bytes]] | None: ...


class TraceSink(Protocol):
    """Where converted episodes go: ``output.TraceDirWriter``, or a list for ``convert_spans``."""

    def write_episode(self, episode: ConvertedEpisode, *, revision: int = 0) -> None: ...

    def sync(self) -> None:
        """Make what was written durable (called before episodes are marked written in the WAL)."""


Converter = Callable[[Sequence[Span]], ConvertedEpisode]
#: Applied to every converted episode before it is written (``--reward module:function``).
EpisodeHook = Callable[[ConvertedEpisode], None]


class EpisodeConverter:
    """``convert_episode`` with a credit strategy (a class, so that Ray can ship it to its workers)."""

    def __init__(self, credit: str = "causal") -> None:
        from orchestrace_collector.convert.credit import check_strategy

        check_strategy(credit)
        self.credit = credit

    def __call__(self, spans: Sequence[Span]) -> ConvertedEpisode:
        from orchestrace_collector.convert import (
            convert_episode,  # imported late: the converter is the heavy part
        )

        return convert_episode(spans, credit=self.credit)


default_converter: Converter = EpisodeConverter()


def episode_key_of(span: Span) -> str | None:
    return episode_key(span.attributes)


def episode_key(attributes: Mapping[str, Any]) -> str | None:
    """The episode a span's attributes name (``orchestrace.episode.id``), if any."""
    value = attributes.get(ORCH_EPISODE_ID)
    return str(value) if value else None


@dataclass(slots=True)
class _Episode:
    key: str
    revision: int = 0
    spans: dict[str, Span] = field(default_factory=dict)
    #: :func:`span_hash` of each of ``spans``, in its order: computed once per span, as it arrives.
    hashes: list[int] = field(default_factory=list)
    otel_traces: set[str] = field(default_factory=set)
    root_ended: bool = False
    last_arrival: float = 0.0
    first_segment: int | None = None
    upto: tuple[int, int] | None = None  # WAL position of the last batch that added spans to it
    late: int = 0  # > 0: late spans of an episode no longer retained, written as fragment ``.late<late>``
    conflicts: int = 0  # span ids seen again with different content (the first copy is kept)
    nbytes: int = 0  # what the spans cost in memory (the caller's estimate), what the memory limit counts
    closed_at: int = -1  # span count when :meth:`rootless_but_closed` last found a parent missing
    task_id: str | None = None  # of its written trace

    def rootless_but_closed(self) -> bool:
        """No root, yet every span's parent is here: the parents form a cycle, so no root will ever come and
        the episode completes like one whose root ended (the converter marks it incomplete)."""
        if self.root_ended or self.closed_at == len(self.spans):
            return False
        if all(s.parent_span_id in self.spans and s.end_ns > 0 for s in self.spans.values()):
            return True
        self.closed_at = len(self.spans)
        return False

    def put(
        self,
        span: Span,
        hashed: int,
        now: float,
        segment: int | None,
        nbytes: int,
        at: tuple[int, int] | None,
    ) -> None:
        """Add a span whose id it does not hold yet (``Assembler.add`` checks that)."""
        self.spans[span.span_id] = span
        self.hashes.append(hashed)
        self.nbytes += nbytes
        if at is not None and (self.upto is None or at > self.upto):
            self.upto = at
        self.otel_traces.add(span.trace_id)
        self.last_arrival = now
        if (span.parent_span_id is None or span.parent_span_id == span.span_id) and span.end_ns > 0:
            self.root_ended = True
        if segment is not None and (self.first_segment is None or segment < self.first_segment):
            self.first_segment = segment

    def absorb(self, other: _Episode) -> None:
        for (span_id, span), hashed in zip(other.spans.items(), other.hashes, strict=True):
            if span_id not in self.spans:
                self.spans[span_id] = span
                self.hashes.append(hashed)
        self.conflicts += other.conflicts
        self.nbytes += other.nbytes
        self.otel_traces |= other.otel_traces
        self.root_ended = self.root_ended or other.root_ended
        self.last_arrival = max(self.last_arrival, other.last_arrival)
        if other.first_segment is not None:
            self.first_segment = min(self.first_segment or other.first_segment, other.first_segment)
        if other.upto is not None and (self.upto is None or other.upto > self.upto):
            self.upto = other.upto

    def digest(self, spans: int | None = None) -> int:
        """An order-free digest of the ids of the first ``spans`` spans (all by default): the sum of their
        :func:`span_hash`."""
        return sum(self.hashes[:spans]) & _MASK64


class Assembler:
    """Thread-safe. The collector drives it from one thread; the in-process exporter from the SDK's
    threads."""

    def __init__(
        self,
        writer: TraceSink,
        *,
        quiet_period_s: float = 2.0,
        idle_timeout_s: float = 300.0,
        retain_spans: int = 50_000,
        max_known_episodes: int = 100_000,
        converter: Converter = default_converter,
        hook: EpisodeHook | None = None,
        wal: WriteAheadLog | None = None,
        max_open_episodes: int = 0,
        max_bytes: int = 0,
        remember_spans: int = 200_000,
        retry_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.quiet_period_s = quiet_period_s
        self.idle_timeout_s = idle_timeout_s
        self.retain_spans = retain_spans
        self.max_known_episodes = max_known_episodes
        self.converter = converter
        self.hook = hook
        self.wal = wal
        self.clock = clock
        self._lock = threading.RLock()
        self._open: dict[str, _Episode] = {}
        self._retained: OrderedDict[str, _Episode] = OrderedDict()  # written, oldest first
        self._retained_spans = 0
        self._written: OrderedDict[str, int] = OrderedDict()  # key -> last revision written (bounded)
        self._writes: dict[str, WriteRecord] = {}  # key -> its last write, for the keys of ``_written``
        self._written_traces: dict[str, str] = {}  # OTel trace id -> key, from ``_writes[key].traces``
        #: :func:`span_hash` of the spans of episodes let go (no longer retained), newest last; bounded. An
        #: OrderedDict: dropping its oldest is O(1), where a dict's first live entry is found by skipping
        #: every slot deleted before it (letting go was quadratic in the spans let go).
        self._released: OrderedDict[int, None] = OrderedDict()
        self.remember_spans = remember_spans
        #: Spans absorbed as copies of spans already held or written (retries, re-sends).
        self.duplicates = 0
        self._trace_keys: dict[str, str] = {}  # OTel trace id -> episode key, for open and retained episodes
        #: OTel trace id not seen yet -> the traces that continue it (their roots arrived first); bounded.
        self._continuing: OrderedDict[str, list[str]] = OrderedDict()
        self.failed = 0
        #: 0: no cap; else above this many open episodes the oldest is written as it is (``incomplete``).
        self.max_open_episodes = max_open_episodes
        #: 0: no bound. Else open + retained spans above this many bytes (``nbytes``, the caller's estimate of
        #: their resident cost): retained episodes are let go
        #: first (a late span for them becomes a fragment), then the oldest open ones written as they are.
        self.max_bytes = max_bytes
        self.retry_s = retry_s
        #: Why the last write failed, None when writing works: the receivers answer 503 meanwhile.
        self.storage_error: str | None = None
        self._retry_at = 0.0
        self.open_bytes = 0
        self.retained_bytes = 0
        self._room = 0  # bytes a refused request needs (:meth:`make_room`)
        self._index: KeyedIndex | None = None
        if wal is not None:
            self._index = KeyedIndex(wal.directory / WRITTEN_INDEX, max_known_episodes)
            self._written, self._writes = _load_written(self._index)
            for key, write in self._writes.items():
                self._written_traces.update(dict.fromkeys(write.traces, key))

    # --- input ----------------------------------------------------------------------------------------------

    def add(
        self, spans: Iterable[Span], segment: int | None = None, nbytes: int = 0, offset: int | None = None
    ) -> None:
        """Add spans; ``nbytes``: what they cost in memory (counted against the memory limit); ``segment`` and
        ``offset``: where the WAL holds them (batches must be added in the order the WAL holds them)."""
        at = (segment, offset) if segment is not None and offset is not None else None
        now = self.clock()
        spans = list(spans)
        each = nbytes // len(spans) if spans else 0
        traces: dict[str, int] = {}  # trace id -> its part of the hash: a batch holds few traces
        with self._lock:
            for span in spans:
                trace_hash = traces.get(span.trace_id)
                if trace_hash is None:
                    trace_hash = traces[span.trace_id] = _trace_hash(span.trace_id)
                hashed = (trace_hash ^ int(span.span_id, 16)) & _MASK64  # span_hash(span)
                key = self._trace_keys.get(span.trace_id)
                episode = self._open.get(key) if key is not None else None
                if (
                    episode is not None
                    and span.span_id not in episode.spans
                    and not span.links
                    and episode_key_of(span) in (None, key)
                    and hashed not in self._released
                ):
                    # Most spans: a new span of a trace whose episode is open and stays the same, as
                    # ``_is_copy`` and ``_episode_for`` find for it (everything else goes their way).
                    episode.put(span, hashed, now, segment, each, at)
                    self.open_bytes += each
                    continue
                if self._is_copy(span, hashed):
                    self.duplicates += 1
                    continue
                episode = self._episode_for(span)
                previous = episode.spans.get(span.span_id)
                if previous is None:
                    episode.put(span, hashed, now, segment, each, at)
                    self.open_bytes += each
                elif previous != span:
                    episode.conflicts += 1  # the first copy is kept

    def _is_copy(self, span: Span, hashed: int) -> bool:
        """Whether ``span`` (whose :func:`span_hash` is ``hashed``) is one already held with the same content,
        or one of an episode let go."""
        key = self._trace_keys.get(span.trace_id)
        held = (self._open.get(key) or self._retained.get(key)) if key is not None else None
        if held is not None and span.span_id in held.spans:
            return held.spans[span.span_id] == span
        return hashed in self._released

    def _episode_for(self, span: Span) -> _Episode:
        named = episode_key_of(span)
        current = self._trace_keys.get(span.trace_id)
        if named is None and span.links:
            named = self._continued(span)
        if named is None and current is None:
            named = self._written_traces.get(span.trace_id)  # of an episode let go (see ``WriteRecord``)
        if named is not None and current is None:
            key = named
        elif named is not None and current == span.trace_id and named != current and current in self._open:
            # The episode id showed up after spans of this trace: move them into the named episode.
            return self._move(current, named)
        else:
            key = current or span.trace_id
        self._trace_keys[span.trace_id] = key
        episode = self._reopen_or_open(key)
        if current is None and self._continuing:
            for trace_id in self._continuing.pop(span.trace_id, ()):
                if self._trace_keys.get(trace_id) == trace_id != key and trace_id in self._open:
                    self._move(trace_id, key)
        return episode

    def _continued(self, span: Span) -> str | None:
        """The episode of the trace ``span`` continues (see the module docstring), if it is known yet; if not,
        the trace waits for it."""
        link = continued_link(span)
        if link is None:
            return None
        key = self._trace_keys.get(link[0])
        if key is None:
            self._continuing.setdefault(link[0], []).append(span.trace_id)
            if len(self._continuing) > self.max_known_episodes:
                self._continuing.popitem(last=False)
        return key

    def _move(self, key: str, into: str) -> _Episode:
        """Move the open episode ``key`` into the episode ``into`` (opened or reopened)."""
        moved = self._open.pop(key)
        target = self._reopen_or_open(into)
        target.absorb(moved)
        for trace_id in moved.otel_traces:
            self._trace_keys[trace_id] = into
        return target

    def _reopen_or_open(self, key: str) -> _Episode:
        episode = self._open.get(key)
        if episode is not None:
            return episode
        retained = self._take_retained(key)
        if retained is not None:
            retained.revision += 1
            episode = retained
        elif key in self._written:
            episode = _Episode(key=key, late=self._written[key] + 1)
        else:
            episode = _Episode(key=key)
        self._open[key] = episode
        return episode

    def _take_retained(self, key: str) -> _Episode | None:
        """Move a retained episode's bytes back to the open ones (the caller opens it)."""
        retained = self._retained.pop(key, None)
        if retained is not None:
            self._retained_spans -= len(retained.spans)
            self.retained_bytes -= retained.nbytes
            self.open_bytes += retained.nbytes
        return retained

    # --- completion -----------------------------------------------------------------------------------------

    def tick(self) -> int:
        """Write the episodes that are complete now. Returns how many were written."""
        now = self.clock()
        with self._lock:
            if now < self._retry_at:
                return 0
            part = self.max_bytes // 3
            due = [
                e
                for e in self._open.values()
                if (now - e.last_arrival >= self.quiet_period_s and (e.root_ended or e.rootless_but_closed()))
                or now - e.last_arrival >= self.idle_timeout_s
                or (part and e.nbytes > part)
            ]
            if self.max_open_episodes and len(self._open) - len(due) > self.max_open_episodes:
                # Over the cap: the oldest open episodes are written as they are (their missing parts are
                # marked incomplete by the converter); a span arriving later makes a new revision.
                chosen = {id(e) for e in due}
                rest = [e for e in self._open.values() if id(e) not in chosen]
                due.extend(rest[: len(rest) - self.max_open_episodes])
            room, self._room = self._room, 0
            held = self.open_bytes + self.retained_bytes
            target = min(self.max_bytes * 3 // 4, held - room)
            if self.max_bytes and (held > self.max_bytes or room):
                due.extend(self._shed(due, target))
            if self.wal is not None and self.wal.max_bytes and self.wal.total_bytes > self.wal.max_bytes:
                due.extend(self._compact(due))
            written = self._complete_all(due)
            while room and self._retained and self.open_bytes + self.retained_bytes > target:
                self._evict_oldest_retained()  # what was written to make room is not kept for late spans
            return written

    def _compact(self, due: Sequence[_Episode]) -> list[_Episode]:
        """The WAL is over its size limit: written (retained) episodes stop holding segments (a late span
        for them after a restart becomes a fragment), and the open episodes holding the oldest segment are
        logged again at the end of the log so that segment can go. Returns the episodes to write as they
        are instead: those holders when they are too large to carry."""
        assert self.wal is not None
        for episode in self._retained.values():
            episode.first_segment = None
        chosen = {id(e) for e in due}
        pinned = [e for e in self._open.values() if e.first_segment is not None and id(e) not in chosen]
        if not pinned:
            self._retire_wal()
            return []
        oldest = min(e.first_segment for e in pinned if e.first_segment is not None)
        if oldest >= self.wal.segments[-1]:
            return []  # only the live segment is held: nothing to gain
        holders = [e for e in pinned if e.first_segment == oldest]
        payloads = [request_from_spans(e.spans.values()).SerializeToString() for e in holders]
        if sum(map(len, payloads)) > self.wal.max_bytes // 4:
            return holders
        try:
            self._relog(holders, payloads)
        except OSError as exc:  # the log cannot be appended to: the episodes keep their segments
            log.warning("orchestrace: WAL compaction failed (retried): %s", exc)
            return []
        self._retire_wal()
        return []

    def _relog(self, episodes: Sequence[_Episode], payloads: Sequence[bytes]) -> None:
        """Log open episodes' spans again (``OPEN`` marker, then the batch); once that is durable, they hold
        the segment it went to instead of their older ones."""
        assert self.wal is not None
        moved: list[tuple[_Episode, int]] = []
        seq = 0
        for episode, payload in zip(episodes, payloads, strict=True):
            marker = {"key": episode.key, "revision": episode.revision, "late": episode.late}
            segment, _ = self.wal.append(json.dumps(marker).encode(), KIND_OPEN)
            batch_segment, seq = self.wal.append(payload, KIND_BATCH)
            self.wal.done(batch_segment)  # not queued for assembly: these spans are held already
            moved.append((episode, segment))
        self.wal.sync(seq)
        for episode, segment in moved:
            episode.first_segment = segment

    def keep_retained(self) -> None:
        """For a run that ends (``convert``, ``trace_dir``): log each retained episode's spans again, with
        its ``WRITTEN`` marker, and delete every older segment. The log then holds just what the next run on
        the same output replays to make a late span the next revision of what this one wrote."""
        assert self.wal is not None
        with self._lock:
            seq = 0
            for episode in self._retained.values():
                payload = request_from_spans(episode.spans.values()).SerializeToString()
                episode.first_segment, _ = self.wal.append(payload, KIND_BATCH)
                self.wal.done(episode.first_segment)  # not queued for assembly: these spans are held
                _, seq = self.wal.append(_written_marker(episode), KIND_WRITTEN)
            self.wal.sync(seq)
            self._retire_wal()

    def make_room(self, nbytes: int) -> None:
        """A request that needs ``nbytes`` more was refused for memory: the next :meth:`tick` lets go of
        held spans to make that room (retained ones first, then the oldest open episodes, written)."""
        self._room = max(self._room, nbytes)

    def _shed(self, due: Sequence[_Episode], target: int) -> list[_Episode]:
        """Over ``max_bytes``, or asked for room: drop retained episodes, then pick the oldest open episodes
        to write, until ``target`` (a quarter below the bound, so that it is not crossed again at once)."""
        while self._retained and self.open_bytes + self.retained_bytes > target:
            self._evict_oldest_retained()
        chosen = {id(e) for e in due}
        remaining = self.open_bytes - sum(e.nbytes for e in due)
        extra: list[_Episode] = []
        for episode in self._open.values():
            if remaining <= target:
                break
            if id(episode) not in chosen:
                extra.append(episode)
                remaining -= episode.nbytes
        return extra

    def flush(self, *, only_ended: bool = False, deadline: float | None = None) -> int:
        """Write every open episode now (``only_ended``: those whose root has ended). ``deadline``
        (``clock`` time): stop there; what is left stays open (and in the WAL for the next start)."""
        with self._lock:
            due = [e for e in self._open.values() if e.root_ended or not only_ended]
            return self._complete_all(due, deadline)

    @property
    def open_episodes(self) -> int:
        # No lock: a conversion in progress holds it, and the length of a dict is read atomically.
        return len(self._open)

    def _complete_all(self, due: Sequence[_Episode], deadline: float | None = None) -> int:
        """Write ``due``, make the output durable, then mark them written. Stops at the first storage
        failure: the episodes not marked stay open and are retried after ``retry_s``."""
        written: list[_Episode] = []
        try:
            for episode in due:
                if deadline is not None and self.clock() >= deadline:
                    break
                if not self._is_last_write(episode):
                    self._write(episode)
                written.append(episode)
            if written and self.durable:
                self.writer.sync()
        except OSError as exc:
            self._storage_failed(exc)
            return 0
        if self.storage_error is not None:
            log.warning("orchestrace: writing traces works again")
            self.storage_error = None
        for episode in written:
            self._complete(episode)
        if written or due:
            self._retire_wal()
        return len(written)

    def _storage_failed(self, exc: OSError) -> None:
        if self.storage_error is None:
            log.error("orchestrace: cannot write traces (%s); episodes kept, retrying", exc)
        self.storage_error = f"cannot write traces: {exc}"
        self._retry_at = self.clock() + self.retry_s

    @property
    def durable(self) -> bool:
        return self.wal is not None and self.wal.fsync != "none"

    def _complete(self, episode: _Episode) -> None:
        del self._open[episode.key]
        self.open_bytes -= episode.nbytes
        if self.wal is not None:
            try:
                self.wal.append(_written_marker(episode), KIND_WRITTEN)
            except OSError as exc:
                # The trace is on disk; without its marker a replay writes it again with the same revision
                # (an identical line that readers absorb).
                log.warning("orchestrace: WAL marker for %s not written: %s", episode.key, exc)
        self._mark_written(episode)

    def _is_last_write(self, episode: _Episode) -> bool:
        """A fragment whose first spans are exactly those of its key's last write (see the module docstring)
        takes that write's revision: True when it holds nothing more (nothing to write); with more spans it
        becomes the next revision of that write."""
        write = self._writes.get(episode.key)
        if not episode.late or write is None or len(episode.spans) < write.spans:
            return False
        if episode.digest(write.spans) != write.digest:
            return False
        episode.revision, episode.late = write.revision, write.late
        if len(episode.spans) == write.spans:
            return True
        episode.revision += 1
        return False

    def _write(self, episode: _Episode) -> None:
        """Convert and write one episode. A conversion error is logged and counted (the episode counts as
        written: it would fail again). An ``OSError``, from the writer or the converter (a lazy import
        without a descriptor left), is about the machine, not the episode: it propagates and the episode is
        kept."""
        spans = list(episode.spans.values())
        try:
            converted = self.converter(spans)
            if self.hook is not None:
                self.hook(converted)
            if episode.late:
                # The episode's name, not what its spans alone say (a straggler's names its OTel trace only).
                converted.trace_id = f"{episode.key}.late{episode.late}"
                write = self._writes.get(episode.key)
                if write is not None and write.task_id is not None:
                    # Its spans alone may not say the task (a straggler's span under the task's): the
                    # episode's as written, never the OTel trace id standing in for it.
                    converted.task_id = write.task_id
            else:
                episode.task_id = converted.task_id
            converted.metrics[SPAN_COUNT] = float(len(spans))
            if episode.conflicts:
                converted.metrics[SPAN_CONFLICTS] = float(episode.conflicts)
            self.writer.write_episode(converted, revision=episode.revision)
        except OSError:
            raise
        except Exception:
            # One bad episode must never stop the collector; it is logged with enough to find it again.
            self.failed += 1
            log.exception("orchestrace: could not write episode %s (%d spans)", episode.key, len(spans))

    def _mark_written(self, episode: _Episode) -> None:
        """Retain a written episode for late spans, within the span budget."""
        key = episode.key
        # The highest number used for this key, revision or fragment: the next fragment gets the one after.
        self._written[key] = max(self._written.get(key, 0), episode.revision, episode.late)
        self._written.move_to_end(key)
        known = self._writes.get(key)
        traces = tuple(sorted((episode.otel_traces | set(known.traces if known else ())) - {key}))
        self._writes[key] = WriteRecord(
            episode.revision, episode.late, len(episode.spans), episode.digest(), episode.upto,
            episode.task_id if episode.task_id is not None else known.task_id if known else None,
            traces,
        )
        self._written_traces.update(dict.fromkeys(traces, key))
        while len(self._written) > self.max_known_episodes:
            forgotten = self._writes.pop(self._written.popitem(last=False)[0], None)
            for trace_id in forgotten.traces if forgotten else ():
                self._written_traces.pop(trace_id, None)
        if self._index is not None:
            self._index.append(_written_entry(key, self._written[key], self._writes.get(key)), self._entries)
        self._retained[key] = episode
        self._retained_spans += len(episode.spans)
        self.retained_bytes += episode.nbytes
        # Retained spans are a cache for late ones: under a byte bound they keep a third of it (a quarter of
        # the collector's memory limit), the rest is for open episodes and the requests coming in.
        while self._retained and (
            self._retained_spans > self.retain_spans
            or (self.max_bytes and self.retained_bytes > self.max_bytes // 3)
        ):
            self._evict_oldest_retained()

    def _entries(self) -> list[dict[str, Any]]:
        """``written.idx``'s entries: one per remembered key (read when the file is rewritten)."""
        return [_written_entry(k, r, self._writes.get(k)) for k, r in self._written.items()]

    def _evict_oldest_retained(self) -> None:
        old_key, old = self._retained.popitem(last=False)
        self._retained_spans -= len(old.spans)
        self.retained_bytes -= old.nbytes
        self._let_go(old_key, old)

    def _let_go(self, old_key: str, old: _Episode) -> None:
        """Forget an episode no longer held, but the ids of its spans (their copies are absorbed)."""
        if self.remember_spans:
            self._released.update(dict.fromkeys(old.hashes))
            for _ in range(len(self._released) - self.remember_spans):
                self._released.popitem(last=False)
        for trace_id in old.otel_traces:
            if self._trace_keys.get(trace_id) == old_key:
                del self._trace_keys[trace_id]

    def _retire_wal(self) -> None:
        if self.wal is None:
            return
        needed = [
            e.first_segment
            for e in (*self._open.values(), *self._retained.values())
            if e.first_segment is not None
        ]
        self.wal.retire(min(needed) if needed else None)

    # --- replay ---------------------------------------------------------------------------------------------

    def replay_marker(self, payload: bytes) -> None:
        """A ``WRITTEN`` marker met during WAL replay: that episode is already on disk, retain it
        unwritten; unless the replay holds more of its spans than were written (see the module docstring):
        then it stays open, as the next revision."""
        marker: dict[str, Any] = json.loads(payload)
        key = str(marker["key"])
        with self._lock:
            episode = self._open.get(key)
            if episode is None:
                return
            revision, late = int(marker["revision"]), int(marker.get("late", 0))
            written_spans = marker.get("spans")
            if isinstance(written_spans, int) and len(episode.spans) > written_spans:
                episode.revision, episode.late = revision + 1, late
                return
            del self._open[key]
            self.open_bytes -= episode.nbytes
            episode.revision, episode.late = revision, late
            self._mark_written(episode)

    def replay_done(self) -> int:
        """After a WAL replay: let go of each fragment whose every span came from the log at or before its
        key's last write (``written.idx``): what a torn log left of an episode written since, whose
        ``WRITTEN`` marker it lost. Returns how many."""
        with self._lock:
            covered = [
                e
                for e in self._open.values()
                if e.late
                and e.upto is not None
                and (write := self._writes.get(e.key)) is not None
                and write.upto is not None
                and e.upto <= write.upto
            ]
            for episode in covered:
                del self._open[episode.key]
                self.open_bytes -= episode.nbytes
                self._let_go(episode.key, episode)
            return len(covered)

    def replay_open(self, payload: bytes) -> None:
        """An ``OPEN`` marker met during WAL replay (see :meth:`_compact`): the spans logged after it are
        those of an episode that was open at this revision."""
        marker: dict[str, Any] = json.loads(payload)
        key = str(marker["key"])
        with self._lock:
            episode = self._open.get(key) or self._take_retained(key) or _Episode(key=key)
            episode.revision, episode.late = int(marker["revision"]), int(marker.get("late", 0))
            self._open[key] = episode


def _load_written(index: KeyedIndex) -> tuple[OrderedDict[str, int], dict[str, WriteRecord]]:
    """``written.idx``: the last revision number used per episode key, with its last write."""
    known: OrderedDict[str, int] = OrderedDict()
    writes: dict[str, WriteRecord] = {}
    for key, entry in index.load().items():
        try:
            known[key] = int(entry["revision"])
            if "written" in entry:
                revision, late, spans, digest, *upto = map(int, entry["written"])
                at = (upto[0], upto[1]) if len(upto) == 2 else None
                task, traces = entry.get("task"), entry.get("traces", ())
                writes[key] = WriteRecord(revision, late, spans, digest, at,
                                          task if isinstance(task, str) else None, tuple(map(str, traces)))
        except (ValueError, KeyError, TypeError):
            continue  # a line from elsewhere
    return known, writes


def _written_entry(key: str, revision: int, write: WriteRecord | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": key, "revision": revision}
    if write is not None:
        entry["written"] = [write.revision, write.late, write.spans, write.digest, *(write.upto or ())]
        if write.task_id is not None:
            entry["task"] = write.task_id
        if write.traces:
            entry["traces"] = list(write.traces)
    return entry


def _written_marker(episode: _Episode) -> bytes:
    """The ``WRITTEN`` record of ``episode`` (see :meth:`Assembler.replay_marker`)."""
    marker = {"key": episode.key, "revision": episode.revision, "late": episode.late,
              "spans": len(episode.spans)}
    return json.dumps(marker).encode()
