"""Offline conversion on Ray: ``orchestrace convert --engine ray``, for dumps too large for one process.

Ray core tasks, one pass over the files and one shuffle (the spans move once, from the task that read them to
the task that converts them):

1. Scan: a task per file (or per part of a file, so that every CPU has work) reads its file and cuts its
   spans by OTel trace. It returns two objects: a small index that goes to the driver (per trace: its id,
   its span count, and the episode id the first of its spans naming one names, with that span's position in
   the input), and the traces' spans, which stay in the object store of the node that read them (a plain
   OTLP protobuf file's spans stay protobuf, re-serialized per trace: they are decoded only by the task that
   converts them).
2. Keys (driver): each OTel trace is keyed by episode as the assembler does (``assemble.episode_key_of``): the
   episode id named first in input order (file, then position) by a span of the trace, else the episode of
   the trace its root continues (``spans.continued_link``; a cycle of such links makes one episode, keyed
   by its smallest trace id), else the trace id.
   An episode may span several traces and files. Episodes are dealt out to the convert tasks (two per CPU),
   each in turn, largest first, to the one with the fewest spans so far.
3. Shuffle: per scanned part, a split task (placed by Ray where that part's spans are) cuts them into one
   object per convert task that has an episode in it.
4. Convert: each convert task fetches its pieces, groups them by episode, decodes each episode's spans,
   puts them back in input order and converts them with the same converter as the local engine. It streams
   the lines back in batches (a streaming generator) as it goes; the driver appends them to the same
   :class:`~orchestrace_collector.output.TraceDirWriter` as they come.

The output directory is the one the local engine writes (line order aside: episodes are written as they
finish). Within an episode, spans keep their input order, and a span id seen twice counts once (the later
copy wins, at the first copy's position). A file that cannot be read is reported in ``bad_files`` and
skipped.

Cluster: ``address`` (``--address``), else ``RAY_ADDRESS``, else a local Ray cluster started for the run
(and stopped after). Workers of a real cluster need ``orchestrace-collector`` installed and the input paths
readable from every node (a shared filesystem).

A local cluster listens on loopback only. Ray turns a node address of 127.0.0.1 into the host's own address
(so that other nodes could reach it), and its gRPC servers (GCS, raylet, workers, the driver) then listen on
every address; only with its multi-node clusters off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, the default on
macOS and Windows) does the node keep 127.0.0.1, and every server binds it. Ray reads the variable twice:
each process it starts reads its environment, and this one read it into a constant when it imported ``ray``.
So :func:`local_cluster_settings` sets it (unless the user did) only for the life of the cluster, in the
environment the cluster's processes inherit and in that constant, and puts both back after, with what Ray set
in the environment for the cluster: a later connection from this process to a real cluster, and the programs
it starts, see what they would have seen without the convert (the engine warns if a Ray without that
constant left the node on another address).
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import pickle
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from google.protobuf.message import Message
from orchestrace_semconv import ORCH_EPISODE_ID

from orchestrace_collector.assemble import (
    Converter,
    EpisodeHook,
    default_converter,
    episode_key,
    episode_key_of,
)
from orchestrace_collector.convert.gcpause import gc_paused
from orchestrace_collector.decode import (
    PayloadError,
    decode_file,
    raw_span_attributes,
    read_export,
    spans_from_export,
)
from orchestrace_collector.model import SPAN_COUNT
from orchestrace_collector.offline import input_files
from orchestrace_collector.output import TraceDirWriter, episode_lines
from orchestrace_collector.spans import Span, SpanLink, continued_link

log = logging.getLogger(__name__)

# A span's position in the input, for the local engine's order: file index in the high bits, position in the
# low.
_POSITION_BITS = 40
_EPISODE_ATTRIBUTE = ORCH_EPISODE_ID.encode()
# Scan and convert tasks per CPU: a task larger than the others then does not leave a CPU idle at the end.
_TASKS_PER_CPU = 2
_LOOPBACK = "127.0.0.1"
# A convert task sends its lines back in batches of about this size: the driver writes while workers convert,
# and neither side holds a task's whole output.
_BATCH_BYTES = 8 << 20
#: Ray's settings a local cluster of ours turns off (``local_cluster_settings``), with the constant of
#: ``ray._private.ray_constants`` that holds each in the driver: multi-node clusters (so that it listens on
#: loopback only, module docstring), and the ``uv run`` hook (the workers share this interpreter's
#: environment; the hook would package the working directory and start every worker through uv).
_LOCAL_SETTINGS = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "ENABLE_RAY_CLUSTER",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "RAY_ENABLE_UV_RUN_RUNTIME_ENV",
}


class TraceIndex(NamedTuple):
    """What the driver learns of one OTel trace of a scanned part (never its spans)."""

    trace: str
    span_count: int
    hint: str  # the episode key the first of its spans naming one names ("" if none does)
    hint_at: int  # that span's position in the input (-1 if none)
    link: str = ""  # the trace its root continues ("" if none)


class Scanned(NamedTuple):
    """A scanned part's index: its traces, or why its file could not be read (for part 0 only)."""

    traces: list[TraceIndex]
    error: str = ""


class TraceSpans(NamedTuple):
    """The spans of one OTel trace of a scanned part, as they cross the shuffle."""

    protobuf: bool  # spans: a serialized export of them, positions: their positions (array "q")
    spans: bytes  # or (not protobuf) a pickled list of (position, decoded Span)
    positions: bytes


#: A row of a convert task's input: an episode key and spans of that episode.
Row = tuple[str, TraceSpans]
#: What a convert task sends back for one episode: (key, its lines as ``TraceDirWriter.write_raw``'s
#: arguments, "") or (key, None, what stopped it).
Result = tuple[str, tuple[bytes, list[bytes], dict[str, str]] | None, str]


@dataclass(frozen=True)
class RayConvertResult:
    files: int
    spans: int
    written: int
    failed: int
    bad_files: tuple[str, ...]
    duplicates: int = 0  # the local engine's count of spans already written; this engine does not look


# --- 1. scan (workers) --------------------------------------------------------------------------------------


def scan(number: int, path: str, part: int, parts: int) -> tuple[Scanned, list[TraceSpans]]:
    """File ``number`` (``path``), or part ``part`` of ``parts`` of a protobuf file's spans -> its index and
    its traces' spans (in the index's order)."""
    with gc_paused():  # every object made here lives until the end (see convert/gcpause.py)
        try:
            data = _read(path)
            source = read_export(data)
        except PayloadError as exc:
            return Scanned([], f"{path}: {exc}" if part == 0 else ""), []
        base = number << _POSITION_BITS
        if isinstance(source, list):  # any other format, decoded whole: in part 0
            if part != 0:
                return Scanned([]), []
            by_trace: dict[str, list[tuple[int, Span]]] = {}
            for position, span in enumerate(source):
                by_trace.setdefault(span.trace_id, []).append((base + position, span))
            decoded = [_decoded(trace, items) for trace, items in by_trace.items()]
            return Scanned([index for index, _ in decoded]), [spans for _, spans in decoded]
        named = _EPISODE_ATTRIBUTE in data  # attribute keys are plain UTF-8 in protobuf
        return _protobuf_traces(source, base, part, parts, named)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        decode_file(Path(path))  # raises the PayloadError the local engine reports for this file
        raise


def _decoded(trace: str, items: list[tuple[int, Span]]) -> tuple[TraceIndex, TraceSpans]:
    hint, hint_at = next(((key, at) for at, span in items if (key := episode_key_of(span))), ("", -1))
    link = next((found[0] for _, span in items if (found := continued_link(span))), "")
    spans = TraceSpans(False, pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL), b"")
    return TraceIndex(trace, len(items), hint, hint_at, link), spans


class _TraceExport:
    """The spans of one OTel trace met in a scanned part, as an export of their own."""

    __slots__ = ("export", "hint", "hint_at", "link", "positions", "resource_spans", "scope", "scope_spans")

    def __init__(self, export: Message) -> None:
        self.export = export
        self.positions = array("q")
        self.resource_spans: Message | None = None  # the input's resource and scope of the last span added
        self.scope_spans: Message | None = None
        self.scope: Message | None = None  # where the next span of that scope goes
        self.hint = ""
        self.hint_at = -1
        self.link = ""

    def add(self, resource_spans: Message, scope_spans: Message, span: Message, position: int) -> None:
        same = resource_spans is self.resource_spans and scope_spans is self.scope_spans  # not ==: contents
        if self.scope is None or not same:
            into = self.export.resource_spans.add()
            into.resource.CopyFrom(resource_spans.resource)
            self.scope = into.scope_spans.add()
            self.scope.scope.CopyFrom(scope_spans.scope)
            self.resource_spans, self.scope_spans = resource_spans, scope_spans
        self.scope.spans.append(span)
        self.positions.append(position)


def _protobuf_traces(
    request: Message, base: int, part: int, parts: int, named: bool
) -> tuple[Scanned, list[TraceSpans]]:
    """Every ``parts``-th span from the ``part``-th (in file order), cut by OTel trace."""
    traces: dict[bytes, _TraceExport] = {}
    position = 0
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if position % parts == part:
                    trace = traces.get(span.trace_id)
                    if trace is None:
                        trace = traces[span.trace_id] = _TraceExport(type(request)())
                    trace.add(resource_spans, scope_spans, span, base + position)
                    if named and trace.hint_at < 0:
                        key = _episode_key(span)
                        if key is not None:
                            trace.hint, trace.hint_at = key, base + position
                    if span.links and not trace.link:
                        trace.link = _continued(span)
                position += 1
    index = [TraceIndex(key.hex(), len(t.positions), t.hint, t.hint_at, t.link) for key, t in traces.items()]
    spans = [TraceSpans(True, t.export.SerializeToString(), t.positions.tobytes()) for t in traces.values()]
    return Scanned(index), spans


def _episode_key(span: Message) -> str | None:
    """``episode_key_of`` a protobuf span, decoding its attributes only when one names an episode."""
    if not any(_EPISODE_ATTRIBUTE in raw for raw in span.attributes):
        return None
    return episode_key(raw_span_attributes(span))


def _continued(span: Message) -> str:
    """The trace a protobuf root span continues (``spans.continued_link``), "" if none."""
    if span.parent_span_id.strip(b"\0"):
        return ""
    links = tuple(
        SpanLink(lk.trace_id.hex(), lk.span_id.hex(), raw_span_attributes(lk)) for lk in span.links
    )
    found = continued_link(Span(span.trace_id.hex(), span.span_id.hex(), None, "", 0, 0, links=links))
    return found[0] if found else ""


# --- 2. keys (driver) ---------------------------------------------------------------------------------------


def episode_keys(scanned: Sequence[Scanned]) -> dict[str, str]:
    """OTel trace id -> episode key, for the traces that name an episode (the one named first in the input)
    or continue another trace of the input."""
    first: dict[str, tuple[int, str]] = {}
    continues: dict[str, str] = {}
    for part in scanned:
        for t in part.traces:
            if t.hint and (t.trace not in first or t.hint_at < first[t.trace][0]):
                first[t.trace] = (t.hint_at, t.hint)
            if t.link:
                continues[t.trace] = t.link
    keys = {trace: key for trace, (_, key) in first.items()}
    known = {t.trace for part in scanned for t in part.traces}
    for trace in continues:
        if trace not in keys:
            keys[trace] = _continued_key(trace, keys, continues, known)
    return {trace: key for trace, key in keys.items() if key != trace}


def _continued_key(trace: str, keys: dict[str, str], continues: dict[str, str], known: set[str]) -> str:
    """The episode of the first trace up the chain of continued traces from ``trace`` that names one or
    continues none in the input (``keys``: the episodes found so far, extended along the way)."""
    chain = [trace]
    while True:
        at = chain[-1]
        if at in keys:
            key = keys[at]
            break
        target = continues.get(at)
        if target is None or target not in known:
            key = at
            break
        if target in chain:  # a cycle of links: one episode
            key = min(chain[chain.index(target):])
            break
        chain.append(target)
    for at in chain:
        keys.setdefault(at, key)
    return key


def deal(scanned: Sequence[Scanned], keys: dict[str, str], tasks: int) -> dict[str, int]:
    """Episode key -> convert task (of at most ``tasks``): largest episode first, to the least loaded task."""
    sizes: dict[str, int] = {}
    for part in scanned:
        for t in part.traces:
            key = keys.get(t.trace, t.trace)
            sizes[key] = sizes.get(key, 0) + t.span_count
    loads = [(0, task) for task in range(min(tasks, len(sizes)))]
    assigned: dict[str, int] = {}
    for key in sorted(sizes, key=lambda k: (-sizes[k], k)):
        load, task = heapq.heappop(loads)
        assigned[key] = task
        heapq.heappush(loads, (load + sizes[key], task))
    return assigned


# --- 3. shuffle (workers, where the scanned spans are) ------------------------------------------------------


def split(spans: list[TraceSpans], episodes: list[str], targets: list[int], outputs: int) -> list[list[Row]]:
    """A scanned part's traces -> one list of rows per output: trace ``i`` of episode ``episodes[i]`` goes to
    output ``targets[i]``."""
    pieces: list[list[Row]] = [[] for _ in range(outputs)]
    for trace, episode, target in zip(spans, episodes, targets, strict=True):
        pieces[target].append((episode, trace))
    return pieces


def _split_task(spans: list[TraceSpans], episodes: list[str], targets: list[int], outputs: int) -> Any:
    pieces = split(spans, episodes, targets, outputs)
    return pieces[0] if outputs == 1 else tuple(pieces)  # Ray: one return value is the value itself


# --- 4. convert (workers) -----------------------------------------------------------------------------------


def convert_rows(
    pieces: Sequence[list[Row]], converter: Converter, hook: EpisodeHook | None, max_trace_bytes: int
) -> Iterator[list[Result]]:
    """Every episode of ``pieces`` converted, in batches of about ``_BATCH_BYTES`` of lines."""
    by_episode: dict[str, list[TraceSpans]] = {}
    for piece in pieces:
        for episode, trace in piece:
            by_episode.setdefault(episode, []).append(trace)
    batch: list[Result] = []
    size = 0
    for key, traces in by_episode.items():
        with gc_paused():  # the decoded spans live until converted (see convert/gcpause.py)
            result = _convert(key, _in_input_order(traces), converter, hook, max_trace_bytes)
        batch.append(result)
        if result[1] is not None:
            size += len(result[1][0]) + sum(len(line) for line in result[1][1])
        if size >= _BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _convert_task(
    converter: Converter, hook: EpisodeHook | None, max_trace_bytes: int, *pieces: list[Row]
) -> Iterator[list[Result]]:
    yield from convert_rows(pieces, converter, hook, max_trace_bytes)


def _in_input_order(traces: list[TraceSpans]) -> list[tuple[int, Span]]:
    positioned: list[tuple[int, Span]] = []
    for trace in traces:
        if trace.protobuf:
            at = array("q")
            at.frombytes(trace.positions)
            positioned.extend(zip(at, spans_from_export(trace.spans), strict=True))
        else:
            positioned.extend(pickle.loads(trace.spans))
    positioned.sort(key=_first)
    return positioned


def _first(item: tuple[int, Span]) -> int:
    return item[0]


def _convert(
    key: str,
    positioned: Sequence[tuple[int, Span]],
    converter: Converter,
    hook: EpisodeHook | None,
    max_trace_bytes: int,
) -> Result:
    """One episode's spans, in input order -> (key, its lines, "") or (key, None, what stopped it)."""
    unique: dict[str, Span] = {}
    for _, span in positioned:
        unique[span.span_id] = span
    spans = list(unique.values())
    try:
        converted = converter(spans)
        if hook is not None:
            hook(converted)
        converted.metrics[SPAN_COUNT] = float(len(spans))
        # A fresh conversion: nothing annotated it yet.
        trace_line, turn_lines = episode_lines(converted, 0, max_trace_bytes)
    except Exception as exc:  # one bad episode must not stop the run, as with the local engine
        return key, None, f"{type(exc).__name__}: {exc} ({len(spans)} spans)"
    return key, (trace_line, turn_lines, converted.contents), ""


# --- the driver ---------------------------------------------------------------------------------------------


def convert_with_ray(
    inputs: Sequence[Path],
    writer: TraceDirWriter,
    *,
    address: str | None = None,
    converter: Converter = default_converter,
    hook: EpisodeHook | None = None,
) -> RayConvertResult:
    """Convert the dump files ``inputs`` (files, or directories of them) on Ray into ``writer``."""
    local = address is None and "RAY_ADDRESS" not in os.environ
    import ray

    files = [str(path) for path in input_files(inputs)]
    if not files:
        return RayConvertResult(files=0, spans=0, written=0, failed=0, bad_files=())
    started = not ray.is_initialized()
    with local_cluster_settings() if started and local else contextlib.nullcontext():
        if started:
            # "local": a cluster of our own, even when `ray start` left the address of another one in Ray's
            # temp directory (which a bare ray.init() would join); address None with RAY_ADDRESS: ray.init
            # reads it.
            ray.init(
                address="local" if local else address,
                # A cluster of our own listens on loopback only (a real cluster is the user's to configure).
                _node_ip_address=_LOOPBACK if local else None,
                log_to_driver=False,
                include_dashboard=False,
                configure_logging=False,
            )
            if local and ray.util.get_node_ip_address() != _LOOPBACK:
                log.warning("orchestrace: the local Ray cluster took another address than %s: its servers "
                            "listen on every address of this host", _LOOPBACK)
        try:
            return _run(files, writer, converter, hook)
        finally:
            if started:
                ray.shutdown()


@contextlib.contextmanager
def local_cluster_settings() -> Iterator[None]:
    """Around the life of a local cluster of our own, from ``ray.init`` to ``ray.shutdown`` (module
    docstring): each of :data:`_LOCAL_SETTINGS` the user left unset is off, in this process's environment
    (which the cluster's processes inherit) and in the constant this process's Ray read it into. After it,
    both are as they were before, and so is every variable Ray set in this process's environment for the
    cluster (its auth mode, its breakpoint hook): they went with the cluster."""
    from ray._private import ray_constants

    environment = dict(os.environ)
    unset = {name: constant for name, constant in _LOCAL_SETTINGS.items() if name not in os.environ}
    # Feature-detected: a Ray without one of these constants reads the environment only.
    read = {c: getattr(ray_constants, c) for c in unset.values() if hasattr(ray_constants, c)}
    try:
        for name in unset:
            os.environ[name] = "0"
        for constant in read:
            setattr(ray_constants, constant, False)
        yield
    finally:
        for constant, value in read.items():
            setattr(ray_constants, constant, value)
        for name in set(os.environ) - set(environment):
            del os.environ[name]
        for name, value in environment.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


def _run(
    files: list[str], writer: TraceDirWriter, converter: Converter, hook: EpisodeHook | None
) -> RayConvertResult:
    import ray

    tasks = max(1, _TASKS_PER_CPU * int(ray.cluster_resources().get("CPU", 1)))
    parts = max(1, -(-tasks // len(files)))  # protobuf files are cut so that every CPU has work
    scan_task = ray.remote(num_returns=2)(scan)
    refs: list[Any] = [
        scan_task.remote(i, path, k, parts) for i, path in enumerate(files) for k in range(parts)
    ]
    scanned: list[Scanned] = ray.get([index for index, _ in refs])
    spans = [trace_spans for _, trace_spans in refs]
    del refs
    bad = [part.error for part in scanned if part.error]  # parts in file order
    keys = episode_keys(scanned)
    assigned = deal(scanned, keys, tasks)
    # The shuffle: each scanned part cut, where it is, into one piece per convert task it feeds.
    pieces: list[list[Any]] = [[] for _ in range(len(set(assigned.values())))]
    split_task = ray.remote(_split_task)
    for part, part_spans in zip(scanned, spans, strict=True):
        if not part.traces:
            continue
        episodes = [keys.get(t.trace, t.trace) for t in part.traces]
        fed = sorted({assigned[episode] for episode in episodes})
        output = {task: i for i, task in enumerate(fed)}
        targets = [output[assigned[episode]] for episode in episodes]
        cut: Any = split_task.options(num_returns=len(fed)).remote(part_spans, episodes, targets, len(fed))
        for task, ref in zip(fed, [cut] if len(fed) == 1 else cut, strict=True):
            pieces[task].append(ref)
    del spans  # each part's spans are freed once split
    convert_task = ray.remote(num_returns="streaming")(_convert_task)
    pending: list[Any] = [
        convert_task.remote(converter, hook, writer.max_trace_bytes, *refs) for refs in pieces
    ]
    del pieces
    written = failed = 0
    ready: list[Any]  # streaming generators (ObjectRefGenerator)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for generator in ready:
            try:
                batch_ref = next(generator)
            except StopIteration:
                continue
            pending.append(generator)
            for key, lines, error in ray.get(batch_ref):
                if lines is None:
                    failed += 1
                    log.error("orchestrace: could not convert episode %s: %s", key, error)
                else:
                    writer.write_raw(*lines)
                    written += 1
    return RayConvertResult(
        files=len(files),
        spans=sum(t.span_count for part in scanned for t in part.traces),
        written=written,
        failed=failed,
        bad_files=tuple(bad),
    )
