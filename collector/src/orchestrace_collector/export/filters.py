"""Row filters shared by every export format: by the episode's outcome, agent or role, task, and flagged
rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

R = TypeVar("R", bound=Mapping[str, Any])


@dataclass(frozen=True)
class Filters:
    """Keep a row when it passes every given test (each list: any of its values matches)."""

    min_reward: float | None = None
    max_reward: float | None = None
    agents: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    #: Drop rows with any flag (``truncated``, ``prompt_incomplete``, ``completion_incomplete``, ``error``,
    #: ``incomplete``, ``rejected_rewards``).
    drop_flagged: bool = False

    def keep(self, row: Mapping[str, Any]) -> bool:
        # The outcome of the row's episode, never a turn's share of it (which shrinks with the turns).
        reward = row.get("episode_reward")
        if self.min_reward is not None and (reward is None or reward < self.min_reward):
            return False  # a reward filter asks for rewarded rows
        if self.max_reward is not None and (reward is None or reward > self.max_reward):
            return False
        if self.agents and row.get("agent") not in self.agents:
            return False
        if self.roles and row.get("role") not in self.roles:
            return False
        if self.tasks and row.get("task_id") not in self.tasks:
            return False
        return not (self.drop_flagged and row.get("flags"))

    def apply(self, rows: Iterable[R]) -> Iterator[R]:
        return (row for row in rows if self.keep(row))
