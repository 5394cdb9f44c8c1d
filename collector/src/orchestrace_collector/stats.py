"""``orchestrace stats``: a dataset summarized (last revision of each trace), as rich tables."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table


@dataclass
class DatasetStats:
    traces: int = 0
    events: int = 0
    incomplete_traces: int = 0
    event_types: Counter[str] = field(default_factory=Counter)
    topologies: Counter[str] = field(default_factory=Counter)
    rewards: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    costs: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    turns: int = 0


def compute_stats(traces: Iterable[Mapping[str, Any]], turns: int = 0) -> DatasetStats:
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
        for key, value in (trace.get("rewards") or {}).items():
            stats.rewards[key].append(float(value))
        for key, value in (trace.get("costs") or {}).items():
            stats.costs[key] += float(value)
    return stats


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
    for column in ("key", "traces", "mean", "min", "max"):
        rewards.add_column(column, justify="left" if column == "key" else "right")
    for key in sorted(stats.rewards):
        values = stats.rewards[key]
        rewards.add_row(
            key,
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
    return [overview, events, topologies, rewards, costs]
