"""Offline conversion on Ray Data: ``orchestrace convert --engine ray``, for dumps too large for one process.

One pass over the files and one shuffle:

1. Scan: a Ray Data map with one task per file (or per part of a file, so that every CPU has work) reads its
   file and cuts its spans by OTel trace: one row per trace it holds, carrying those spans (a plain OTLP
   protobuf file's spans stay protobuf, re-serialized per trace: they are decoded only on the other side of
   the shuffle), their positions in the input, and the episode id the first of them naming one names.
2. The driver reads the rows' small columns (never the spans) and keys each OTel trace by episode as the
   assembler does (``assemble.episode_key_of``): the episode id named first in input order (file, then
   position) by a span of the trace, else the trace id. An episode may span several traces and files.
3. Convert: the rows are grouped by episode (a Ray Data groupby, the one shuffle); each group's spans are
   decoded, put back in input order and converted with the same converter as the local engine, and the
   lines to write come back to the driver, which appends them to the same
   :class:`~orchestrace_collector.output.TraceDirWriter`.

The output directory is the one the local engine writes (line order aside: episodes are written as they
finish). Within an episode, spans keep their input order, and a span id seen twice counts once (the later
copy wins, at the first copy's position). A file that cannot be read is reported in ``bad_files`` and
skipped.

Cluster: ``address`` (``--address``), else ``RAY_ADDRESS``, else a local Ray cluster started for the run
(and stopped after). Workers of a real cluster need ``orchestrace-collector`` installed and the input paths
readable from every node (a shared filesystem).
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import Message
from orchestrace_semconv import ORCH_EPISODE_ID

from orchestrace_collector.assemble import (
    Converter,
    EpisodeHook,
    default_converter,
    episode_key,
    episode_key_of,
)
from orchestrace_collector.decode import (
    PayloadError,
    decode_file,
    raw_span_attributes,
    read_export,
    spans_from_export,
)
from orchestrace_collector.model import SPAN_COUNT
from orchestrace_collector.offline import input_files
from orchestrace_collector.output import TraceDirWriter
from orchestrace_collector.spans import Span

log = logging.getLogger(__name__)

# A span's position in the input, for the local engine's order: file index in the high bits, position in the
# low.
_POSITION_BITS = 40
_EPISODE_ATTRIBUTE = ORCH_EPISODE_ID.encode()
# Scan tasks per CPU: a file larger than the others then does not leave a CPU idle at the end.
_TASKS_PER_CPU = 2

#: What a worker sends back for one converted episode: its lines (``TraceDirWriter.write_raw``'s arguments)
#: or the error that stopped it.
_Lines = tuple[bytes, list[bytes], dict[str, str]]


@dataclass(frozen=True)
class RayConvertResult:
    files: int
    spans: int
    written: int
    failed: int
    bad_files: tuple[str, ...]


# --- 1. scan (workers) --------------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        decode_file(Path(path))  # raises the PayloadError the local engine reports for this file
        raise


def _row(trace: str, *, count: int = 0, hint: str = "", hint_at: int = -1, protobuf: bool = False,
         spans: bytes = b"", positions: bytes = b"", error: str = "", file: int = -1) -> dict[str, Any]:
    """One output row of the scan (every row has every column: Ray Data makes a table of them)."""
    return {"trace": trace, "count": count, "hint": hint, "hint_at": hint_at, "protobuf": protobuf,
            "spans": spans, "positions": positions, "error": error, "file": file}


def _scan(part: dict[str, Any]) -> list[dict[str, Any]]:
    """One file, or part ``part`` of ``parts`` of a protobuf file's spans -> a row per OTel trace."""
    number, path = int(part["file"]), str(part["path"])
    try:
        data = _read(path)
        source = read_export(data)
    except PayloadError as exc:
        return [_row("", error=f"{path}: {exc}", file=number)] if part["part"] == 0 else []
    base = number << _POSITION_BITS
    if isinstance(source, list):  # any other format, decoded whole: in part 0
        if part["part"] != 0:
            return []
        by_trace: dict[str, list[tuple[int, Span]]] = {}
        for position, span in enumerate(source):
            by_trace.setdefault(span.trace_id, []).append((base + position, span))
        return [_decoded_row(trace, items) for trace, items in by_trace.items()]
    named = _EPISODE_ATTRIBUTE in data  # attribute keys are plain UTF-8 in protobuf
    return list(_protobuf_rows(source, base, int(part["part"]), int(part["parts"]), named))


def _decoded_row(trace: str, items: list[tuple[int, Span]]) -> dict[str, Any]:
    hint, hint_at = next(((key, at) for at, span in items if (key := episode_key_of(span))), ("", -1))
    return _row(trace, count=len(items), hint=hint, hint_at=hint_at,
                spans=pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL))


class _TraceExport:
    """The spans of one OTel trace met in a scanned part, as an export of their own."""

    __slots__ = ("export", "hint", "hint_at", "positions", "resource_spans", "scope", "scope_spans")

    def __init__(self, export: Message) -> None:
        self.export = export
        self.positions = array("q")
        self.resource_spans: Message | None = None  # the input's resource and scope of the last span added
        self.scope_spans: Message | None = None
        self.scope: Message | None = None  # where the next span of that scope goes
        self.hint = ""
        self.hint_at = -1

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


def _protobuf_rows(
    request: Message, base: int, part: int, parts: int, named: bool
) -> Iterator[dict[str, Any]]:
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
                position += 1
    for trace_id, trace in traces.items():
        yield _row(trace_id.hex(), count=len(trace.positions), hint=trace.hint, hint_at=trace.hint_at,
                   protobuf=True, spans=trace.export.SerializeToString(), positions=trace.positions.tobytes())


def _episode_key(span: Message) -> str | None:
    """``episode_key_of`` a protobuf span, decoding its attributes only when one names an episode."""
    if not any(_EPISODE_ATTRIBUTE in raw for raw in span.attributes):
        return None
    return episode_key(raw_span_attributes(span))


# --- 2. keys (driver) ---------------------------------------------------------------------------------------


def _episode_keys(rows: list[dict[str, Any]]) -> dict[str, str]:
    """OTel trace id -> episode key, for the traces that name an episode: the one named first in the input."""
    first: dict[str, tuple[int, str]] = {}
    for row in rows:
        if row["hint"] and (row["trace"] not in first or row["hint_at"] < first[row["trace"]][0]):
            first[row["trace"]] = (int(row["hint_at"]), str(row["hint"]))
    return {trace: key for trace, (_, key) in first.items()}


def _with_episode(batch: dict[str, Any], keys: dict[str, str]) -> dict[str, Any]:
    """The rows that carry spans (not a bad file's), each with its episode key."""
    spans = batch["error"] == ""
    kept = {column: values[spans] for column, values in batch.items()}
    kept["episode"] = np.array([keys.get(trace, trace) for trace in kept["trace"]], dtype=object)
    return kept


# --- 3. convert (workers) -----------------------------------------------------------------------------------


def _convert_group(
    batch: dict[str, Any], converter: Converter, hook: EpisodeHook | None, max_trace_bytes: int
) -> dict[str, list[bytes]]:
    """All rows of one episode -> its result: ``(key, lines, "")``, or ``(key, None, what stopped it)``."""
    positioned: list[tuple[int, Span]] = []
    for protobuf, spans, positions in zip(batch["protobuf"], batch["spans"], batch["positions"], strict=True):
        if protobuf:
            at = array("q")
            at.frombytes(positions)
            positioned.extend(zip(at, spans_from_export(spans), strict=True))
        else:
            positioned.extend(pickle.loads(spans))
    positioned.sort(key=_first)
    result = _convert(str(batch["episode"][0]), positioned, converter, hook, max_trace_bytes)
    return {"results": [pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)]}


def _first(item: tuple[int, Span]) -> int:
    return item[0]


def _convert(
    key: str,
    positioned: Sequence[tuple[int, Span]],
    converter: Converter,
    hook: EpisodeHook | None,
    max_trace_bytes: int,
) -> tuple[str, _Lines | None, str]:
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
        trace_line, turn_lines = converted.json_lines(0, max_trace_bytes)
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
    if local:
        # A local cluster's workers share this interpreter's environment: Ray's `uv run` hook would only
        # package the working directory and start every worker through uv (read when ray is first imported).
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray

    files = [str(path) for path in input_files(inputs)]
    if not files:
        return RayConvertResult(files=0, spans=0, written=0, failed=0, bad_files=())
    started = not ray.is_initialized()
    if started:
        # "local": a cluster of our own, even when `ray start` left the address of another one in Ray's temp
        # directory (which a bare ray.init() would join); address None with RAY_ADDRESS: ray.init reads it.
        ray.init(
            address="local" if local else address,
            # A cluster of our own listens on loopback only (a real cluster is the user's to configure).
            _node_ip_address="127.0.0.1" if local else None,
            log_to_driver=False,
            include_dashboard=False,
            configure_logging=False,
        )
    try:
        return _run(files, writer, converter, hook)
    finally:
        if started:
            ray.shutdown()


def _run(
    files: list[str], writer: TraceDirWriter, converter: Converter, hook: EpisodeHook | None
) -> RayConvertResult:
    import ray
    import ray.data
    from ray.data.context import ShuffleStrategy

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    # Few large groups of rows: the task-based sort shuffle starts far faster than the actor-based hash
    # shuffle.
    context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    tasks = max(1, _TASKS_PER_CPU * int(ray.cluster_resources().get("CPU", 1)))
    parts = max(1, -(-tasks // len(files)))  # protobuf files are cut so that every CPU has work
    scan = [{"file": i, "path": path, "part": k, "parts": parts}
            for i, path in enumerate(files) for k in range(parts)]
    scanned = ray.data.from_items(scan, override_num_blocks=len(scan)).flat_map(_scan).materialize()
    rows = scanned.select_columns(["trace", "count", "hint", "hint_at", "error", "file"]).take_all()
    bad = [str(r["error"]) for r in sorted(rows, key=lambda r: int(r["file"])) if r["error"]]
    keys = _episode_keys(rows)
    episodes = {keys.get(r["trace"], r["trace"]) for r in rows if not r["error"]}
    written = failed = 0
    if episodes:
        converted = (
            scanned.map_batches(_with_episode, fn_kwargs={"keys": keys}, batch_format="numpy")
            .groupby("episode", num_partitions=max(1, min(tasks, len(episodes))))
            .map_groups(
                functools.partial(
                    _convert_group, converter=converter, hook=hook, max_trace_bytes=writer.max_trace_bytes
                ),
                batch_format="numpy",
            )
        )
        for row in converted.iter_rows():
            key, lines, error = pickle.loads(row["results"])
            if lines is None:
                failed += 1
                log.error("orchestrace: could not convert episode %s: %s", key, error)
            else:
                writer.write_raw(*lines)
                written += 1
    return RayConvertResult(
        files=len(files),
        spans=sum(int(r["count"]) for r in rows),
        written=written,
        failed=failed,
        bad_files=tuple(bad),
    )
