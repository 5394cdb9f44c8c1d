"""``orchestrace annotate``: late rewards (verifiers, human feedback) added to traces already written.

The last revision of each matching trace is written again, as the next revision, with the reward (a team-unit
channel, see ``annotations.py``) and credit assigned again; the annotation is recorded so that every later
revision of the trace keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrace_collector.annotations import Annotation, make_annotation
from orchestrace_collector.convert.rewards import channel_key
from orchestrace_collector.model import REVISION, Trace, Turn
from orchestrace_collector.output import TraceDirWriter, latest_traces, latest_turns, revision_of


class NoSuchTrace(LookupError):
    pass


def annotate(
    out_dir: Path,
    *,
    reward: float,
    family: str,
    name: str | None = None,
    trace_id: str | None = None,
    task_id: str | None = None,
    mode: str = "replace",
    validate: Callable[[dict[str, Any]], list[str]] | None = None,
    strategy: str = "causal",
) -> list[dict[str, Any]]:
    """Write a new revision of every trace matching ``trace_id`` or ``task_id``. Returns the new revisions.
    ``validate`` (e.g. ``validate_trace``) is checked before anything is written: ValueError on errors."""
    if (trace_id is None) == (task_id is None):
        raise ValueError("give exactly one of trace_id and task_id")
    traces = latest_traces([out_dir])
    matching = {
        tid: t
        for tid, t in traces.items()
        if (trace_id is not None and tid == trace_id) or (task_id is not None and t.get("task_id") == task_id)
    }
    if not matching:
        raise NoSuchTrace(
            f"no trace with {'trace_id' if trace_id else 'task_id'} {trace_id or task_id!r} in {out_dir}"
        )
    turns = latest_turns(out_dir, matching)
    revised: list[tuple[Annotation, dict[str, Any], list[dict[str, Any]]]] = []
    for tid, trace in matching.items():
        revision = int(revision_of(trace)) + 1
        annotation = make_annotation(tid, channel_key(family, name), reward, mode, strategy, revision)
        try:
            model = Trace.model_validate(trace)
            credited = annotation.apply(model, [Turn.model_validate(t) for t in turns[tid]])
        except ValidationError as exc:
            raise ValueError(f"trace {tid} is not a valid trace: {exc.errors()[:1]}") from None
        model.metrics[REVISION] = revision
        new = model.to_json_dict()
        if validate is not None and (errors := validate(new)):
            raise ValueError(f"annotated trace {tid} would be invalid: {'; '.join(errors[:3])}")
        revised.append((annotation, new, [t.model_dump(exclude_none=True) for t in credited]))
    writer = TraceDirWriter(out_dir)
    try:
        for annotation, new, new_turns in revised:
            writer.record_annotation(annotation)
            writer.write_dicts(new, new_turns)
    finally:
        writer.close()
    return [new for _, new, _ in revised]
