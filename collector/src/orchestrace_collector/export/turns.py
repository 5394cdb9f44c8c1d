"""``--format jsonl`` / ``--format parquet``: one row per turn (model call) with everything a turn has."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .source import (
    Episode,
    float_list,
    int_list,
    integer,
    json_text,
    mapping_entries,
    messages,
    number,
    text,
    turn_flags,
    turn_role,
)


def turn_row(episode: Episode, turn: Mapping[str, Any]) -> dict[str, Any]:
    truncated = turn.get("truncated")
    return {
        "task_id": str(turn.get("task_id") or episode.task_id),
        "trace_id": episode.trace_id,
        "agent": str(turn.get("agent") or ""),
        "role": turn_role(episode, turn),
        "reward": number(turn.get("reward")),
        "flags": turn_flags(episode, turn),
        "turn_id": str(turn.get("turn_id") or ""),
        "revision": integer(turn.get("revision")) or 0,
        "activation": integer(turn.get("activation")),
        "agent_id": text(turn.get("agent_id")),
        "credit": mapping_entries(turn.get("credit"), "channel", "share"),
        "episode_reward": episode.outcome(),
        "episode_rewards": episode.outcome_rewards(),
        "t": number(turn.get("t")),
        "t_end": number(turn.get("t_end")),
        "model": text(turn.get("model")),
        "provider": text(turn.get("provider")),
        "response_model": text(turn.get("response_model")),
        "policy_version": text(turn.get("policy_version")),
        "response_id": text(turn.get("response_id")),
        "finish_reason": text(turn.get("finish_reason")),
        "request": json_text(turn.get("request")),
        "input_tokens": integer(turn.get("input_tokens")),
        "output_tokens": integer(turn.get("output_tokens")),
        "cache_read_input_tokens": integer(turn.get("cache_read_input_tokens")),
        "cache_creation_input_tokens": integer(turn.get("cache_creation_input_tokens")),
        "prompt": messages(turn.get("prompt")),
        "completion": messages(turn.get("completion")),
        "tools": json_text(turn.get("tools")),
        "prompt_token_ids": int_list(turn.get("prompt_token_ids")),
        "completion_token_ids": int_list(turn.get("completion_token_ids")),
        "completion_logprobs": float_list(turn.get("completion_logprobs")),
        "input_ref": text(turn.get("input_ref")),
        "output_ref": text(turn.get("output_ref")),
        "event_ids": [str(e) for e in turn.get("event_ids") or []],
        "truncated": [{"field": str(k), "bytes": integer(v)} for k, v in sorted(truncated.items())]
        if isinstance(truncated, dict)
        else [],
        "prompt_incomplete": bool(turn.get("prompt_incomplete")),
        "completion_incomplete": bool(turn.get("completion_incomplete")),
        "error": bool(turn.get("error")),
        "error_type": text(turn.get("error_type")),
    }


def turn_rows(episodes: list[Episode]) -> Iterator[dict[str, Any]]:
    for episode in episodes:
        for turn in episode.turns:
            yield turn_row(episode, turn)
