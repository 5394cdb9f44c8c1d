"""Assembly: spans arrive in any order, from any number of processes; episodes leave, complete, as traces.

Grouping. An *episode* (one rollout) is keyed by the ``orchestrace.episode.id`` attribute found on any span
of an OTel trace, else by the OTel trace id. ``gen_ai.conversation.id`` never groups: a conversation (a chat
session, a LangGraph thread) may hold many rollouts. Spans of an OTel trace that arrived before the
attribute did are moved into the episode when it appears, so a LangGraph interrupt and its resume (two OTel
traces, one thread id) become one orchestration trace. A span id seen twice (an exporter retry) counts once.

Completion. An episode is written when one of its root spans (no parent) has ended and no span arrived for
``quiet_period_s``; when no span arrived for ``idle_timeout_s`` whatever its state (orphans whose parent never
comes: the converter marks what is missing as incomplete); on :meth:`flush` (force flush, shutdown).

Late spans. A written episode is retained (its spans, up to ``retain_spans`` spans over all retained episodes)
so that a span arriving later reopens it and writes it again as the next revision (see ``output.py``). A late
span for an episode no longer retained is written as a separate fragment trace whose ``trace_id`` gets the
suffix ``.late<revision>``, so it never replaces the full trace for readers that take the last revision.

Memory is bounded by the open episodes plus the retention budget, not by the total traffic. With a write-ahead
log, the oldest segment any open or retained episode still needs is kept and older ones are deleted; a
``WRITTEN`` marker per written episode lets a replay skip what was already written.
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

from orchestrace.semconv import ORCH_EPISODE_ID

from orchestrace_collector.model import Trace, Turn
from orchestrace_collector.output import SPAN_COUNT
from orchestrace_collector.spans import Span
from orchestrace_collector.wal import KIND_WRITTEN, WriteAheadLog

log = logging.getLogger(__name__)


class ConvertedEpisode(Protocol):
    """What the converter returns (``orchestrace_collector.convert.Episode``)."""

    trace: Trace
    turns: list[Turn]
    contents: dict[str, str]


class TraceSink(Protocol):
    """Where written episodes go: ``output.TraceDirWriter``, or a list for ``convert_spans``."""

    def write(
        self,
        trace: Trace,
        turns: Sequence[Turn] = (),
        contents: Mapping[str, str] | None = None,
        *,
        revision: int = 0,
    ) -> None: ...


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
    value = span.attributes.get(ORCH_EPISODE_ID)
    return str(value) if value else None


@dataclass(slots=True)
class _Episode:
    key: str
    revision: int = 0
    spans: dict[str, Span] = field(default_factory=dict)
    otel_traces: set[str] = field(default_factory=set)
    root_ended: bool = False
    last_arrival: float = 0.0
    first_segment: int | None = None
    late: int = 0  # > 0: late spans of an episode no longer retained, written as fragment ``.late<late>``

    def add(self, span: Span, now: float, segment: int | None) -> None:
        self.spans[span.span_id] = span
        self.otel_traces.add(span.trace_id)
        self.last_arrival = now
        if span.parent_span_id is None and span.end_ns > 0:
            self.root_ended = True
        if segment is not None and (self.first_segment is None or segment < self.first_segment):
            self.first_segment = segment

    def absorb(self, other: _Episode) -> None:
        self.spans.update(other.spans)
        self.otel_traces |= other.otel_traces
        self.root_ended = self.root_ended or other.root_ended
        self.last_arrival = max(self.last_arrival, other.last_arrival)
        if other.first_segment is not None:
            self.first_segment = min(self.first_segment or other.first_segment, other.first_segment)


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
        self._trace_keys: dict[str, str] = {}  # OTel trace id -> episode key, for open and retained episodes
        self.failed = 0

    # --- input ----------------------------------------------------------------------------------------------

    def add(self, spans: Iterable[Span], segment: int | None = None) -> None:
        now = self.clock()
        with self._lock:
            for span in spans:
                self._episode_for(span).add(span, now, segment)

    def _episode_for(self, span: Span) -> _Episode:
        named = episode_key_of(span)
        current = self._trace_keys.get(span.trace_id)
        if named is not None and current is None:
            key = named
        elif named is not None and current == span.trace_id and named != current and current in self._open:
            # The episode id showed up after spans of this trace: move them into the named episode.
            moved = self._open.pop(current)
            key = named
            target = self._reopen_or_open(key)
            target.absorb(moved)
            for trace_id in moved.otel_traces:
                self._trace_keys[trace_id] = key
            return target
        else:
            key = current or span.trace_id
        self._trace_keys[span.trace_id] = key
        return self._reopen_or_open(key)

    def _reopen_or_open(self, key: str) -> _Episode:
        episode = self._open.get(key)
        if episode is not None:
            return episode
        retained = self._retained.pop(key, None)
        if retained is not None:
            self._retained_spans -= len(retained.spans)
            retained.revision += 1
            episode = retained
        elif key in self._written:
            episode = _Episode(key=key, late=self._written[key] + 1)
        else:
            episode = _Episode(key=key)
        self._open[key] = episode
        return episode

    # --- completion -----------------------------------------------------------------------------------------

    def tick(self) -> int:
        """Write the episodes that are complete now. Returns how many were written."""
        now = self.clock()
        with self._lock:
            due = [
                e
                for e in self._open.values()
                if (e.root_ended and now - e.last_arrival >= self.quiet_period_s)
                or now - e.last_arrival >= self.idle_timeout_s
            ]
            for episode in due:
                self._complete(episode)
            if due:
                self._retire_wal()
            return len(due)

    def flush(self, *, only_ended: bool = False) -> int:
        """Write every open episode now (``only_ended``: those whose root has ended)."""
        with self._lock:
            due = [e for e in self._open.values() if e.root_ended or not only_ended]
            for episode in due:
                self._complete(episode)
            self._retire_wal()
            return len(due)

    @property
    def open_episodes(self) -> int:
        with self._lock:
            return len(self._open)

    def _complete(self, episode: _Episode) -> None:
        del self._open[episode.key]
        self._write(episode)
        if self.wal is not None:
            marker = {"key": episode.key, "revision": episode.revision, "late": episode.late}
            self.wal.append(json.dumps(marker).encode(), KIND_WRITTEN)
        self._mark_written(episode)

    def _write(self, episode: _Episode) -> None:
        spans = list(episode.spans.values())
        try:
            converted = self.converter(spans)
            if self.hook is not None:
                self.hook(converted)
            trace = converted.trace
            if episode.late:
                trace.trace_id = f"{trace.trace_id}.late{episode.late}"
            trace.metrics[SPAN_COUNT] = float(len(spans))
            self.writer.write(trace, converted.turns, converted.contents, revision=episode.revision)
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
        while len(self._written) > self.max_known_episodes:
            self._written.popitem(last=False)
        self._retained[key] = episode
        self._retained_spans += len(episode.spans)
        while self._retained and self._retained_spans > self.retain_spans:
            old_key, old = self._retained.popitem(last=False)
            self._retained_spans -= len(old.spans)
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
        unwritten."""
        marker: dict[str, Any] = json.loads(payload)
        key = str(marker["key"])
        with self._lock:
            episode = self._open.pop(key, None)
            if episode is None:
                return
            episode.revision = int(marker["revision"])
            episode.late = int(marker.get("late", 0))
            self._mark_written(episode)
