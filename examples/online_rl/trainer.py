"""A trainer stand-in: reads groups of N rollouts of a task from the collector's live feed and computes their
group-relative advantages (GRPO's, from the episode outcome ``orchestrace_collector.outcome`` defines)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from orchestrace_collector.feed import Feed, Group


@dataclass
class Step:
    """What one training step got: a group and its advantages."""

    group: Group
    advantages: list[float | None]


def train(collector_url: str, n: int, groups: int, cursor_file: Path, deadline_s: float = 60.0,
          ) -> Iterator[Step]:
    """``groups`` groups of ``n`` rollouts, with their advantages, as the feed completes them."""
    with Feed(collector_url, cursor_file=cursor_file, wait_s=2.0) as feed:
        for k, group in enumerate(feed.groups(n, deadline_s=deadline_s)):
            yield Step(group, group.advantages())
            if k + 1 == groups:
                return
