"""``--format trl`` checked with TRL's own data utilities and a chat template with tools, using a tokenizer
built here (nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from datasets import load_dataset
from export_fixtures import build_tokenizer, episode, write
from orchestrace_collector.export import (
    TRL,
    TRL_DPO,
    TRL_KTO,
    ExportError,
    Filters,
    export,
    features,
    template_messages,
)
from orchestrace_collector.export.tokens import load_tokenizer
from trl.data_utils import is_conversational, maybe_apply_chat_template


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_tokenizer(build_tokenizer(tmp_path_factory.mktemp("tokenizer")))


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return write(
        tmp_path / "out",
        episode("ta", "task-1", team=1.0, answer="The answer is 42."),
        episode("tb", "task-1", team=0.2, answer="It is 41."),
        episode("tc", "task-2", team=1.0, answer="42", route_args={"to": "worker", "n": 3}),
        episode("td", "task-3", team=None, answer="?", tool_calls=False),
    )


def load(path: Path, schema: Any) -> list[dict[str, Any]]:
    data = load_dataset(
        "json",
        data_files=str(path),
        features=features(schema),
        split="train",
        cache_dir=str(path.parent / "cache"),
    )
    return list(data)


def tools_of(row: dict[str, Any]) -> Any:
    return json.loads(row["tools"]) if row["tools"] else None


def test_prompt_completion_rows_render_with_trl(out: Path, tokenizer: Any) -> None:
    assert export([out], "trl", out.parent / "trl.jsonl") == 12
    rows = load(out.parent / "trl.jsonl", TRL)
    assert {r["task_id"] for r in rows} == {"task-1", "task-2", "task-3"}  # the group key of GRPO/RLOO
    for row in rows:
        assert is_conversational(row)
        example = {"prompt": row["prompt"], "completion": row["completion"]}
        rendered = maybe_apply_chat_template(example, tokenizer, tools=tools_of(row))
        whole = tokenizer.apply_chat_template(
            template_messages(row["prompt"] + row["completion"]), tools=tools_of(row), tokenize=False
        )
        assert rendered["prompt"] + rendered["completion"] == whole
        assert rendered["prompt"].endswith("<|assistant|>")
    planner = next(r for r in rows if r["turn_id"] == "tc-p")
    rendered = maybe_apply_chat_template(
        {"prompt": planner["prompt"], "completion": planner["completion"]}, tokenizer, tools=tools_of(planner)
    )
    assert rendered["prompt"].startswith(
        '<|system|>tools: [{"type": "function", "function": {"name": "route"'
    )
    assert rendered["completion"] == '<call>route {"to": "worker", "n": 3}</call><|end|>'
    assert next(r for r in rows if r["turn_id"] == "ta-w2")["reward"] == pytest.approx(0.3)


def test_turns_without_content_give_no_row(tmp_path: Path) -> None:
    trace, turns = episode("ta", "task-1", team=1.0, answer="42")
    for turn in turns[1:]:
        del turn["prompt"], turn["completion"]
    out = write(tmp_path / "out", (trace, turns))
    assert export([out], "trl", tmp_path / "trl.jsonl") == 1


def test_dpo_pairs_from_rollouts_of_one_task(out: Path, tokenizer: Any) -> None:
    assert export([out], "trl", out.parent / "dpo.parquet", trl_kind="dpo") == 1
    (pair,) = load_dataset("parquet", data_files=str(out.parent / "dpo.parquet"), split="train")
    assert set(TRL_DPO.names) == set(pair)
    # The worker's last call saw the same prompt in both rollouts of task-1; the better rollout's answer wins.
    assert (pair["task_id"], pair["agent"]) == ("task-1", "worker")
    assert (
        pair["chosen"][0]["content"] == "The answer is 42." and pair["rejected"][0]["content"] == "It is 41."
    )
    assert (pair["chosen_trace_id"], pair["rejected_trace_id"]) == ("ta", "tb")
    # The rollouts' outcomes; the pair of the other turns (same completions in both) teaches nothing.
    assert (pair["chosen_reward"], pair["rejected_reward"], pair["matched_by"]) == (1.0, 0.2, "prompt")
    assert is_conversational(pair)
    example = {k: pair[k] for k in ("prompt", "chosen", "rejected")}
    rendered = maybe_apply_chat_template(example, tokenizer)
    assert rendered["chosen"] == "<|assistant|>The answer is 42.<|end|>".removeprefix("<|assistant|>")
    assert rendered["rejected"] == "It is 41.<|end|>"
    # The filters pick the turns pairs are made of: no worker turns, no pairs.
    with pytest.raises(ExportError, match="no trl rows to write"):  # nothing to write is an error
        export([out], "trl", out.parent / "none.jsonl", trl_kind="dpo", filters=Filters(agents=("planner",)))
    assert not (out.parent / "none.jsonl").exists()


def test_kto_labels_against_the_task_group(out: Path, tokenizer: Any) -> None:
    export([out], "trl", out.parent / "kto.jsonl", trl_kind="kto")
    rows = load(out.parent / "kto.jsonl", TRL_KTO)
    labels = {r["turn_id"]: r["label"] for r in rows}
    # task-1's rollouts: outcomes 1.0 (ta) and 0.2 (tb), mean 0.6: every turn of ta above, of tb below.
    assert labels == {
        "ta-w1": True,
        "ta-w2": True,
        "tb-w1": False,
        "tb-w2": False,
        "ta-p": True,
        "tb-p": False,
    }
    for row in rows:
        assert is_conversational(row)
        example = {k: row[k] for k in ("prompt", "completion", "label")}
        assert maybe_apply_chat_template(example, tokenizer, tools=tools_of(row))["label"] is row["label"]
