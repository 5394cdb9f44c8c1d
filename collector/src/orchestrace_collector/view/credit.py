"""Credit of a written trace under each of the project's strategies, recomputed from the trace and its turns
by the converter's own code (``convert.credit.recredit``, as ``annotate`` and ``examples/recompute_trace.py``
do), never by a second implementation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrace_collector.convert.credit import STRATEGIES, recredit
from orchestrace_collector.model import Trace, Turn


def credit_by_strategy(trace_obj: dict[str, Any], turn_objs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per strategy: each turn's credit by channel, each event's credit, and each activation's total
    (``[agent, activation, total]``: keyed by the fields, not by a ``name#k`` label)."""
    result: dict[str, Any] = {"strategies": list(STRATEGIES), "by_strategy": {}}
    for strategy in STRATEGIES:
        trace = Trace.model_validate(trace_obj)
        turns = [Turn.model_validate(t) for t in turn_objs]
        turns = recredit(trace, turns, strategy)
        totals: dict[tuple[str, int | None], float] = {}
        # The team reward's split over activations: their turns' credit (their events' without turns).
        owned = [((t.agent, t.activation), t.reward) for t in turns] or [
            ((ev.agent, ev.activation), ev.credit) for ev in trace.events if ev.activation is not None]
        for owner, share in owned:
            totals[owner] = totals.get(owner, 0.0) + (share or 0.0)
        result["by_strategy"][strategy] = {
            "turns": {t.turn_id: t.credit or {} for t in turns},
            "events": {ev.id: ev.credit for ev in trace.events if ev.credit is not None},
            "agents": [[agent, activation, total] for (agent, activation), total in totals.items()],
        }
    return result
