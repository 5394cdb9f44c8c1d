"""``orchestrace stats``: a dataset summarized (last revision of each trace), as rich tables.

Groups: the rollouts of one task (``task_id``), what group-relative methods (GRPO, RLOO) compare. A group's
spread is that of its rollouts' outcomes (``orchestrace_collector.outcome``: the sum of the team-unit
channels, or the channel ``--outcome`` names), the number the exports call ``episode_reward``; a group whose
rollouts all got the same outcome gives those methods no signal, so the count of such groups is shown.

Rewards: keys that name one instance of a unit (``credit:agent:<label>``, the credit each agent activation
got; ``agent:<label>``, a reward scoped to one) are one row per kind (``credit:agent:*``), summed within each
trace, with the number of keys it covers: a dataset of many agents would otherwise list a row per activation.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrace_semconv import REWARD_FAMILIES, REWARD_UNITS
from rich.table import Table

from orchestrace_collector.outcome import episode_outcome, outcome_key

#: Units that are not also a family's name: ``agent:x`` is scoped to an instance, ``tool:x`` a named reward.
_INSTANCE_UNITS = frozenset(REWARD_UNITS) - frozenset(REWARD_FAMILIES)


@dataclass
class DatasetStats:
    traces: int = 0
    events: int = 0
    incomplete_traces: int = 0
    event_types: Counter[str] = field(default_factory=Counter)
    topologies: Counter[str] = field(default_factory=Counter)
    rewards: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: row key -> the distinct reward keys it covers (``credit:agent:*`` -> each agent's key)
    reward_keys: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    costs: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    turns: int = 0
    #: task id -> the outcome of each of its rollouts (None: not rewarded)
    groups: defaultdict[str, list[float | None]] = field(default_factory=lambda: defaultdict(list))


def compute_stats(
    traces: Iterable[Mapping[str, Any]], turns: int = 0, outcome: str | None = None
) -> DatasetStats:
    """``outcome``: the reward channel that is each rollout's outcome (default: the outcome rule)."""
    channel = outcome_key(outcome)
    stats = DatasetStats(turns=turns)
    for trace in traces:
        stats.traces += 1
        events = trace.get("events") or []
        stats.events += len(events)
        stats.event_types.update(
            f"{e.get('type')} ({e['decision']})" if e.get("decision") else str(e.get("type")) for e in events
        )
        if any(e.get("incomplete") for e in events):
            stats.incomplete_traces += 1
        stats.topologies[str(trace.get("topology") or "unknown")] += 1
        per_row: dict[str, float] = {}
        for key, value in (trace.get("rewards") or {}).items():
            row = reward_row(key)
            per_row[row] = per_row.get(row, 0.0) + float(value)
            stats.reward_keys[row].add(key)
        for row, total in per_row.items():
            stats.rewards[row].append(total)
        for key, value in (trace.get("costs") or {}).items():
            stats.costs[key] += float(value)
        stats.groups[str(trace.get("task_id"))].append(episode_outcome(trace.get("rewards") or {}, channel))
    return stats


def reward_row(key: str) -> str:
    """The rewards table's row of a reward key: its kind (``credit:agent:*``, ``agent:*``) for a key naming
    one instance of a unit, else the key itself."""
    parts = key.split(":")
    if parts[0] == "credit" and len(parts) >= 3:
        return f"credit:{parts[1]}:*"
    if parts[0] in _INSTANCE_UNITS and len(parts) >= 2:
        return f"{parts[0]}:*"
    return key


def group_tables(stats: DatasetStats, max_rows: int = 20) -> list[Table]:
    """The group structure: how many tasks, rollouts per task, reward spread within each group."""
    sizes = [len(rollouts) for rollouts in stats.groups.values()]
    spreads = {task: _spread(rollouts) for task, rollouts in stats.groups.items()}
    overview = Table(title="groups (rollouts of a task)")
    overview.add_column("")
    overview.add_column("count", justify="right")
    overview.add_row("tasks", str(len(sizes)))
    if sizes:
        overview.add_row(
            "rollouts per task (min / mean / max)",
            f"{min(sizes)} / {sum(sizes) / len(sizes):.3g} / {max(sizes)}",
        )
    overview.add_row("tasks with 2+ rollouts", str(sum(size > 1 for size in sizes)))
    overview.add_row(
        "tasks with 2+ rewarded rollouts, all the same reward",
        str(sum(spread is not None and spread[2] == spread[3] for spread in spreads.values())),
    )

    per_task = Table(title=f"outcome spread within groups (top {max_rows} tasks by rollouts)")
    for column in ("task", "rollouts", "rewarded", "mean", "std", "min", "max"):
        per_task.add_column(column, justify="left" if column == "task" else "right")
    for task in sorted(stats.groups, key=lambda t: (-len(stats.groups[t]), t))[:max_rows]:
        rewarded = [r for r in stats.groups[task] if r is not None]
        spread = spreads[task]
        cells = [f"{v:.4g}" for v in spread] if spread else ["-"] * 4
        if not spread and rewarded:
            cells = [f"{rewarded[0]:.4g}", "-", f"{rewarded[0]:.4g}", f"{rewarded[0]:.4g}"]
        per_task.add_row(task, str(len(stats.groups[task])), str(len(rewarded)), *cells)
    return [overview, per_task]


def _spread(rollouts: list[float | None]) -> tuple[float, float, float, float] | None:
    """(mean, population std, min, max) of the rewarded rollouts, when there are two or more."""
    rewarded = [r for r in rollouts if r is not None]
    if len(rewarded) < 2:
        return None
    return statistics.fmean(rewarded), statistics.pstdev(rewarded), min(rewarded), max(rewarded)


def stats_tables(stats: DatasetStats) -> list[Table]:
    overview = Table(title="dataset")
    overview.add_column("")
    overview.add_column("count", justify="right")
    overview.add_row("traces", str(stats.traces))
    overview.add_row("incomplete traces", str(stats.incomplete_traces))
    overview.add_row("events", str(stats.events))
    overview.add_row("turns (model calls)", str(stats.turns))

    events = Table(title="events by type")
    events.add_column("type")
    events.add_column("count", justify="right")
    for kind, count in stats.event_types.most_common():
        events.add_row(kind, str(count))

    topologies = Table(title="topologies")
    topologies.add_column("topology")
    topologies.add_column("traces", justify="right")
    for topology, count in stats.topologies.most_common():
        topologies.add_row(topology, str(count))

    rewards = Table(title="rewards")
    for column in ("key", "keys", "traces", "mean", "min", "max"):
        rewards.add_column(column, justify="left" if column == "key" else "right")
    for key in sorted(stats.rewards):
        values = stats.rewards[key]
        rewards.add_row(
            key,
            str(len(stats.reward_keys[key])),
            str(len(values)),
            f"{sum(values) / len(values):.4g}",
            f"{min(values):.4g}",
            f"{max(values):.4g}",
        )

    costs = Table(title="costs")
    for column in ("cost", "total", "mean per trace"):
        costs.add_column(column, justify="left" if column == "cost" else "right")
    for key in sorted(stats.costs):
        costs.add_row(key, f"{stats.costs[key]:.6g}", f"{stats.costs[key] / max(stats.traces, 1):.4g}")
    return [overview, events, topologies, rewards, costs, *group_tables(stats)]
