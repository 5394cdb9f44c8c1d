"""Offline conversion on Ray Data: ``orchestrace convert --engine ray``, for dumps too large for one process.

The dump files are read as a dataset (one row per file), decoded on the workers into per-(file, OTel trace)
rows, grouped by episode and mapped through the same converter as the local engine; the driver streams the
converted episodes into the same :class:`~orchestrace_collector.output.TraceDirWriter`, so the output
directory is the one the local engine writes (line order aside: episodes are written as they finish).

Episodes are keyed as the assembler keys them (``assemble.episode_key_of``): the episode id found on any span
of an OTel trace, else the OTel trace id. That needs every span of a trace to be seen before its key is known,
so the decoded rows are materialized once, the (small) map from the traces that name an episode to that
episode is collected on the driver, and the rows are then grouped under their resolved key. A span id seen
twice counts once (the later copy wins, at the first copy's position), as in the assembler.

Cluster: ``address`` (``--address``), else ``RAY_ADDRESS``, else a local Ray cluster started for the run
(and stopped after). Workers of a real cluster need ``orchestrace-collector`` installed and the input paths
readable from every node (a shared filesystem).
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrace_collector.assemble import Converter, EpisodeHook, default_converter, episode_key_of
from orchestrace_collector.decode import PayloadError, decode_bytes
from orchestrace_collector.offline import input_files
from orchestrace_collector.output import SPAN_COUNT, TraceDirWriter
from orchestrace_collector.spans import Span

log = logging.getLogger(__name__)

# A span's position in the input, for the local engine's order: file index in the high bits, position in the
# low.
_POSITION_BITS = 40


@dataclass(frozen=True)
class RayConvertResult:
    files: int
    spans: int
    written: int
    failed: int
    bad_files: tuple[str, ...]


def _decode_file(row: dict[str, Any], file_index: dict[str, int]) -> list[dict[str, Any]]:
    """One dump file -> one row per OTel trace in it: its spans (pickled, with their input positions)."""
    base = file_index[row["path"]] << _POSITION_BITS
    try:
        spans = decode_bytes(row["bytes"])
    except PayloadError as exc:
        error = f"{row['path']}: {exc}"
        return [{"trace_id": "", "key": "", "first": base, "count": 0, "spans": b"", "error": error}]
    by_trace: dict[str, list[tuple[int, Span]]] = defaultdict(list)
    keys: dict[str, str] = {}
    for position, span in enumerate(spans):
        by_trace[span.trace_id].append((base + position, span))
        if span.trace_id not in keys and (named := episode_key_of(span)) is not None:
            keys[span.trace_id] = named
    return [
        {
            "trace_id": trace_id,
            "key": keys.get(trace_id, ""),
            "first": items[0][0],
            "count": len(items),
            "spans": pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL),
            "error": "",
        }
        for trace_id, items in by_trace.items()
    ]


class _CapturedLines(TraceDirWriter):
    """``TraceDirWriter.write`` without a directory: keeps the lines it would append, so the workers serialize
    and the driver only appends (``write_raw``)."""

    def __init__(self) -> None:  # deliberately no directory and no files
        self.lines: list[tuple[str, list[str], dict[str, str]]] = []

    def write_raw(
        self, trace_line: str, turn_lines: Sequence[str], contents: Mapping[str, str] | None
    ) -> None:
        self.lines.append((trace_line, list(turn_lines), dict(contents or {})))


def _convert_group(
    batch: dict[str, Any], converter: Converter, hook: EpisodeHook | None
) -> dict[str, list[Any]]:
    """All rows of one episode -> its output lines and contents (pickled), or the error that stopped it."""
    positioned = sorted(
        (item for blob in batch["spans"] for item in pickle.loads(blob)), key=lambda item: item[0]
    )
    unique: dict[str, Span] = {}
    for _, span in positioned:
        unique[span.span_id] = span
    spans = list(unique.values())
    key = str(batch["episode"][0])
    try:
        converted = converter(spans)
        if hook is not None:
            hook(converted)
        converted.trace.metrics[SPAN_COUNT] = float(len(spans))
        captured = _CapturedLines()
        captured.write(converted.trace, converted.turns, converted.contents, revision=0)
        payload = pickle.dumps(captured.lines[0], protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # one bad episode must not stop the run, as with the local engine
        return {"episode": [key], "result": [b""], "error": [f"{type(exc).__name__}: {exc}"]}
    return {"episode": [key], "result": [payload], "error": [""]}


def convert_with_ray(
    inputs: Sequence[Path],
    writer: TraceDirWriter,
    *,
    address: str | None = None,
    converter: Converter = default_converter,
    hook: EpisodeHook | None = None,
) -> RayConvertResult:
    """Convert the dump files ``inputs`` (files, or directories of them) on Ray into ``writer``."""
    if address is None and "RAY_ADDRESS" not in os.environ:
        # A local cluster's workers share this interpreter's environment: Ray's `uv run` hook would only
        # package the working directory and start every worker through uv (read when ray is first imported).
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray

    files = [str(path) for path in input_files(inputs)]
    if not files:
        return RayConvertResult(files=0, spans=0, written=0, failed=0, bad_files=())
    started = not ray.is_initialized()
    if started:
        # address None: ray.init itself honours RAY_ADDRESS, and starts a local cluster without it.
        ray.init(address=address, log_to_driver=False, include_dashboard=False, configure_logging=False)
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
    file_index = {path: i for i, path in enumerate(files)}
    decoded = (
        ray.data.read_binary_files(files, include_paths=True)
        .flat_map(functools.partial(_decode_file, file_index=file_index))
        .materialize()
    )
    bad: list[str] = []
    named: dict[str, tuple[int, str]] = {}
    spans = 0
    # One row per (file, trace): small enough to scan on the driver.
    for row in decoded.select_columns(["trace_id", "key", "first", "count", "error"]).iter_rows():
        spans += int(row["count"])
        if row["error"]:
            bad.append(row["error"])
        elif row["key"] and (row["trace_id"] not in named or row["first"] < named[row["trace_id"]][0]):
            named[row["trace_id"]] = (row["first"], row["key"])  # the key seen first in input order wins
    keys = {trace_id: key for trace_id, (_, key) in named.items()}

    def resolve(row: dict[str, Any]) -> list[dict[str, Any]]:
        if row["error"]:
            return []
        row["episode"] = keys.get(row["trace_id"], row["trace_id"])
        return [row]

    partitions = max(1, 2 * int(ray.cluster_resources().get("CPU", 1)))
    converted = (
        decoded.flat_map(resolve)
        .groupby("episode", num_partitions=partitions)
        .map_groups(_convert_group, fn_kwargs={"converter": converter, "hook": hook}, batch_format="numpy")
    )
    written = failed = 0
    for row in converted.iter_rows():
        if row["error"]:
            failed += 1
            log.error("orchestrace: could not convert episode %s: %s", row["episode"], row["error"])
            continue
        writer.write_raw(*pickle.loads(row["result"]))
        written += 1
    return RayConvertResult(
        files=len(files), spans=spans, written=written, failed=failed, bad_files=tuple(bad)
    )
