"""The live feed's view of an output directory: every trace line written, in write order, with a cursor that
is a position in the written files.

The feed reads the files the writer appends (``output.py``), never the assembler, so a slow consumer costs
ingestion nothing but a reader thread, and a cursor stays valid across collector restarts: it names the end
of a trace line, ``<file index>-<byte offset>`` (``traces-00003.jsonl``, offset 1234: ``3-1234``), and the
files are append-only. Each line is an entry: a trace's first revision, or a later one (an update: a late span
or reward). A line repeating a revision already seen (the collector rewrites an episode with the same
revision after a crash) is not an entry, so no consumer gets it twice.

Turns are written before their trace line, so the index reads the turns files to their end before it reads
trace lines up to where they ended when it started: every entry's turns are on disk when it is listed. The
index keeps file offsets, not rows; an entry's rows are read back when a consumer asks for them.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrace_collector.model import REVISION
from orchestrace_collector.output import TRACES_PREFIX, TURNS_PREFIX, jsonl_files, revision_of

Position = tuple[int, int]  # (file index, end offset of a line)
START: Position = (-1, 0)


class CursorError(ValueError):
    pass


def parse_cursor(text: str | None) -> Position:
    """``3-1234`` -> ``(3, 1234)``; empty or absent: the start."""
    if not text:
        return START
    file, sep, offset = text.partition("-")
    if not (sep and file.isdigit() and offset.isdigit()):
        raise CursorError(f"bad cursor {text!r}: give what the feed returned (FILE-OFFSET) or nothing")
    return int(file), int(offset)


def format_cursor(position: Position) -> str:
    return "" if position == START else f"{position[0]}-{position[1]}"


@dataclass(frozen=True)
class Entry:
    """One trace line: where it is, and what it is."""

    position: Position
    path: Path
    start: int
    trace_id: str
    revision: int
    update: bool  # an earlier revision of this trace was listed before


@dataclass
class _Tail:
    """How far one jsonl file has been read."""

    path: Path
    index: int
    offset: int = 0


class FeedIndex:
    """Entries of ``out_dir`` in write order; :meth:`refresh` reads what was appended since (thread-safe)."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self._lock = threading.Lock()
        self._entries: list[Entry] = []
        self._positions: list[Position] = []
        self._latest: dict[str, int] = {}  # trace id -> highest revision listed
        self._turns: dict[tuple[str, int], list[tuple[Path, int]]] = {}
        self._tails: dict[str, dict[Path, _Tail]] = {TRACES_PREFIX: {}, TURNS_PREFIX: {}}

    def refresh(self) -> None:
        with self._lock:
            traces = self._files(TRACES_PREFIX)
            sizes = {tail.path: _size(tail.path) for tail in traces}  # before the turns: see the docstring
            for tail in self._files(TURNS_PREFIX):
                for start, obj in _read(tail, None):
                    self._add_turn(tail.path, start, obj)
            for tail in traces:
                for start, obj in _read(tail, sizes[tail.path]):
                    self._add_trace(tail, start, obj)

    def after(self, position: Position, limit: int) -> list[Entry]:
        with self._lock:
            first = bisect.bisect_right(self._positions, position)
            return self._entries[first : first + limit]

    def load(self, entry: Entry) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The trace line of ``entry`` and the turns of its revision (a turn written twice counts once)."""
        with self._lock:
            places = list(self._turns.get((entry.trace_id, entry.revision), ()))
        trace = _line_at(entry.path, entry.start)
        turns: dict[str, dict[str, Any]] = {}
        for path, start in places:
            turn = _line_at(path, start)
            turns[str(turn.get("turn_id"))] = turn
        return trace, list(turns.values())

    def _files(self, prefix: str) -> list[_Tail]:
        tails = self._tails[prefix]
        for path in jsonl_files([self.out_dir], prefix):
            if path not in tails:
                tails[path] = _Tail(path, int(path.stem[len(prefix) :]))
        return sorted(tails.values(), key=lambda t: t.index)

    def _add_turn(self, path: Path, start: int, obj: Any) -> None:
        if isinstance(obj, dict) and isinstance(obj.get("trace_id"), str):
            revision = obj.get(REVISION, 0)
            key = (obj["trace_id"], int(revision) if isinstance(revision, int | float) else 0)
            self._turns.setdefault(key, []).append((path, start))

    def _add_trace(self, tail: _Tail, start: int, obj: Any) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("trace_id"), str):
            return
        trace_id, revision = obj["trace_id"], revision_of(obj)
        seen = self._latest.get(trace_id)
        if seen is not None and revision <= seen:
            return  # a repeated (or older) revision: readers take the latest, consumers got it already
        self._latest[trace_id] = revision
        position = (tail.index, tail.offset)
        self._entries.append(Entry(position, tail.path, start, trace_id, revision, seen is not None))
        self._positions.append(position)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(tail: _Tail, until: int | None) -> Iterator[tuple[int, Any]]:
    """The complete lines of ``tail`` from where it was left up to ``until`` (its end when None), parsed,
    with their start offsets; ``tail.offset`` moves past each. A line still being written is left."""
    try:
        with tail.path.open("rb") as handle:
            handle.seek(tail.offset)
            data = handle.read(None if until is None else max(0, until - tail.offset))
    except OSError:
        return
    start = 0
    while True:
        end = data.find(b"\n", start)
        if end < 0:
            return
        line = data[start:end]
        offset = tail.offset
        tail.offset += end + 1 - start
        start = end + 1
        if line.strip():
            try:
                yield offset, json.loads(line)
            except ValueError:
                continue


def _line_at(path: Path, start: int) -> dict[str, Any]:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        offset = start
        while True:
            chunk = os.pread(fd, 1 << 16, offset)
            newline = chunk.find(b"\n")
            if newline >= 0 or not chunk:
                chunks.append(chunk if newline < 0 else chunk[:newline])
                break
            chunks.append(chunk)
            offset += len(chunk)
    finally:
        os.close(fd)
    obj = json.loads(b"".join(chunks))
    return obj if isinstance(obj, dict) else {}
