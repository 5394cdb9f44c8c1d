"""``--format trl``: TRL's conversational datasets.

- default: prompt-completion rows (SFT; GRPO/RLOO group by ``task_id``), one per turn with captured content;
- ``pairs`` (DPO): for each prompt that several rollouts of one task gave the same agent, the completion with
  the highest turn reward as ``chosen``, the lowest as ``rejected`` (none when they tie);
- ``labels`` (KTO): each turn labelled by its reward against the mean of that agent's turns in the rollouts of
  its task, when the task has several rollouts (above: True, below: False; equal to the mean: no signal,
  left out).

``tools`` is the turn's tool definitions as JSON text, which TRL's trainers parse; tool-call arguments are
JSON text (the OpenAI wire shape). Turns without captured content give no row (an empty prompt trains
nothing). The filters pick the turns the rows are built from.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

TRL_KINDS = ("sft", "dpo", "kto")
_IDS = ("task_id", "trace_id", "agent", "role", "reward", "flags", "turn_id", "activation")


def _with_content(turns: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    return (t for t in turns if t["prompt"] and t["completion"])


def sft_rows(turns: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    for turn in _with_content(turns):
        yield {
            "prompt": turn["prompt"],
            "completion": turn["completion"],
            "tools": turn["tools"],
            **{key: turn[key] for key in _IDS},
        }


def dpo_rows(turns: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    groups: defaultdict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for turn in _with_content(turns):
        if turn["reward"] is not None:
            groups[(turn["task_id"], turn["agent"], json.dumps(turn["prompt"]))].append(turn)
    for group in groups.values():
        if len({t["trace_id"] for t in group}) < 2:
            continue  # pairs compare rollouts, not two calls of one rollout
        ranked = sorted(group, key=lambda t: t["reward"])
        worst, best = ranked[0], ranked[-1]
        if math.isclose(best["reward"], worst["reward"]) or best["completion"] == worst["completion"]:
            continue
        yield {
            "prompt": best["prompt"],
            "chosen": best["completion"],
            "rejected": worst["completion"],
            "tools": best["tools"],
            "task_id": best["task_id"],
            "agent": best["agent"],
            "role": best["role"],
            "chosen_reward": best["reward"],
            "rejected_reward": worst["reward"],
            "chosen_trace_id": best["trace_id"],
            "rejected_trace_id": worst["trace_id"],
            "chosen_turn_id": best["turn_id"],
            "rejected_turn_id": worst["turn_id"],
        }


def kto_rows(turns: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    groups: defaultdict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for turn in _with_content(turns):
        if turn["reward"] is not None:
            groups[(turn["task_id"], turn["agent"])].append(turn)
    for group in groups.values():
        if len({t["trace_id"] for t in group}) < 2:
            continue  # one rollout of a task is no group to compare with
        mean = sum(t["reward"] for t in group) / len(group)
        for turn in group:
            if math.isclose(turn["reward"], mean, abs_tol=1e-12):
                continue
            yield {
                "prompt": turn["prompt"],
                "completion": turn["completion"],
                "label": turn["reward"] > mean,
                "tools": turn["tools"],
                "group_mean_reward": mean,
                **{key: turn[key] for key in _IDS},
            }
