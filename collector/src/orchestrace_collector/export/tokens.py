"""``--format tokens``: one row per agent trajectory, as token-level multi-turn RL trainers take it.

A trajectory is one agent instance's turns in one episode (``trace_id``, ``agent``, ``activation``), in start
order. A turn whose prompt extends the previous turn's prompt and completion is merged into the same row: the
tokens its prompt adds (tool results, other agents' messages: observations) get ``response_mask`` 0, its
completion's tokens 1. A turn whose prompt does not extend the previous one (a rewritten history) starts a
new row of the trajectory (``segment`` counts them). ``token_rewards`` holds each turn's credited reward on
the last token of its completion, 0 elsewhere; ``uid`` is the task (the group of group-relative methods).
``turn_response_models`` / ``turn_policy_versions``: the policy of each turn (parallel to ``turn_ids``; the
weights may change between two turns of one trajectory in an asynchronous loop).

Token ids: the recorded ones (``prompt_token_ids``, ``completion_token_ids``: what the model saw and
generated) when every turn of the trajectory has them, and then nothing is tokenized again; a merge whose
recorded prompt ids do not start with the previous turn's ids is refused, since training on them would train
on tokens the model never produced. Otherwise a tokenizer given by path renders the messages with its chat
template.

A trajectory that cannot be built so (ids that do not extend, ids on some turns only, no ids and no
tokenizer) gives no row: it is skipped and reported (``skipped``), and the others are written; ``strict``
makes it an error instead.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .source import ExportError, unique


def load_tokenizer(path: Path) -> Any:
    """A Hugging Face tokenizer saved at ``path`` (``save_pretrained``), with a chat template; never
    downloaded."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ExportError(
            "--tokenizer needs transformers: pip install 'orchestrace-collector[export]'"
        ) from None
    if not path.exists():
        raise ExportError(f"no such tokenizer: {path}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot load the tokenizer at {path}: {exc}") from None
    if not getattr(tokenizer, "chat_template", None):
        raise ExportError(f"the tokenizer at {path} has no chat template")
    return tokenizer


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as chat templates iterate them: tool-call arguments as objects (they are JSON text in the
    rows), and no empty fields."""
    out = []
    for message in messages:
        item: dict[str, Any] = {k: v for k, v in message.items() if v is not None and k != "tool_calls"}
        if message.get("tool_calls"):
            item["tool_calls"] = [
                {
                    **call,
                    "function": {**call["function"], "arguments": _arguments(call["function"]["arguments"])},
                }
                for call in message["tool_calls"]
            ]
        out.append(item)
    return out


def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@dataclass
class _Row:
    turn_ids: list[str] = field(default_factory=list)
    input_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    token_rewards: list[float] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    turn_rewards: list[float | None] = field(default_factory=list)
    turn_response_models: list[str | None] = field(default_factory=list)
    turn_policy_versions: list[str | None] = field(default_factory=list)
    prompt_length: int = 0
    flags: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] | None = None  # prompt + completion of the last turn
    text: str = ""  # rendered prompt + completion so far (tokenizer path)

    def add(self, observation: list[int], completion: list[int], turn: Mapping[str, Any]) -> None:
        if not self.turn_ids:
            self.prompt_length = len(observation)
        self.turn_ids.append(turn["turn_id"])
        self.input_ids += observation + completion
        self.response_mask += [0] * len(observation) + [1] * len(completion)
        self.token_rewards += [0.0] * (len(observation) + len(completion))
        logprobs = turn.get("completion_logprobs")
        if self.logprobs is not None and logprobs is not None and len(logprobs) == len(completion):
            self.logprobs += [0.0] * len(observation) + list(logprobs)
        else:
            self.logprobs = None
        reward = turn["reward"]
        if self.input_ids:
            self.token_rewards[-1] += reward or 0.0
        self.turn_ends.append(len(self.input_ids) - 1)
        self.turn_rewards.append(reward)
        self.turn_response_models.append(turn.get("response_model"))
        self.turn_policy_versions.append(turn.get("policy_version"))
        self.flags = unique([*self.flags, *turn["flags"]])
        complete = turn["prompt"] is not None and turn["completion"] is not None
        self.messages = turn["prompt"] + turn["completion"] if complete else None


def trajectories(turns: Iterable[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    groups: defaultdict[tuple[str, str, int | None], list[Mapping[str, Any]]] = defaultdict(list)
    for turn in turns:
        groups[(turn["trace_id"], turn["agent"], turn["activation"])].append(turn)
    return list(groups.values())  # turns arrive in start order within each trace


def token_rows(turns: Iterable[Mapping[str, Any]], tokenizer: Any | None = None, *, strict: bool = False,
               skipped: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Rows of every trajectory; one that cannot be built raises ExportError when ``strict``, else is left
    out and its reason appended to ``skipped``."""
    for trajectory in trajectories(turns):
        first = trajectory[0]
        where = f"trace {first['trace_id']}, agent {first['agent']!r}"
        try:
            rows, source = _build(trajectory, tokenizer, where)
        except ExportError as exc:
            if strict:
                raise
            if skipped is not None:
                skipped.append(str(exc))
            continue
        for segment, row in enumerate(rows):
            rewards = [r for r in row.turn_rewards if r is not None]
            yield {
                "uid": first["task_id"],
                "task_id": first["task_id"],
                "trace_id": first["trace_id"],
                "agent": first["agent"],
                "role": first["role"],
                "reward": sum(rewards) if rewards else None,
                "flags": row.flags,
                "activation": first["activation"],
                "segment": segment,
                "turn_ids": row.turn_ids,
                "input_ids": row.input_ids,
                "attention_mask": [1] * len(row.input_ids),
                "response_mask": row.response_mask,
                "token_rewards": row.token_rewards,
                "rollout_logprobs": row.logprobs,
                "prompt_length": row.prompt_length,
                "turn_ends": row.turn_ends,
                "turn_rewards": [r or 0.0 for r in row.turn_rewards],
                "token_source": source,
                "turn_response_models": row.turn_response_models,
                "turn_policy_versions": row.turn_policy_versions,
                "episode_reward": first["episode_reward"],
            }


def _build(trajectory: list[Mapping[str, Any]], tokenizer: Any | None, where: str) -> tuple[list[_Row], str]:
    with_ids = [
        t["prompt_token_ids"] is not None and t["completion_token_ids"] is not None for t in trajectory
    ]
    if all(with_ids):
        return _recorded(trajectory, where), "recorded"
    if any(with_ids):
        raise ExportError(f"{where}: some turns have recorded token ids and others not; not mixing them")
    if tokenizer is None:
        raise ExportError(f"{where}: no recorded token ids; give --tokenizer DIR to tokenize the messages")
    return _tokenized(trajectory, tokenizer), "tokenizer"


def _extends(messages: list[dict[str, Any]] | None, prompt: list[dict[str, Any]] | None) -> bool | None:
    """Whether ``prompt`` starts with ``messages`` (None: unknown, content not captured)."""
    if messages is None or prompt is None:
        return None
    return prompt[: len(messages)] == messages


def _recorded(trajectory: list[Mapping[str, Any]], where: str) -> list[_Row]:
    rows = [_Row()]
    for turn in trajectory:
        prompt_ids, completion_ids = turn["prompt_token_ids"], turn["completion_token_ids"]
        row = rows[-1]
        if row.turn_ids:
            ids_extend = prompt_ids[: len(row.input_ids)] == row.input_ids
            messages_extend = _extends(row.messages, turn["prompt"])
            if messages_extend and not ids_extend:
                at = next(
                    (i for i, (a, b) in enumerate(zip(row.input_ids, prompt_ids, strict=False)) if a != b),
                    min(len(row.input_ids), len(prompt_ids)),
                )
                raise ExportError(
                    f"{where}: turn {turn['turn_id']} continues the conversation of turn {row.turn_ids[-1]}, "
                    f"but its recorded prompt token ids do not extend that turn's prompt + completion ids "
                    f"(first difference at token {at} of {len(row.input_ids)}); refusing to merge them"
                )
            if not (ids_extend if messages_extend is None else messages_extend):
                row = _Row()
                rows.append(row)
        observation = prompt_ids[len(row.input_ids) :] if row.turn_ids else list(prompt_ids)
        row.add(list(observation), list(completion_ids), turn)
    return rows


def _tokenized(trajectory: list[Mapping[str, Any]], tokenizer: Any) -> list[_Row]:
    rows = [_Row()]
    for turn in trajectory:
        if not turn["prompt"] or not turn["completion"]:
            continue  # nothing to tokenize: the content was not captured
        tools = json.loads(turn["tools"]) if turn["tools"] else None
        prompt = template_messages(turn["prompt"])
        prompt_text = tokenizer.apply_chat_template(
            prompt, tools=tools or None, tokenize=False, add_generation_prompt=True
        )
        full_text = tokenizer.apply_chat_template(
            prompt + template_messages(turn["completion"]), tools=tools or None, tokenize=False
        )
        # Some templates render a generation prompt that the full conversation does not repeat as it is.
        cut = next(
            (i for i, (a, b) in enumerate(zip(prompt_text, full_text, strict=False)) if a != b),
            min(len(prompt_text), len(full_text)),
        )
        row = rows[-1]
        merges = _extends(row.messages, turn["prompt"]) and prompt_text.startswith(row.text)
        if row.turn_ids and not (merges and cut >= len(row.text)):
            row = _Row()
            rows.append(row)
        observation = prompt_text[len(row.text) : cut]
        row.add(_encode(tokenizer, observation), _encode(tokenizer, full_text[cut:]), turn)
        row.text = full_text
    return [row for row in rows if row.turn_ids]


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []
