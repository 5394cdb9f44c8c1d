"""The live feed's Python client: episodes as the collector writes them, or groups of rollouts of a task.

    from orchestrace_collector.feed import Feed

    feed = Feed("http://127.0.0.1:4318", cursor_file="trainer.cursor")
    for group in feed.groups(n=8, deadline_s=600):
        advantages = group.advantages()       # outcome minus the group's mean outcome, per rollout
        train(group.episodes, advantages)     # episode.rows: the export rows (format="turns" by default)

A consumer's progress is kept in ``cursor_file`` (JSON, replaced atomically): an episode or group counts as
consumed when the consumer asks for the next one, so after a restart (of the consumer or of the collector) it
gets what it had not finished, and nothing it had. Without ``cursor_file`` it starts from the beginning.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from orchestrace_collector.outcome import episode_outcome, outcome_key

EpisodeKey = tuple[str, int]  # (trace id, revision)


@dataclass(frozen=True)
class FeedEpisode:
    """One written revision of an episode, as ``GET /v1/episodes`` returns it."""

    cursor: str
    trace_id: str
    task_id: str
    revision: int
    update: bool  # a later revision of an episode delivered before (a late reward, a late span)
    rewards: dict[str, Any]
    flags: list[str]
    rows: list[dict[str, Any]]
    skipped: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> FeedEpisode:
        return cls(
            cursor=str(obj["cursor"]),
            trace_id=str(obj["trace_id"]),
            task_id=str(obj.get("task_id") or ""),
            revision=int(obj.get("revision") or 0),
            update=bool(obj.get("update")),
            rewards=dict(obj.get("rewards") or {}),
            flags=list(obj.get("flags") or []),
            rows=list(obj.get("rows") or []),
            skipped=list(obj.get("skipped") or []),
        )

    @property
    def key(self) -> EpisodeKey:
        return self.trace_id, self.revision

    def outcome(self, key: str | None = None) -> float | None:
        """The episode's outcome (``orchestrace_collector.outcome``); ``key``: that channel instead."""
        return episode_outcome(self.rewards, outcome_key(key))


@dataclass(frozen=True)
class Group:
    """Rollouts of one task: ``n`` of them, or fewer when the deadline passed first (``partial``). A later
    revision of a rollout whose group was already delivered comes alone, with ``update`` set."""

    task_id: str
    episodes: list[FeedEpisode]
    partial: bool = False
    update: bool = False

    def advantages(self, key: str | None = None, *, normalize: bool = False) -> list[float | None]:
        """Group-relative advantages: each rollout's outcome minus the mean outcome of the group's rewarded
        rollouts (divided by their standard deviation, ``normalize``); None for a rollout with no outcome."""
        outcomes = [e.outcome(key) for e in self.episodes]
        known = [o for o in outcomes if o is not None]
        if not known:
            return [None] * len(outcomes)
        mean = statistics.fmean(known)
        scale = statistics.pstdev(known) if normalize and len(known) > 1 else 0.0
        return [None if o is None else (o - mean) / (scale if scale > 0 else 1.0) for o in outcomes]


@dataclass
class _Progress:
    """What ``cursor_file`` holds: every entry up to ``cursor`` consumed, and those after it that were."""

    cursor: str = ""
    consumed: set[EpisodeKey] = field(default_factory=set)

    @classmethod
    def read(cls, path: Path | None) -> _Progress:
        if path is None or not path.exists():
            return cls()
        obj = json.loads(path.read_text(encoding="utf-8"))
        return cls(str(obj.get("cursor") or ""), {(str(t), int(r)) for t, r in obj.get("consumed") or []})

    def write(self, path: Path | None) -> None:
        if path is None:
            return
        tmp = path.with_name(path.name + ".tmp")
        state = {"cursor": self.cursor, "consumed": sorted(self.consumed)}
        tmp.write_text(json.dumps(state), encoding="utf-8")
        os.replace(tmp, path)  # a crash leaves the old progress or the new, never half of one


class Feed:
    """A consumer of ``GET /v1/episodes`` on the collector at ``url`` (its HTTP base URL)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        format: str = "turns",
        cursor_file: str | Path | None = None,
        wait_s: float = 10.0,
        limit: int = 100,
        outcome: str | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/") + "/v1/episodes"
        self.format = format
        self.cursor_file = Path(cursor_file) if cursor_file is not None else None
        self.wait_s = wait_s
        self.limit = limit
        self.outcome = outcome
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = client or httpx.Client(headers=headers, timeout=httpx.Timeout(wait_s + 30.0))

    def fetch(self, after: str, wait_s: float) -> tuple[str, list[FeedEpisode]]:
        """One request: the episodes after ``after`` (waiting up to ``wait_s`` for one), the next cursor."""
        params: dict[str, str | float | int] = {"after": after, "wait": wait_s, "format": self.format,
                                                "limit": self.limit}
        if self.outcome is not None:
            params["outcome"] = self.outcome
        response = self._client.get(self.url, params=params)
        response.raise_for_status()
        body = response.json()
        return str(body["cursor"]), [FeedEpisode.from_json(e) for e in body["episodes"]]

    def episodes(self, *, follow: bool = True) -> Iterator[FeedEpisode]:
        """Every written revision of every episode, in write order, the consumed ones left out. ``follow``
        False: stop at the end of what is written now."""
        progress = _Progress.read(self.cursor_file)
        for episode in self._stream(progress.cursor, follow, lambda: self.wait_s):
            if episode.key in progress.consumed:
                continue
            yield episode
            progress.cursor = episode.cursor  # consumed: the consumer asked for the next one
            progress.consumed.clear()
            progress.write(self.cursor_file)

    def groups(self, n: int, *, deadline_s: float | None = None, follow: bool = True) -> Iterator[Group]:
        """Groups of ``n`` rollouts of a task (distinct traces) as they complete; a task whose first rollout
        arrived ``deadline_s`` ago comes with what it has (``partial``). ``follow`` False: stop at the end
        of what is written now, the incomplete groups delivered as partial."""
        if n < 1:
            raise ValueError("n must be at least 1")
        progress = _Progress.read(self.cursor_file)
        log: list[tuple[str, EpisodeKey]] = []  # entries since progress.cursor, in order
        done: set[EpisodeKey] = set(progress.consumed)
        pending: dict[str, dict[str, FeedEpisode]] = {}  # task -> trace id -> its latest revision
        # The earlier revisions of a pending rollout: consumed with the revision that replaced them, so that
        # a restart never finds one consumed while its rollout was not delivered.
        superseded: dict[str, list[EpisodeKey]] = {}
        started: dict[str, float] = {}

        def commit(group: Group) -> None:
            for e in group.episodes:
                done.add(e.key)
                done.update(superseded.pop(e.trace_id, ()))
            while log and log[0][1] in done:
                progress.cursor, key = log.pop(0)
                done.discard(key)
            progress.consumed = {key for _, key in log if key in done}
            progress.write(self.cursor_file)

        def wait() -> float:
            if deadline_s is None or not started:
                return self.wait_s
            return max(0.0, min(self.wait_s, min(started.values()) + deadline_s - time.monotonic()))

        def expired() -> Iterator[Group]:
            now = time.monotonic()
            for task in [t for t, s in started.items() if deadline_s is not None and now - s >= deadline_s]:
                yield self._close(task, pending, started, partial=True)

        for episode in self._stream(progress.cursor, follow, wait, idle=True):
            if episode is None:
                for group in expired():
                    yield group
                    commit(group)
                continue
            if episode.key in done:
                continue
            log.append((episode.cursor, episode.key))
            if episode.update and episode.trace_id not in pending.get(episode.task_id, {}):
                # An earlier revision was listed before and is not waiting in a group: its group was
                # delivered (in this run, or before a restart: it lies before the cursor or was consumed).
                group = Group(episode.task_id, [episode], update=True)
                yield group
                commit(group)
                continue
            rollouts = pending.setdefault(episode.task_id, {})
            previous = rollouts.get(episode.trace_id)
            if previous is not None:
                superseded.setdefault(episode.trace_id, []).append(previous.key)
            rollouts[episode.trace_id] = episode
            started.setdefault(episode.task_id, time.monotonic())
            if len(rollouts) >= n:
                group = self._close(episode.task_id, pending, started, partial=False)
                yield group
                commit(group)
            for group in expired():
                yield group
                commit(group)
        for task in list(pending):
            group = self._close(task, pending, started, partial=True)
            yield group
            commit(group)

    @staticmethod
    def _close(task: str, pending: dict[str, dict[str, FeedEpisode]], started: dict[str, float], *,
               partial: bool) -> Group:
        rollouts = pending.pop(task, {})
        started.pop(task, None)
        return Group(task, list(rollouts.values()), partial=partial)

    def _stream(self, after: str, follow: bool, wait: Any, *, idle: bool = False) -> Iterator[Any]:
        """Episodes after ``after`` as the feed returns them; ``idle``: also None after an empty answer."""
        cursor = after
        while True:
            cursor, found = self.fetch(cursor, wait() if follow else 0.0)
            yield from found
            if not found:
                if not follow:
                    return
                if idle:
                    yield None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Feed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
