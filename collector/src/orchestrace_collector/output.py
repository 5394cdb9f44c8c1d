"""The output directory: one writer shared by ``orchestrace collect``, ``orchestrace convert``, ``annotate``
and the in-process ``TraceDirExporter``.

Layout of ``DIR``::

    traces-00000.jsonl     one orchestration trace a line (the seed schema); a new file every ``rotate_bytes``
    turns-00000.jsonl      one model call (a Turn, a training sample) a line, plus a ``revision`` field
    content/ab/abcd...txt  captured content, every file named by the sha256 of its own bytes; only present
                           when spans carried captured content
    content-refs.jsonl     ``{"ref": <ref a span claimed>, "stored": <ref of the file holding it>}`` for
                           content stored under another hash than the span's ref (cut to the size limit,
                           redacted, or captured in another form than the value hashed); read with
                           :func:`read_content`
    wal/                   the collector's write-ahead log (``orchestrace collect`` only; see ``wal.py``)

Revisions: the files are append-only. When a trace is written again (a span arrived after it was written, a
user reward function or ``orchestrace annotate`` added a reward), the new version is appended with a higher
``metrics.revision`` (0 for the first). **Readers take the last revision of each ``trace_id``** (the line with
the highest ``metrics.revision``), and the turns whose ``revision`` equals it: :func:`latest_traces` and
:func:`latest_turns` do exactly that. Every written trace also carries ``metrics.spans``, the number of OTel
spans it was built from. After a crash between writing a trace and logging that it was written, the restarted
collector writes it again with the same revision: an identical line, which "take the last" also absorbs.

Annotations: ``annotations.jsonl`` records the late rewards ``orchestrace annotate`` added (see
``annotations.py``); every trace written here gets its trace's recorded annotations applied first, so a later
revision (a late span) keeps them.

Order of writes: content first, then turns, then the trace line, so that whatever a trace line refers to is
already on disk when a reader sees it.

Size: what one episode writes is bounded by the amplification limit (``output_limit.py``: identifiers cut to
256 characters, and the trace line plus its turns cut to ``max_trace_bytes``, 64 MiB by default).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from orchestrace_semconv.refs import REF_PREFIX

from orchestrace_collector.annotations import Annotation, annotation_line, read_annotations
from orchestrace_collector.model import REVISION, Trace, Turn
from orchestrace_collector.output_limit import DEFAULT_MAX_BYTES, limit_output, shorten

if TYPE_CHECKING:
    from orchestrace_collector.assemble import ConvertedEpisode

TRACES_PREFIX = "traces-"
TURNS_PREFIX = "turns-"
CONTENT_DIR = "content"
CONTENT_REFS = "content-refs.jsonl"
WAL_DIR = "wal"
ANNOTATIONS_FILE = "annotations.jsonl"
_FILE_RE = re.compile(r"^(traces|turns)-(\d{5,})\.jsonl$")


class _RotatingJsonl:
    """An append-only ``prefix<n>.jsonl`` file written with ``write(2)``: a write that fails (``ENOSPC``) is
    cut off again, so a later line never continues half of an earlier one."""

    def __init__(self, directory: Path, prefix: str, rotate_bytes: int) -> None:
        self.directory = directory
        self.prefix = prefix
        self.rotate_bytes = rotate_bytes
        existing = [
            int(p.stem[len(prefix) :])
            for p in directory.glob(f"{prefix}*.jsonl")
            if p.stem[len(prefix) :].isdigit()
        ]
        self._index = max(existing, default=0)
        self._fd = -1
        self._size = 0

    def write_lines(self, lines: Sequence[bytes]) -> int:
        """Append ``lines`` (UTF-8); returns the file size before them (for :meth:`truncate`)."""
        if not lines:
            return -1
        fd = self._handle()
        start = self._size
        try:
            data = b"".join(lines)
            _write_all(fd, data)
        except OSError:
            self.truncate(start)
            raise
        self._size = start + len(data)
        if self._size >= self.rotate_bytes:
            os.fsync(fd)  # a closed file cannot be synced later by :meth:`sync`
            self.close()
            self._index += 1
        return start

    def truncate(self, size: int) -> None:
        """Cut the file back to ``size`` (a write of several files failed part way)."""
        if self._fd >= 0 and size >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
                self._size = size

    def sync(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def _handle(self) -> int:
        if self._fd < 0:
            path = self.directory / f"{self.prefix}{self._index:05d}.jsonl"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._size = os.fstat(fd).st_size
            self._fd = fd
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class TraceDirWriter:
    """Appends traces, turns and content to an output directory (thread-safe)."""

    #: The amplification limit's budget per written episode (0: identifiers are still cut, nothing else).
    max_trace_bytes = DEFAULT_MAX_BYTES

    def __init__(
        self, out_dir: Path, *, rotate_bytes: int = 128 << 20, max_trace_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.out_dir = out_dir
        self.max_trace_bytes = max_trace_bytes
        out_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._traces = _RotatingJsonl(out_dir, TRACES_PREFIX, rotate_bytes)
        self._turns = _RotatingJsonl(out_dir, TURNS_PREFIX, rotate_bytes)
        self.written = 0
        self._aliases: set[tuple[str, str]] = set()
        self._refs: IO[str] | None = None
        self._annotations_path = out_dir / ANNOTATIONS_FILE
        self._annotations: dict[str, list[Annotation]] = {}
        self._annotations_seen: tuple[int, int] | None = None  # (size, mtime) of the file when last read

    def record_annotation(self, annotation: Annotation) -> None:
        with self._lock, self._annotations_path.open("a", encoding="utf-8") as handle:
            handle.write(annotation_line(annotation))

    def _annotations_of(self, trace_id: str) -> list[Annotation]:
        """Re-read only when the file changed (``annotate`` runs in another process)."""
        try:
            stat = self._annotations_path.stat()
        except FileNotFoundError:
            return []
        seen = (stat.st_size, stat.st_mtime_ns)
        if seen != self._annotations_seen:
            self._annotations = read_annotations(self._annotations_path)
            self._annotations_seen = seen
        return self._annotations.get(trace_id, [])

    def write(
        self,
        trace: Trace,
        turns: Sequence[Turn] = (),
        contents: Mapping[str, str] | None = None,
        *,
        revision: int = 0,
    ) -> None:
        """Write a trace and its turns as models (``write_episode`` for a converted episode)."""
        annotations = self._annotations_of(shorten(trace.trace_id))  # keyed by the id as written
        self.write_raw(*model_lines(trace, turns, revision, self.max_trace_bytes, annotations), contents)

    def write_episode(self, episode: ConvertedEpisode, *, revision: int = 0) -> None:
        annotations = self._annotations_of(shorten(episode.trace_id))
        lines = episode_lines(episode, revision, self.max_trace_bytes, annotations)
        self.write_raw(*lines, episode.contents)

    def write_dicts(self, trace: Mapping[str, Any], turns: Iterable[Mapping[str, Any]]) -> None:
        """Write an already serialized trace (``annotate``); its ``metrics.revision`` must already be set."""
        revision = trace.get("metrics", {}).get(REVISION, 0)
        self.write_raw(
            _json_line(trace), [_json_line({**t, REVISION: revision}) for t in turns], None
        )

    def write_raw(
        self, trace_line: bytes, turn_lines: Sequence[bytes], contents: Mapping[str, str] | None
    ) -> None:
        """Write one trace; on ``OSError`` nothing of it is left in the jsonl files (content files, being
        addressed by their hash, may stay) and the error propagates: the caller keeps the episode."""
        with self._lock:
            for ref, text in (contents or {}).items():
                self._write_content(ref, text)
            turns_start = self._turns.write_lines(turn_lines)
            try:
                self._traces.write_lines([trace_line])
            except OSError:
                self._turns.truncate(turns_start)
                raise
            self.written += 1

    def sync(self) -> None:
        """``fsync`` what was written (the collector calls it before it marks episodes written)."""
        with self._lock:
            self._turns.sync()
            self._traces.sync()

    def _write_content(self, ref: str, text: str) -> None:
        """Store ``text`` under the sha256 of its own bytes; when that is not the ref the span claimed (cut,
        redacted, another form of the value), record ``claimed -> stored`` in ``content-refs.jsonl``."""
        data = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data).hexdigest()
        path = content_path(self.out_dir, digest)
        if not _holds(path, digest):  # absent, or planted / damaged: (re)written, never trusted
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
            try:
                tmp.write_bytes(data)
                tmp.replace(path)  # atomic, so a reader never sees half a file
            except OSError:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
        stored = REF_PREFIX + digest
        if ref != stored and (ref, stored) not in self._aliases:
            self._aliases.add((ref, stored))
            if self._refs is None:
                self._refs = (self.out_dir / CONTENT_REFS).open("a", encoding="utf-8")
            self._refs.write(json.dumps({"ref": ref, "stored": stored}) + "\n")
            self._refs.flush()

    def close(self) -> None:
        with self._lock:
            self._traces.close()
            self._turns.close()
            if self._refs is not None:
                self._refs.close()
                self._refs = None


def episode_lines(
    episode: ConvertedEpisode, revision: int, max_trace_bytes: int, annotations: Sequence[Annotation] = ()
) -> tuple[bytes, list[bytes]]:
    """The lines of a converted episode's trace and turns as revision ``revision``: its records as they are
    (``convert/written.py``) when nothing is to be cut or annotated, else its models (:func:`model_lines`)."""
    lines = None if annotations else episode.record_lines(revision, max_trace_bytes)
    if lines is None:
        return model_lines(episode.trace, episode.turns, revision, max_trace_bytes, annotations)
    return lines


def model_lines(
    trace: Trace,
    turns: Sequence[Turn],
    revision: int,
    max_trace_bytes: int,
    annotations: Sequence[Annotation] = (),
) -> tuple[bytes, list[bytes]]:
    """The lines of a trace and its turns written by pydantic, the one place the amplification limit is
    applied (in place, before ``annotations``: they are keyed by the cut id), as revision ``revision`` or
    above any revision ``annotate`` wrote in the meantime (revisions of a trace only go up), set in the
    trace's metrics and as the last field of each turn."""
    limit_output(trace, turns, max_trace_bytes)
    for annotation in annotations:
        turns = annotation.apply(trace, turns)
    revision = max([revision, *(a.revision + 1 for a in annotations)])
    trace.metrics[REVISION] = float(revision)
    trace_line = trace.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"
    suffix = b',"%s":%d}\n' % (REVISION.encode(), revision)
    # A turn always has fields, so its JSON ends with the closing brace the revision goes before.
    return trace_line, [t.model_dump_json(exclude_none=True).encode()[:-1] + suffix for t in turns]


def _json_line(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _holds(path: Path, digest: str) -> bool:
    """Whether the content file at ``path`` exists and its bytes hash to ``digest``."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == digest
    except OSError:
        return False


def content_path(out_dir: Path, digest: str) -> Path:
    return out_dir / CONTENT_DIR / digest[:2] / f"{digest}.txt"


def content_refs(out_dir: Path) -> dict[str, str]:
    """The claimed ref -> stored ref map of ``content-refs.jsonl`` (empty when there is none)."""
    refs: dict[str, str] = {}
    path = out_dir / CONTENT_REFS
    if path.exists():
        for _, _, obj in iter_jsonl([path]):
            if isinstance(obj, dict) and isinstance(obj.get("stored"), str):
                refs.setdefault(str(obj.get("ref")), obj["stored"])
    return refs


def read_content(out_dir: Path, ref: str, refs: Mapping[str, str] | None = None) -> str | None:
    """The stored text for ``ref`` (through ``content-refs.jsonl`` when it was stored under another hash):
    ``None`` when there is none. ``refs``: :func:`content_refs`, when the caller reads many."""
    stored = (refs if refs is not None else content_refs(out_dir)).get(ref, ref)
    digest = stored.removeprefix(REF_PREFIX)
    path = content_path(out_dir, digest)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data.decode("utf-8", "surrogatepass") if hashlib.sha256(data).hexdigest() == digest else None


# --- reading ------------------------------------------------------------------------------------------------


def jsonl_files(paths: Iterable[Path], prefix: str = TRACES_PREFIX) -> list[Path]:
    """The ``prefix*.jsonl`` files of each directory (in order), and each plain file as given."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob(f"{prefix}*.jsonl"), key=_file_order))
        else:
            files.append(path)
    return files


def _file_order(path: Path) -> tuple[int, str]:
    match = _FILE_RE.match(path.name)
    return (int(match.group(2)) if match else -1, path.name)


def iter_jsonl(files: Iterable[Path]) -> Iterator[tuple[Path, int, Any]]:
    """Yield ``(file, line number, parsed object)``; a line that is not JSON yields a ``ValueError``
    object."""
    for file in files:
        with file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    yield file, number, json.loads(line)
                except ValueError as exc:
                    yield file, number, exc


def revision_of(obj: Mapping[str, Any]) -> int:
    metrics = obj.get("metrics")
    return int(metrics.get(REVISION, 0)) if isinstance(metrics, Mapping) else 0


def latest_traces(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """The last revision of each trace found under ``paths`` (directories or ``traces*.jsonl`` files)."""
    latest: dict[str, dict[str, Any]] = {}
    for _, _, obj in iter_jsonl(jsonl_files(paths)):
        if isinstance(obj, dict) and isinstance(obj.get("trace_id"), str):
            previous = latest.get(obj["trace_id"])
            if previous is None or revision_of(obj) >= revision_of(previous):
                latest[obj["trace_id"]] = obj
    return latest


def latest_turns(
    out_dirs: Path | Iterable[Path], traces: Mapping[str, Mapping[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """The turns of the given (latest) traces, keyed by trace id, from one output directory or several: only
    the turns of each trace's revision, and a turn written twice (a repeated conversion, a rewrite after a
    restart) counts once, as its last line."""
    dirs = [out_dirs] if isinstance(out_dirs, Path) else list(out_dirs)
    turns: dict[str, dict[str, dict[str, Any]]] = {trace_id: {} for trace_id in traces}
    for _, _, obj in iter_jsonl(jsonl_files([d for d in dirs if d.is_dir()], TURNS_PREFIX)):
        if not isinstance(obj, dict) or obj.get("trace_id") not in traces:
            continue
        if float(obj.get(REVISION, 0)) == revision_of(traces[obj["trace_id"]]):
            turns[obj["trace_id"]][str(obj.get("turn_id"))] = obj
    return {trace_id: list(by_id.values()) for trace_id, by_id in turns.items()}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
