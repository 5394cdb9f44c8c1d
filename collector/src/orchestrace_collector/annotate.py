"""``orchestrace annotate``: late rewards (verifiers, human feedback) added to traces already written.

The last revision of each matching trace is written again, as the next revision, with the reward in
``rewards`` and its turns copied to the new revision (readers take the last revision; see ``output.py``). The
reward key is the family (``team``, ``verifier``, ...) or ``family:name`` when a name is given
(``verifier:unit_tests``). Credit is assigned again from the (possibly new) team reward, on events, agents and
turns (``convert.credit``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrace_collector.convert.credit import apply_credit, credit_turns
from orchestrace_collector.model import Trace, Turn
from orchestrace_collector.output import REVISION, TraceDirWriter, latest_traces, latest_turns, revision_of


class NoSuchTrace(LookupError):
    pass


def reward_key(family: str, name: str | None) -> str:
    return f"{family}:{name}" if name else family


def annotate(
    out_dir: Path,
    *,
    reward: float,
    family: str,
    name: str | None = None,
    trace_id: str | None = None,
    task_id: str | None = None,
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
    revised: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for tid, trace in matching.items():
        new = copy.deepcopy(trace)
        new.setdefault("rewards", {})[reward_key(family, name)] = float(reward)
        new.setdefault("metrics", {})[REVISION] = revision_of(trace) + 1
        try:
            model = Trace.model_validate(new)
            apply_credit(model, strategy)
            credited = credit_turns(model, [Turn.model_validate(t) for t in turns[tid]])
        except ValidationError as exc:
            raise ValueError(f"trace {tid} is not a valid trace: {exc.errors()[:1]}") from None
        new = model.to_json_dict()
        if validate is not None and (errors := validate(new)):
            raise ValueError(f"annotated trace {tid} would be invalid: {'; '.join(errors[:3])}")
        revised.append((new, [t.model_dump(exclude_none=True) for t in credited]))
    writer = TraceDirWriter(out_dir)
    try:
        for new, new_turns in revised:
            writer.write_dicts(new, new_turns)
    finally:
        writer.close()
    return [new for new, _ in revised]
