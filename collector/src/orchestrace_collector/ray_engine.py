"""Offline conversion on Ray Data: ``orchestrace convert --engine ray``, for dumps too large for one process.

Episodes are keyed as the assembler keys them (``assemble.episode_key_of``): the episode id found first (in
input order) on a span of an OTel trace, else the OTel trace id. A key is only known once every span of a
trace has been seen, and an episode may span several files, so the run has two passes over the files, each a
Ray Data map with one task per file (or per part of a file, so that every CPU has work):

1. Index: each task parses its file and returns, per OTel trace, the episode key it names (if any) and its
   span count. A plain OTLP protobuf file is only parsed (C) and scanned for trace ids; its spans are not
   decoded here. The driver resolves each trace's key and finds the episodes whose traces lie in more than
   one file (*split* episodes).
2. Convert: each task parses its file again, decodes only the spans of the episodes given to it and converts
   them with the same converter as the local engine, returning the serialized lines; the driver appends them
   to the same :class:`~orchestrace_collector.output.TraceDirWriter`. No span leaves the worker that decoded
   it, and nothing is shuffled.
3. Only when some episode is split: the spans of split episodes are decoded where they lie, grouped by
   episode (a Ray Data groupby, the one shuffle) and converted per group.

The output directory is the one the local engine writes (line order aside: episodes are written as they
finish). Within an episode, spans keep their input order (file, then position), and a span id seen twice
counts once (the later copy wins, at the first copy's position), as in the assembler. A file that cannot be
read is reported in ``bad_files`` and skipped.

Cluster: ``address`` (``--address``), else ``RAY_ADDRESS``, else a local Ray cluster started for the run
(and stopped after). Workers of a real cluster need ``orchestrace-collector`` installed and the input paths
readable from every node (a shared filesystem).
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
from collections import Counter, defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from orchestrace_semconv import ORCH_EPISODE_ID

from orchestrace_collector.assemble import Converter, EpisodeHook, default_converter, episode_key_of
from orchestrace_collector.decode import (
    PayloadError,
    decode_bytes,
    decode_file,
    drop_invalid_spans,
    parse_otlp_protobuf,
    spans_from_request,
)
from orchestrace_collector.model import Trace, Turn
from orchestrace_collector.offline import input_files
from orchestrace_collector.output import SPAN_COUNT, TraceDirWriter
from orchestrace_collector.spans import Span
from orchestrace_collector.wal import batches_as_request, is_wal

log = logging.getLogger(__name__)

# A span's position in the input, for the local engine's order: file index in the high bits, position in the
# low.
_POSITION_BITS = 40
_EPISODE_ATTRIBUTE_BYTES = (ORCH_EPISODE_ID.encode(),)
# Convert tasks per CPU: a file larger than the others then does not leave a CPU idle at the end.
_TASKS_PER_CPU = 2

#: A loaded dump file: a plain OTLP protobuf file as its parsed request, any other format as its spans.
_Source = ExportTraceServiceRequest | list[Span]
#: What a worker sends back for one converted episode: its lines (``TraceDirWriter.write_raw``'s arguments)
#: or the error that stopped it.
_Lines = tuple[str, list[str], dict[str, str]]


@dataclass(frozen=True)
class RayConvertResult:
    files: int
    spans: int
    written: int
    failed: int
    bad_files: tuple[str, ...]


# --- reading a file (workers) -------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        decode_file(Path(path))  # raises the PayloadError the local engine reports for this file
        raise


def _parse(data: bytes, *, validated: bool = False) -> _Source:
    """The file's bytes as ``decode_bytes`` reads them, but a plain protobuf file stays a parsed request, so
    that its spans are decoded only where they are needed (parsing is C and fast; decoding to ``Span`` is
    not). ``validated``: the index pass already checked the span ids of this file."""
    if is_wal(data):  # a collector's spool: its batches are one request
        data = batches_as_request(data)
    if data[:2] != b"\x1f\x8b" and data.lstrip()[:1] not in (b"{", b"["):  # decode_bytes' gzip and JSON
        try:
            request: ExportTraceServiceRequest | None = parse_otlp_protobuf(data)
        except PayloadError:
            request = None  # length-prefixed messages, or not protobuf: decode_bytes knows
        valid = request is not None and (validated or drop_invalid_spans(request)[0] == 0)
        if request is not None and request.resource_spans and valid:
            return request
    return decode_bytes(data)  # every other case, errors included, exactly as the local engine reads it


def _pb_spans(request: ExportTraceServiceRequest) -> Iterator[PbSpan]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans


def _decode_one(pb: PbSpan) -> Span:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.append(pb)
    return spans_from_request(request)[0]


def _pb_episode_key(pb: PbSpan) -> str | None:
    """``episode_key_of`` a protobuf span; the span is decoded only when it carries an episode attribute."""
    for kv in pb.attributes:
        if kv.key == ORCH_EPISODE_ID:
            return episode_key_of(_decode_one(pb))
    return None


def _selected_spans(source: _Source, traces: Collection[str] | None) -> list[tuple[int, Span]]:
    """The spans of the OTel traces ``traces`` (None: all), decoded, with their positions in the file."""
    if isinstance(source, list):
        return [(p, s) for p, s in enumerate(source) if traces is None or s.trace_id in traces]
    if traces is None:
        return list(enumerate(spans_from_request(source)))
    # Copy the wanted protobuf spans (C) into a smaller request, with their resources and scopes, and decode
    # only that one.
    wanted = {bytes.fromhex(t) for t in traces}
    subset = ExportTraceServiceRequest()
    positions: list[int] = []
    position = 0
    for resource_spans in source.resource_spans:
        into_resource = subset.resource_spans.add()
        into_resource.resource.CopyFrom(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            into_scope = into_resource.scope_spans.add()
            into_scope.scope.CopyFrom(scope_spans.scope)
            for pb in scope_spans.spans:
                if pb.trace_id in wanted:
                    into_scope.spans.append(pb)
                    positions.append(position)
                position += 1
    return list(zip(positions, spans_from_request(subset), strict=True))


# --- the passes (workers) -----------------------------------------------------------------------------------


def _index_file(row: dict[str, Any]) -> dict[str, Any]:
    """Pass 1: one file -> {OTel trace id: (episode key it names or None, span count)}, or why it is bad."""
    try:
        data = _read(row["path"])
        source = _parse(data)
    except PayloadError as exc:
        return {"file": row["file"], "error": f"{row['path']}: {exc}", "traces": b""}
    traces: dict[str, tuple[str | None, int]] = {}
    if isinstance(source, list):
        for span in source:
            key, count = traces.get(span.trace_id, (None, 0))
            traces[span.trace_id] = (key if key is not None else episode_key_of(span), count + 1)
    elif any(name in data for name in _EPISODE_ATTRIBUTE_BYTES):
        by_id: dict[bytes, tuple[str | None, int]] = {}
        for pb in _pb_spans(source):
            key, count = by_id.get(pb.trace_id, (None, 0))
            by_id[pb.trace_id] = (key if key is not None else _pb_episode_key(pb), count + 1)
        traces = {trace_id.hex(): value for trace_id, value in by_id.items()}
    else:  # attribute keys are plain UTF-8 in protobuf: no span of this file names an episode
        counts = Counter(pb.trace_id for pb in _pb_spans(source))
        traces = {trace_id.hex(): (None, count) for trace_id, count in counts.items()}
    return {
        "file": row["file"],
        "error": "",
        "traces": pickle.dumps(traces, protocol=pickle.HIGHEST_PROTOCOL),
    }


class _CapturedLines(TraceDirWriter):
    """``TraceDirWriter.write`` without a directory: keeps the lines it would append, so the workers serialize
    and the driver only appends (``write_raw``)."""

    def __init__(self, max_trace_bytes: int) -> None:  # deliberately no directory and no files
        self.lines: list[_Lines] = []
        self.max_trace_bytes = max_trace_bytes

    def apply_annotations(self, trace: Trace, turns: Sequence[Turn], revision: int,
                          ) -> tuple[Sequence[Turn], int]:
        return turns, revision  # a fresh conversion: nothing annotated it yet

    def write_raw(
        self, trace_line: str, turn_lines: Sequence[str], contents: Mapping[str, str] | None
    ) -> None:
        self.lines.append((trace_line, list(turn_lines), dict(contents or {})))


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
        converted.trace.metrics[SPAN_COUNT] = float(len(spans))
        captured = _CapturedLines(max_trace_bytes)
        captured.write(converted.trace, converted.turns, converted.contents, revision=0)
    except Exception as exc:  # one bad episode must not stop the run, as with the local engine
        return key, None, f"{type(exc).__name__}: {exc} ({len(spans)} spans)"
    return key, captured.lines[0], ""


def _convert_part(
    row: dict[str, Any], converter: Converter, hook: EpisodeHook | None, max_trace_bytes: int
) -> dict[str, Any]:
    """Pass 2: the episodes of one file (or part of it) that lie in that file only -> their results."""
    keys: dict[str, str] = pickle.loads(row["keys"])
    traces: list[str] | None = pickle.loads(row["traces"])
    episodes: dict[str, list[tuple[int, Span]]] = defaultdict(list)
    source = _parse(_read(row["path"]), validated=True)
    for item in _selected_spans(source, None if traces is None else set(traces)):
        episodes[keys.get(item[1].trace_id, item[1].trace_id)].append(item)
    results = [_convert(key, items, converter, hook, max_trace_bytes) for key, items in episodes.items()]
    return {"results": pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)}


def _split_parts(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Pass 3, map side: one file's spans of split episodes, one row per episode, positioned in the input."""
    keys: dict[str, str] = pickle.loads(row["keys"])
    base = row["file"] << _POSITION_BITS
    episodes: dict[str, list[tuple[int, Span]]] = defaultdict(list)
    for position, span in _selected_spans(_parse(_read(row["path"]), validated=True), set(keys)):
        episodes[keys[span.trace_id]].append((base + position, span))
    return [
        {"episode": key, "spans": pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)}
        for key, items in episodes.items()
    ]


def _convert_group(
    batch: dict[str, Any], converter: Converter, hook: EpisodeHook | None, max_trace_bytes: int
) -> dict[str, list[Any]]:
    """Pass 3, reduce side: all parts of one split episode -> its result."""
    positioned = sorted((item for blob in batch["spans"] for item in pickle.loads(blob)), key=lambda i: i[0])
    result = _convert(str(batch["episode"][0]), positioned, converter, hook, max_trace_bytes)
    return {"results": [pickle.dumps([result], protocol=pickle.HIGHEST_PROTOCOL)]}


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


@dataclass
class _Plan:
    """What the index pass tells the driver."""

    spans: int
    bad: list[str]
    #: Per readable file: {OTel trace id: span count}, in file order.
    traces: dict[int, dict[str, int]]
    #: OTel trace id -> episode key, for the traces that name one.
    keys: dict[str, str]

    def key(self, trace_id: str) -> str:
        return self.keys.get(trace_id, trace_id)


def _plan(rows: list[dict[str, Any]]) -> _Plan:
    plan = _Plan(spans=0, bad=[], traces={}, keys={})
    for row in sorted(rows, key=lambda r: int(r["file"])):  # file order: the key named first wins
        if row["error"]:
            plan.bad.append(row["error"])
            continue
        traces: dict[str, tuple[str | None, int]] = pickle.loads(row["traces"])
        plan.traces[int(row["file"])] = {trace_id: count for trace_id, (_, count) in traces.items()}
        for trace_id, (key, count) in traces.items():
            plan.spans += count
            if key is not None:
                plan.keys.setdefault(trace_id, key)
    return plan


def _convert_rows(
    files: list[str], plan: _Plan, split: set[str], parts_per_file: int
) -> Iterator[dict[str, Any]]:
    """Pass 2's tasks: each file's single-file episodes, cut in ``parts_per_file`` parts of similar size."""
    for number, counts in plan.traces.items():
        episodes: dict[str, int] = defaultdict(int)  # key -> spans in this file
        for trace_id, count in counts.items():
            if plan.key(trace_id) not in split:
                episodes[plan.key(trace_id)] += count
        if not episodes:
            continue
        keys = {t: plan.keys[t] for t in counts if t in plan.keys and plan.keys[t] in episodes}
        cut = max(1, -(-sum(episodes.values()) // parts_per_file))
        parts: list[set[str]] = [set()]
        filled = 0
        for key, count in episodes.items():
            if filled >= cut:
                parts.append(set())
                filled = 0
            parts[-1].add(key)
            filled += count
        whole = len(parts) == 1 and len(episodes) == len({plan.key(t) for t in counts})
        for part in parts:
            traces = None if whole else [t for t in counts if plan.key(t) in part]
            yield {
                "path": files[number],
                "keys": pickle.dumps(keys, protocol=pickle.HIGHEST_PROTOCOL),
                "traces": pickle.dumps(traces, protocol=pickle.HIGHEST_PROTOCOL),
            }


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
    on_each_file = [{"file": i, "path": path} for i, path in enumerate(files)]
    plan = _plan(
        ray.data.from_items(on_each_file, override_num_blocks=len(files)).map(_index_file).take_all()
    )

    files_of: dict[str, set[int]] = defaultdict(set)
    for number, counts in plan.traces.items():
        for trace_id in counts:
            files_of[plan.key(trace_id)].add(number)
    split = {key for key, numbers in files_of.items() if len(numbers) > 1}

    written = failed = 0

    def write(results: list[tuple[str, _Lines | None, str]]) -> None:
        nonlocal written, failed
        for key, lines, error in results:
            if lines is None:
                failed += 1
                log.error("orchestrace: could not convert episode %s: %s", key, error)
            else:
                writer.write_raw(*lines)
                written += 1

    parts = list(_convert_rows(files, plan, split, max(1, -(-tasks // max(1, len(plan.traces))))))
    if parts:
        convert_part = functools.partial(
            _convert_part, converter=converter, hook=hook, max_trace_bytes=writer.max_trace_bytes
        )
        converted = ray.data.from_items(parts, override_num_blocks=len(parts)).map(convert_part)
        for row in converted.iter_rows():
            write(pickle.loads(row["results"]))
    if split:
        in_split = [
            {
                "file": number,
                "path": files[number],
                "keys": pickle.dumps(
                    {t: plan.key(t) for t in counts if plan.key(t) in split},
                    protocol=pickle.HIGHEST_PROTOCOL,
                ),
            }
            for number, counts in plan.traces.items()
            if any(plan.key(t) in split for t in counts)
        ]
        grouped = (
            ray.data.from_items(in_split, override_num_blocks=len(in_split))
            .flat_map(_split_parts)
            .groupby("episode", num_partitions=min(tasks, len(split)))
            .map_groups(
                functools.partial(
                    _convert_group, converter=converter, hook=hook, max_trace_bytes=writer.max_trace_bytes
                ),
                batch_format="numpy",
            )
        )
        for row in grouped.iter_rows():
            write(pickle.loads(row["results"]))
    return RayConvertResult(
        files=len(files), spans=plan.spans, written=written, failed=failed, bad_files=tuple(plan.bad)
    )
