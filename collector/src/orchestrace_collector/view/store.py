"""What the view reads from output directories: an index of the latest revision of every trace, kept
up to date as a collector appends to the directory, and reads of one trace, its turns and content on demand.

Memory stays bounded by the number of episodes, not the size of the directory: the index keeps, per trace,
a small summary (the episodes page's row) and where its latest line is (file, offset, length), and per trace
revision where its turn lines are. Files are append-only (``output.py``), so a refresh reads only the bytes
appended since the last one, and only whole lines (a line being written is read once it is complete).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrace_collector.export.source import Episode, number
from orchestrace_collector.model import REVISION
from orchestrace_collector.output import (
    TRACES_PREFIX,
    TURNS_PREFIX,
    content_refs,
    jsonl_files,
    read_content,
    revision_of,
)
from orchestrace_collector.validate import validate_trace

#: A refresh stats every file; more often than this, requests share the last one.
REFRESH_INTERVAL_S = 0.5
_PROBLEMS_KEPT = 4096


@dataclass(frozen=True)
class Location:
    """One line of a jsonl file."""

    path: Path
    offset: int
    length: int

    def read(self) -> Any:
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            return json.loads(handle.read(self.length))


@dataclass
class _Tail:
    """How far a jsonl file has been read (only whole lines)."""

    offset: int = 0


@dataclass
class _Entry:
    summary: dict[str, Any]
    location: Location
    revision: int
    directory: int


@dataclass
class DirectoryState:
    path: Path
    error: str | None = None
    tails: dict[Path, _Tail] = field(default_factory=dict)


class OutputStore:
    """The episodes of one or more output directories (latest revisions), refreshed incrementally."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.directories = [DirectoryState(Path(p)) for p in paths]
        self.generation = 0  # goes up whenever a refresh found a new trace line
        self._traces: dict[str, _Entry] = {}
        self._turns: dict[tuple[str, int], dict[str, Location]] = {}
        self._refs: dict[int, tuple[float, dict[str, str]]] = {}
        self._problems: dict[tuple[str, int], list[str]] = {}
        self._lock = threading.Lock()
        self._refreshed = 0.0
        self.refresh(force=True)

    # --- index ----------------------------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> int:
        """Read what was appended since the last refresh; returns the generation."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._refreshed < REFRESH_INTERVAL_S:
                return self.generation
            self._refreshed = now
            for index, state in enumerate(self.directories):
                self._refresh_directory(index, state)
            return self.generation

    def _refresh_directory(self, index: int, state: DirectoryState) -> None:
        if not state.path.is_dir():
            problem = "is not a directory" if state.path.exists() else "does not exist"
            state.error = f"{state.path} {problem}"
            return
        try:
            # Turns first: a trace line refers to turns written before it (``output.py``, order of writes).
            turn_files = jsonl_files([state.path], TURNS_PREFIX)
            trace_files = jsonl_files([state.path], TRACES_PREFIX)
            for path in turn_files:
                for location, obj in self._new_lines(state, path):
                    self._index_turn(location, obj)
            for path in trace_files:
                for location, obj in self._new_lines(state, path):
                    self._index_trace(index, location, obj)
        except OSError as exc:
            state.error = f"cannot read {state.path}: {exc.strerror or exc}"
            return
        state.error = None

    def _new_lines(self, state: DirectoryState, path: Path) -> Iterator[tuple[Location, Any]]:
        tail = state.tails.setdefault(path, _Tail())
        with path.open("rb") as handle:
            handle.seek(tail.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # a line still being appended waits for the next refresh
        start = 0
        while start < end:
            stop = data.index(b"\n", start) + 1
            line = data[start:stop]
            if line.strip():
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None  # a damaged line: not an episode (``orchestrace validate`` reports it)
                if isinstance(obj, dict):
                    yield Location(path, tail.offset + start, stop - start), obj
            start = stop
        tail.offset += end

    def _index_turn(self, location: Location, obj: dict[str, Any]) -> None:
        trace_id, revision = obj.get("trace_id"), obj.get(REVISION, 0)
        if isinstance(trace_id, str) and isinstance(revision, int):
            self._turns.setdefault((trace_id, revision), {})[str(obj.get("turn_id"))] = location

    def _index_trace(self, directory: int, location: Location, obj: dict[str, Any]) -> None:
        trace_id = obj.get("trace_id")
        if not isinstance(trace_id, str):
            return
        revision = revision_of(obj) if isinstance(obj.get("metrics"), dict) else 0
        previous = self._traces.get(trace_id)
        if previous is not None and revision < previous.revision:
            return
        if previous is not None:
            self._turns.pop((trace_id, previous.revision), None)  # that revision's turns are never read again
        self.generation += 1
        summary = summarize(obj)
        summary["revision"] = revision
        summary["seq"] = self.generation
        summary["turns"] = len(self._turns.get((trace_id, revision), {}))
        self._traces[trace_id] = _Entry(summary, location, revision, directory)

    # --- reads ----------------------------------------------------------------------------------------------

    def summaries(self, after: int = 0) -> list[dict[str, Any]]:
        """The episodes' rows that changed after generation ``after`` (all of them for 0)."""
        with self._lock:
            return [e.summary for e in self._traces.values() if e.summary["seq"] > after]

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        entry = self._traces.get(trace_id)
        if entry is None:
            return None
        trace: dict[str, Any] = entry.location.read()
        return trace

    def problems(self, trace_id: str) -> list[str] | None:
        """The trace's validation problems (schema and references), remembered per revision."""
        entry = self._traces.get(trace_id)
        if entry is None:
            return None
        key = (trace_id, entry.revision)
        if key not in self._problems:
            if len(self._problems) >= _PROBLEMS_KEPT:
                self._problems.clear()
            self._problems[key] = validate_trace(entry.location.read())
        return self._problems[key]

    def turns(self, trace_id: str) -> list[dict[str, Any]]:
        """The turns of the trace's latest revision, in start order."""
        entry = self._traces.get(trace_id)
        if entry is None:
            return []
        with self._lock:
            locations = list(self._turns.get((trace_id, entry.revision), {}).values())
        turns = [location.read() for location in locations]
        turns.sort(key=lambda t: (number(t.get("t")) or 0.0, str(t.get("turn_id"))))
        return turns

    def turn(self, trace_id: str, turn_id: str) -> dict[str, Any] | None:
        entry = self._traces.get(trace_id)
        if entry is None:
            return None
        location = self._turns.get((trace_id, entry.revision), {}).get(turn_id)
        if location is None:
            return None
        turn: dict[str, Any] = location.read()
        return turn

    def content(self, trace_id: str, ref: str) -> str | None:
        """The stored text of ``ref``, from the directory holding the trace."""
        entry = self._traces.get(trace_id)
        if entry is None:
            return None
        directory = self.directories[entry.directory].path
        return read_content(directory, ref, self._content_refs(entry.directory, directory))

    def _content_refs(self, index: int, directory: Path) -> dict[str, str]:
        try:
            mtime = (directory / "content-refs.jsonl").stat().st_mtime
        except OSError:
            mtime = 0.0
        cached = self._refs.get(index)
        if cached is None or cached[0] != mtime:
            cached = (mtime, content_refs(directory))
            self._refs[index] = cached
        return cached[1]

    def status(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "episodes": len(self._traces),
            "directories": [{"path": str(d.path), "error": d.error} for d in self.directories],
        }


def summarize(trace: dict[str, Any]) -> dict[str, Any]:
    """The episodes page's row of a trace: what sorting, filtering and the outcome distribution need."""
    episode = Episode(trace, [])
    metrics: dict[str, Any] = trace["metrics"] if isinstance(trace.get("metrics"), dict) else {}
    costs: dict[str, Any] = trace["costs"] if isinstance(trace.get("costs"), dict) else {}
    events = episode.events
    flags = episode.flags
    if number(metrics.get("truncated")):
        flags.append("truncated")
    if number(metrics.get("span_conflicts")):
        flags.append("conflicts")
    activations = {(e.get("agent"), e["activation"]) for e in events if isinstance(e.get("activation"), int)}
    return {
        "trace_id": episode.trace_id,
        "task_id": episode.task_id,
        "system": trace.get("system"),
        "topology": trace.get("topology"),
        "outcome": episode.outcome(),
        "rewards": {r["key"]: r["value"] for r in episode.outcome_rewards()},
        "tokens": number(costs.get("tokens")),
        "wall_clock_s": number(costs.get("wall_clock_s")),
        "parallelism": number(metrics.get("parallelism_efficiency")),
        "events": len(events),
        "agents": sorted({str(name) for name, _ in activations}),
        "activations": len(activations),
        "flags": flags,
    }
