"""What every export format reads: the latest revision of each trace with its turns, read defensively.

Turns and traces written before a field existed lack it, so every optional field is read with a default here,
in one place, and the formats only see :class:`Episode` and the helpers below.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrace_collector.outcome import OutcomeKeyError, episode_outcome, outcome_key
from orchestrace_collector.output import latest_traces, latest_turns

#: Reward keys the credit strategy derives from the team reward (not outcomes of the episode).
_DERIVED_REWARD_PREFIXES = ("credit:", "turn:")


class ExportError(Exception):
    """A problem the user can fix (bad input, a refused merge): one clear line, no traceback."""


@dataclass
class Episode:
    """One trace (its latest revision) and its turns, in start order."""

    trace: dict[str, Any]
    turns: list[dict[str, Any]]
    roles: dict[str, str] = field(default_factory=dict)  # agent label -> role, from the trace's events
    outcome_key: str | None = None  # ``--outcome KEY``: the channel that is the outcome (None: the rule)

    @property
    def trace_id(self) -> str:
        return str(self.trace["trace_id"])

    @property
    def task_id(self) -> str:
        return str(self.trace.get("task_id") or "")

    @property
    def flags(self) -> list[str]:
        """What makes every row of this episode suspect: an incomplete trace, rejected rewards."""
        metrics = self.trace.get("metrics") or {}
        flags = []
        if _number(metrics.get("incomplete")) or any(e.get("incomplete") for e in self.events):
            flags.append("incomplete")
        if _number(metrics.get("rejected_rewards")):
            flags.append("rejected_rewards")
        return flags

    @property
    def events(self) -> list[dict[str, Any]]:
        return [e for e in self.trace.get("events") or [] if isinstance(e, dict)]

    def outcome(self) -> float | None:
        """The episode's outcome (``orchestrace_collector.outcome``), when it has one."""
        return episode_outcome(self.trace.get("rewards") or {}, self.outcome_key)

    def outcome_rewards(self) -> list[dict[str, Any]]:
        """Every recorded reward of the episode (``team``, ``verifier:...``), not the derived credit keys."""
        rewards = self.trace.get("rewards") or {}
        return [
            {"key": str(key), "value": float(value)}
            for key, value in sorted(rewards.items())
            if not str(key).startswith(_DERIVED_REWARD_PREFIXES) and _number(value) is not None
        ]


def load_episodes(paths: Sequence[Path], outcome: str | None = None) -> list[Episode]:
    """The latest revision of every trace under ``paths`` (output directories), sorted by task then trace;
    ``outcome``: the reward channel that is each episode's outcome (default: the outcome rule)."""
    missing = [str(p) for p in paths if not p.is_dir()]
    if missing:
        raise ExportError(f"not an output directory: {', '.join(missing)}")
    try:
        key = outcome_key(outcome)
    except OutcomeKeyError as exc:
        raise ExportError(str(exc)) from None
    traces = latest_traces(paths)
    turns = latest_turns(paths, traces)
    episodes = [episode_of(trace, turns.get(trace_id, []), key) for trace_id, trace in traces.items()]
    episodes.sort(key=lambda e: (e.task_id, e.trace_id))
    return episodes


def episode_of(trace: dict[str, Any], turns: Iterable[dict[str, Any]], key: str | None = None) -> Episode:
    """One trace line and the turns of its revision as an :class:`Episode` (turns in start order);
    ``key``: as :func:`~orchestrace_collector.outcome.outcome_key` returns it."""
    ordered = sorted(turns, key=lambda t: (_number(t.get("t")) or 0.0, str(t.get("turn_id"))))
    return Episode(trace, ordered, _roles(trace), key)


def _roles(trace: Mapping[str, Any]) -> dict[str, str]:
    roles: dict[str, str] = {}
    for event in trace.get("events") or []:
        if isinstance(event, dict) and event.get("role") and event.get("agent"):
            roles.setdefault(str(event["agent"]), str(event["role"]))
    return roles


def turn_flags(episode: Episode, turn: Mapping[str, Any]) -> list[str]:
    """Why a turn may be unfit to train on as it is: cut content, a partial prompt, a reply stream left before
    its end, a failed call, or its episode's flags."""
    flags = []
    if turn.get("truncated"):
        flags.append("truncated")
    if turn.get("prompt_incomplete"):
        flags.append("prompt_incomplete")
    if turn.get("completion_incomplete"):
        flags.append("completion_incomplete")
    if turn.get("error"):
        flags.append("error")
    return flags + episode.flags


def turn_role(episode: Episode, turn: Mapping[str, Any]) -> str | None:
    role = turn.get("role")
    return str(role) if role else episode.roles.get(str(turn.get("agent")))


# --- values as the fixed schemas want them -----------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def number(value: Any) -> float | None:
    return _number(value)


def integer(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def text(value: Any) -> str | None:
    return None if value is None else str(value)


def json_text(value: Any) -> str | None:
    """A free-form value (arguments, tool definitions, sampling parameters) as JSON text: its shape varies
    from row to row, which no fixed column type holds."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return list(value)


def float_list(value: Any) -> list[float] | None:
    if not isinstance(value, list) or not all(_number(v) is not None for v in value):
        return None
    return [float(v) for v in value]


def content_text(content: Any) -> str:
    """A message's content as text: a string as it is, the text parts of a list of parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


def message(raw: Any) -> dict[str, Any]:
    """One chat message with every field present: the struct is the same in every row and every file."""
    raw = raw if isinstance(raw, dict) else {"role": "", "content": raw}
    calls = raw.get("tool_calls")
    tool_calls = None
    if isinstance(calls, list) and calls:
        tool_calls = []
        for call in calls:
            call = call if isinstance(call, dict) else {}
            function = call["function"] if isinstance(call.get("function"), dict) else {}
            tool_calls.append(
                {
                    "id": text(call.get("id")),
                    "type": str(call.get("type") or "function"),
                    "function": {
                        "name": str(function.get("name") or ""),
                        # The OpenAI wire shape: arguments as JSON text, whatever their types.
                        "arguments": json_text(function.get("arguments")) or "{}",
                    },
                }
            )
    return {
        "role": str(raw.get("role") or ""),
        "content": content_text(raw.get("content")),
        "tool_calls": tool_calls,
        "tool_call_id": text(raw.get("tool_call_id")),
        "name": text(raw.get("name")),
    }


def messages(raw: Any) -> list[dict[str, Any]] | None:
    return [message(m) for m in raw] if isinstance(raw, list) else None


def mapping_entries(raw: Any, key: str, value: str) -> list[dict[str, Any]]:
    """A ``{name: number}`` mapping as a list of ``{key: name, value: number}`` (any names, one type)."""
    if not isinstance(raw, dict):
        return []
    return [{key: str(k), value: float(v)} for k, v in sorted(raw.items()) if _number(v) is not None]


def unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
