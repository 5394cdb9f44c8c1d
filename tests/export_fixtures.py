"""Hand-built output directories for the export tests, and a tokenizer built here (nothing downloaded).

Each episode is one rollout of a task: a ``planner`` model call whose completion delegates to a ``worker``
(tool call ``route``), then two ``worker`` model calls, the second continuing the first's conversation after a
tool result. Everything the turns carry is known by construction, so the exported rows can be checked exactly.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from orchestrace_collector.output import TraceDirWriter
from orchestrace_collector.validate import validate_trace

# --- recorded token ids: one id per character, so ids decode back to text exactly --------------------------


def render(messages: list[dict[str, Any]]) -> str:
    """The "chat template" the recorded ids follow: ``[role]content[end]`` per message."""
    return "".join(f"[{m['role']}]{m.get('content') or ''}[end]" for m in messages)


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def decode(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def recorded_ids(prompt: list[dict[str, Any]], completion: list[dict[str, Any]]) -> dict[str, Any]:
    completion_text = "".join(f"{m.get('content') or ''}[end]" for m in completion)
    return {
        "prompt_token_ids": encode(render(prompt) + "[assistant]"),
        "completion_token_ids": encode(completion_text),
        "completion_logprobs": [-0.5] * len(completion_text),
    }


# --- episodes ---------------------------------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "route",
            "description": "Hand the task to an agent.",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
        },
    }
]


def episode(
    trace_id: str,
    task_id: str,
    *,
    team: float | None,
    answer: str,
    route_args: dict[str, Any] | None = None,
    token_ids: bool = False,
    tool_calls: bool = True,
    metrics: dict[str, float] | None = None,
    worker_extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One valid trace (as written, revision 0) and its three turns."""
    question = {"role": "user", "content": f"Solve {task_id}."}
    system = {"role": "system", "content": "You plan."}
    planner_completion: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": "" if tool_calls else "worker, please",
            **(
                {
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": "route", "arguments": route_args or {"to": "worker"}},
                        }
                    ]
                }
                if tool_calls
                else {}
            ),
        }
    ]
    w_prompt1 = [{"role": "system", "content": "You work."}, question]
    w_completion1 = [{"role": "assistant", "content": "Let me compute."}]
    w_prompt2 = [*w_prompt1, *w_completion1, {"role": "tool", "content": "42", "tool_call_id": "call_1"}]
    w_completion2 = [{"role": "assistant", "content": answer}]
    events: list[dict[str, Any]] = [
        {"id": "e1", "t": 0.0, "type": "spawn", "agent": "root", "to": "planner", "role": "orchestrator"},
        {
            "id": "e2",
            "t": 0.1,
            "type": "orchestrator_decision",
            "agent": "planner",
            "to": "worker",
            "decision": "delegate",
            "options": ["worker", "critic"],
            "content_ref": "sha256:" + "a" * 64,
        },
        {"id": "e3", "t": 0.1, "type": "spawn", "agent": "planner", "to": "worker", "role": "orchestrator"},
        {
            "id": "e4",
            "t": 0.2,
            "type": "tool_call",
            "agent": "worker",
            "tool": "calc",
            "role": "executor",
            "content_ref": "sha256:" + "b" * 64,
        },
        {"id": "e5", "t": 0.3, "type": "tool_result", "agent": "calc", "tool": "calc"},
        {"id": "e6", "t": 0.4, "type": "return", "agent": "worker", "from": "worker", "to": "planner"},
        {"id": "e7", "t": 0.5, "type": "orchestrator_decision", "agent": "planner", "decision": "stop"},
    ]
    credit = {"e1": 0.0, "e2": 0.2, "e3": 0.1, "e4": 0.2, "e5": 0.1, "e6": 0.3, "e7": 0.1}
    for event in events:
        if team is not None:
            event["credit"] = credit[event["id"]] * team
    trace = {
        "trace_id": trace_id,
        "task_id": task_id,
        "topology": "centralized",
        "events": events,
        "edges": [
            {"src": "e1", "dst": "e2", "type": "temporal"},
            {"src": "e2", "dst": "e3", "type": "causal"},
        ],
        "rewards": {"team": team} if team is not None else {},
        "costs": {"tokens": 100.0, "wall_clock_s": 0.5},
        "metrics": {"incomplete": 0.0, "revision": 0.0, **(metrics or {})},
    }
    assert validate_trace(trace) == []

    def reward(*event_ids: str) -> float | None:
        return None if team is None else sum(credit[e] * team for e in event_ids)

    turns = [
        {
            "turn_id": f"{trace_id}-p",
            "agent": "planner",
            "activation": 1,
            "t": 0.05,
            "t_end": 0.1,
            "event_ids": ["e2", "e3"],
            "reward": reward("e2", "e3"),
            "prompt": [system, question],
            "completion": planner_completion,
            "tools": TOOLS,
            "credit": None if team is None else {"team": reward("e2", "e3")},
            **(recorded_ids([system, question], planner_completion) if token_ids else {}),
        },
        {
            "turn_id": f"{trace_id}-w1",
            "agent": "worker",
            "activation": 1,
            "t": 0.15,
            "t_end": 0.2,
            "event_ids": ["e4"],
            "reward": reward("e4"),
            "prompt": w_prompt1,
            "completion": w_completion1,
            **(recorded_ids(w_prompt1, w_completion1) if token_ids else {}),
        },
        {
            "turn_id": f"{trace_id}-w2",
            "agent": "worker",
            "activation": 1,
            "t": 0.35,
            "t_end": 0.4,
            "event_ids": ["e6"],
            "reward": reward("e6"),
            "prompt": w_prompt2,
            "completion": w_completion2,
            **(recorded_ids(w_prompt2, w_completion2) if token_ids else {}),
            **(worker_extra or {}),
        },
    ]
    for turn in turns:
        turn.update(trace_id=trace_id, task_id=task_id, model="m", provider="fake")
    return trace, turns


def write(out: Path, *episodes: tuple[dict[str, Any], list[dict[str, Any]]], revision: int = 0) -> Path:
    """Append ``episodes`` to the output directory ``out`` at ``revision``."""
    writer = TraceDirWriter(out)
    for trace, turns in episodes:
        trace = copy.deepcopy(trace)
        trace["metrics"]["revision"] = float(revision)
        assert validate_trace(trace) == []
        writer.write_dicts(trace, turns)
    writer.close()
    return out


# --- a tokenizer with a chat template that renders tools and tool calls ------------------------------------

CHAT_TEMPLATE = (
    "{%- if tools %}<|system|>tools: {{ tools | tojson }}<|end|>\n{% endif -%}"
    "{%- for m in messages -%}"
    "<|{{ m.role }}|>{{ m.content }}"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %}<call>{{ c.function.name }} "
    # Arguments as the OpenAI wire shape (JSON text) or as an object, as current templates take both.
    "{% if c.function.arguments is string %}{{ c.function.arguments }}"
    "{%- else %}{{ c.function.arguments | tojson }}{% endif %}</call>{% endfor %}{% endif -%}"
    "<|end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif -%}"
)
SPECIAL = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>", "<call>", "</call>"]


def build_tokenizer(directory: Path) -> Path:
    """A byte-level BPE tokenizer trained here on a few sentences, saved with the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = ["You plan. You work. Solve the task. Let me compute. The answer is 42.", "route worker tools"]
    tokenizer.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|end|>", chat_template=CHAT_TEMPLATE
    )
    fast.save_pretrained(str(directory))
    return directory
