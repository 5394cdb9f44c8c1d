"""``--format trl``: TRL's conversational datasets.

- default: prompt-completion rows (SFT; GRPO/RLOO group by ``task_id`` and compare ``episode_reward``), one
  per turn with captured content;
- ``pairs`` (DPO): for each task, its best and its worst rollout by outcome (``episode_reward``, see
  ``orchestrace_collector.outcome``; none when they tie): each turn of the best paired with the matching turn
  of the worst, by the same agent, with the same prompt, else at the same position among that agent's turns
  (``matched_by``); a pair whose two completions are the same teaches nothing and is left out;
- ``labels`` (KTO): each turn labelled by its rollout's outcome against the mean outcome of its task's
  rollouts (each rollout counted once, whatever its length), when the task has several rewarded rollouts
  (above: True, below: False; equal to the mean: no signal, left out).

A turn's own credit (``reward``) is a share of the outcome that shrinks with the number of turns, so it never
decides a pair or a label. ``tools`` is the turn's tool definitions as JSON text, which TRL's trainers parse;
tool-call arguments are JSON text (the OpenAI wire shape). Turns without captured content give no row (an
empty prompt trains nothing). The filters pick the turns the rows are built from.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

TRL_KINDS = ("sft", "dpo", "kto")
_IDS = ("task_id", "trace_id", "agent", "role", "reward", "flags", "turn_id", "activation", "episode_reward",
        "response_model", "policy_version")
Turn = Mapping[str, Any]


def _with_content(turns: Iterable[Turn]) -> Iterator[Turn]:
    return (t for t in turns if t["prompt"] and t["completion"])


def sft_rows(turns: Iterable[Turn]) -> Iterator[dict[str, Any]]:
    for turn in _with_content(turns):
        yield {
            "prompt": turn["prompt"],
            "completion": turn["completion"],
            "tools": turn["tools"],
            **{key: turn[key] for key in _IDS},
        }


def _rollouts(turns: Iterable[Turn]) -> dict[str, dict[str, list[Turn]]]:
    """The rewarded rollouts of each task: task -> trace -> its turns with content, in start order."""
    tasks: defaultdict[str, dict[str, list[Turn]]] = defaultdict(dict)
    for turn in _with_content(turns):
        if turn["episode_reward"] is not None:
            tasks[turn["task_id"]].setdefault(turn["trace_id"], []).append(turn)
    return tasks


def _places(turns: list[Turn]) -> list[tuple[str, int]]:
    """Each turn's agent and position among that agent's turns."""
    seen: Counter[str] = Counter()
    places = []
    for turn in turns:
        places.append((turn["agent"], seen[turn["agent"]]))
        seen[turn["agent"]] += 1
    return places


def _matches(best: list[Turn], worst: list[Turn]) -> Iterator[tuple[Turn, Turn, str]]:
    """(turn of the best rollout, matching turn of the worst, how matched): the same agent with the same
    prompt, else the same agent at the same position among its turns; each turn in one pair at most."""
    at_place = dict(zip(_places(worst), worst, strict=True))
    by_prompt: defaultdict[tuple[str, str], list[Turn]] = defaultdict(list)
    for turn in worst:
        by_prompt[(turn["agent"], json.dumps(turn["prompt"]))].append(turn)
    used: set[int] = set()
    for turn, place in zip(best, _places(best), strict=True):
        same = [t for t in by_prompt[(turn["agent"], json.dumps(turn["prompt"]))] if id(t) not in used]
        placed = at_place.get(place)
        if same:
            match, how = same[0], "prompt"
        elif placed is not None and id(placed) not in used:
            match, how = placed, "position"
        else:
            continue
        used.add(id(match))
        yield turn, match, how


def dpo_rows(turns: Iterable[Turn]) -> Iterator[dict[str, Any]]:
    for rollouts in _rollouts(turns).values():
        if len(rollouts) < 2:
            continue  # pairs compare rollouts, not two calls of one rollout
        ranked = sorted(rollouts.values(), key=lambda r: r[0]["episode_reward"])
        worst, best = ranked[0], ranked[-1]
        if math.isclose(best[0]["episode_reward"], worst[0]["episode_reward"]):
            continue
        for chosen, rejected, how in _matches(best, worst):
            if chosen["completion"] == rejected["completion"]:
                continue
            yield {
                "prompt": chosen["prompt"],
                "chosen": chosen["completion"],
                "rejected": rejected["completion"],
                "tools": chosen["tools"],
                "task_id": chosen["task_id"],
                "agent": chosen["agent"],
                "role": chosen["role"],
                "chosen_reward": chosen["episode_reward"],
                "rejected_reward": rejected["episode_reward"],
                "chosen_trace_id": chosen["trace_id"],
                "rejected_trace_id": rejected["trace_id"],
                "chosen_turn_id": chosen["turn_id"],
                "rejected_turn_id": rejected["turn_id"],
                "matched_by": how,
                "chosen_response_model": chosen["response_model"],
                "rejected_response_model": rejected["response_model"],
                "chosen_policy_version": chosen["policy_version"],
                "rejected_policy_version": rejected["policy_version"],
            }


def kto_rows(turns: Iterable[Turn]) -> Iterator[dict[str, Any]]:
    for rollouts in _rollouts(turns).values():
        if len(rollouts) < 2:
            continue  # one rollout of a task is no group to compare with
        mean = statistics.fmean(r[0]["episode_reward"] for r in rollouts.values())
        for rollout in rollouts.values():
            outcome = rollout[0]["episode_reward"]
            if math.isclose(outcome, mean, abs_tol=1e-12):
                continue
            for turn in rollout:
                yield {
                    "prompt": turn["prompt"],
                    "completion": turn["completion"],
                    "label": outcome > mean,
                    "tools": turn["tools"],
                    "group_mean_reward": mean,
                    **{key: turn[key] for key in _IDS},
                }
