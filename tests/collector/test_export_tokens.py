"""``--format tokens``: one row per agent trajectory, masks and per-token rewards checked against the turns,
and the text rebuilt from the ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from export_fixtures import build_tokenizer, decode, encode, episode, render, write
from orchestrace_collector.cli import app
from orchestrace_collector.export import TOKENS, ExportError, export, template_messages
from orchestrace_collector.export.tokens import load_tokenizer
from typer.testing import CliRunner


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def spans(mask: list[int], value: int) -> list[tuple[int, int]]:
    """[start, end) of each run of ``value`` in ``mask``."""
    runs, start = [], None
    for i, m in enumerate([*mask, -1]):
        if m == value and start is None:
            start = i
        elif m != value and start is not None:
            runs.append((start, i))
            start = None
    return runs


def test_recorded_ids_merged_per_trajectory_never_retokenized(tmp_path: Path) -> None:
    trace, turns = episode("ta", "task-1", team=1.0, answer="The answer is 42.", token_ids=True)
    out = write(
        tmp_path / "out", (trace, turns), episode("tb", "task-1", team=0.0, answer="41", token_ids=True)
    )
    assert export([out], "tokens", tmp_path / "tokens.parquet") == 4  # planner and worker, two rollouts
    table = pq.read_table(tmp_path / "tokens.parquet")
    assert table.schema.equals(TOKENS)
    row = next(r for r in table.to_pylist() if r["trace_id"] == "ta" and r["agent"] == "worker")
    w1, w2 = turns[1], turns[2]
    assert row["uid"] == "task-1" and row["turn_ids"] == ["ta-w1", "ta-w2"] and row["segment"] == 0
    assert row["token_source"] == "recorded"
    # The last turn's recorded ids, exactly: its prompt holds the first turn's prompt and completion.
    assert row["input_ids"] == w2["prompt_token_ids"] + w2["completion_token_ids"]
    assert decode(row["input_ids"]) == render(w2["prompt"]) + "[assistant]The answer is 42.[end]"
    assert row["attention_mask"] == [1] * len(row["input_ids"])
    # What the model generated is masked in: the two completions; the prompt and the tool result are not.
    generated = [decode(row["input_ids"][a:b]) for a, b in spans(row["response_mask"], 1)]
    assert generated == ["Let me compute.[end]", "The answer is 42.[end]"]
    observed = [decode(row["input_ids"][a:b]) for a, b in spans(row["response_mask"], 0)]
    assert observed == [render(w1["prompt"]) + "[assistant]", "[tool]42[end][assistant]"]
    assert row["prompt_length"] == len(w1["prompt_token_ids"])
    # Each turn's credited reward on its last generated token, nothing elsewhere.
    ends = [b - 1 for _, b in spans(row["response_mask"], 1)]
    assert row["turn_ends"] == ends
    assert row["turn_rewards"] == pytest.approx([w1["reward"], w2["reward"]])
    assert {i: r for i, r in enumerate(row["token_rewards"]) if r} == pytest.approx(
        dict(zip(ends, [w1["reward"], w2["reward"]], strict=True))
    )
    assert row["reward"] == pytest.approx(w1["reward"] + w2["reward"])
    assert [lp for lp, m in zip(row["rollout_logprobs"], row["response_mask"], strict=True) if m] == [
        -0.5
    ] * sum(row["response_mask"])


def _not_extending(tmp_path: Path) -> Path:
    """Task-1's worker trajectory cannot be built; its planner's, and task-2's, can."""
    trace, turns = episode("ta", "task-1", team=1.0, answer="42", token_ids=True)
    # The second call's prompt was tokenized again, differently from what the model generated before.
    turns[2]["prompt_token_ids"] = encode(
        render(turns[2]["prompt"]).replace("Let me", "Let  me") + "[assistant]"
    )
    other = episode("tb", "task-2", team=0.5, answer="7", token_ids=True)
    return write(tmp_path / "out", (trace, turns), other)


def test_a_merge_whose_recorded_ids_do_not_extend_is_refused(tmp_path: Path) -> None:
    out = _not_extending(tmp_path)
    with pytest.raises(ExportError, match=r"turn ta-w2 continues .* turn ta-w1.*do not extend.*refusing"):
        export([out], "tokens", tmp_path / "tokens.jsonl", strict=True)
    done = CliRunner().invoke(
        app, ["export", str(out), "--format", "tokens", "--to", str(tmp_path / "t.jsonl"), "--strict"]
    )
    assert done.exit_code == 1 and "refusing to merge" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "t.jsonl").exists()


def test_a_trajectory_that_cannot_be_built_is_skipped_and_counted(tmp_path: Path) -> None:
    out = _not_extending(tmp_path)
    skipped: list[str] = []
    assert export([out], "tokens", tmp_path / "tokens.jsonl", skipped=skipped) == 3
    assert [(r["trace_id"], r["agent"]) for r in rows(tmp_path / "tokens.jsonl")] == [
        ("ta", "planner"), ("tb", "planner"), ("tb", "worker")]
    assert len(skipped) == 1 and "trace ta, agent 'worker'" in skipped[0]
    done = CliRunner().invoke(
        app, ["export", str(out), "--format", "tokens", "--to", str(tmp_path / "t.jsonl")], terminal_width=300
    )
    assert done.exit_code == 0 and "3 rows" in done.output and "(1 trajectories skipped)" in done.output
    assert "skipped: trace ta, agent 'worker'" in done.output
    # A task the export does not select is never built: nothing skipped, even with --strict.
    done = CliRunner().invoke(app, ["export", str(out), "--format", "tokens", "--to",
                                    str(tmp_path / "t.jsonl"), "--task", "task-2", "--strict"])
    assert done.exit_code == 0 and "2 rows" in done.output and "skipped" not in done.output, done.output


def test_a_rewritten_history_starts_a_new_row(tmp_path: Path) -> None:
    trace, turns = episode("ta", "task-1", team=1.0, answer="42", token_ids=True)
    summary = [
        {"role": "system", "content": "You work."},
        {"role": "user", "content": "Summary: compute 42."},
    ]
    turns[2]["prompt"] = summary
    turns[2]["prompt_token_ids"] = encode(render(summary) + "[assistant]")
    out = write(tmp_path / "out", (trace, turns))
    export([out], "tokens", tmp_path / "tokens.jsonl")
    worker = [r for r in rows(tmp_path / "tokens.jsonl") if r["agent"] == "worker"]
    assert [(r["segment"], r["turn_ids"]) for r in worker] == [(0, ["ta-w1"]), (1, ["ta-w2"])]
    assert decode(worker[1]["input_ids"]) == render(summary) + "[assistant]42[end]"


def test_recorded_ids_without_content_merge_by_ids(tmp_path: Path) -> None:
    trace, turns = episode("ta", "task-1", team=1.0, answer="42", token_ids=True)
    for turn in turns:
        del turn["prompt"], turn["completion"]
    out = write(tmp_path / "out", (trace, turns))
    export([out], "tokens", tmp_path / "tokens.jsonl")
    worker = next(r for r in rows(tmp_path / "tokens.jsonl") if r["agent"] == "worker")
    assert worker["turn_ids"] == ["ta-w1", "ta-w2"] and sum(worker["response_mask"]) == len(
        "Let me compute.[end]42[end]"
    )


def test_mixed_recorded_and_missing_ids_are_refused(tmp_path: Path) -> None:
    trace, turns = episode("ta", "task-1", team=1.0, answer="42", token_ids=True)
    del turns[2]["prompt_token_ids"]
    out = write(tmp_path / "out", (trace, turns))
    with pytest.raises(ExportError, match="not mixing"):
        export([out], "tokens", tmp_path / "tokens.jsonl", strict=True)
    skipped: list[str] = []
    assert export([out], "tokens", tmp_path / "tokens.jsonl", skipped=skipped) == 1  # the planner's
    assert ["not mixing" in reason for reason in skipped] == [True]


def test_tokenizer_by_path_when_no_ids_were_recorded(tmp_path: Path) -> None:
    directory = build_tokenizer(tmp_path / "tokenizer")
    tokenizer = load_tokenizer(directory)
    trace, turns = episode("ta", "task-1", team=1.0, answer="The answer is 42.")
    out = write(tmp_path / "out", (trace, turns))
    done = CliRunner().invoke(
        app,
        [
            "export",
            str(out),
            "--format",
            "tokens",
            "--to",
            str(tmp_path / "t.jsonl"),
            "--tokenizer",
            str(directory),
        ],
    )
    assert done.exit_code == 0, done.output
    by_agent = {r["agent"]: r for r in rows(tmp_path / "t.jsonl")}
    assert set(by_agent) == {"planner", "worker"}
    for agent, row in by_agent.items():
        assert row["token_source"] == "tokenizer"
        last = [t for t in turns if t["agent"] == agent][-1]
        tools = last.get("tools")
        whole = tokenizer.apply_chat_template(
            template_messages(_normalized(last["prompt"] + last["completion"])), tools=tools, tokenize=False
        )
        assert tokenizer.decode(row["input_ids"]) == whole  # the text, rebuilt from the ids
        generated = [tokenizer.decode(row["input_ids"][a:b]) for a, b in spans(row["response_mask"], 1)]
        assert [g.removesuffix("<|end|>") for g in generated] == [
            t["completion"][0]["content"] or f"<call>route {json.dumps({'to': 'worker'})}</call>"
            for t in turns
            if t["agent"] == agent
        ]
    worker = by_agent["worker"]
    observed = [tokenizer.decode(worker["input_ids"][a:b]) for a, b in spans(worker["response_mask"], 0)]
    assert observed[1] == "<|tool|>42<|end|><|assistant|>"
    assert worker["token_rewards"][worker["turn_ends"][1]] == pytest.approx(turns[2]["reward"])


def _normalized(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from orchestrace_collector.export.source import message

    return [message(m) for m in messages]
