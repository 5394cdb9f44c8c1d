"""Round trips from the examples: what ``orchestrace export`` writes, against the traces and turns the same
run wrote, after repeated conversions and a revision."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from datasets import load_dataset
from example_runs import ExampleRun
from export_fixtures import build_tokenizer
from orchestrace_collector.cli import app
from orchestrace_collector.export import DECISIONS, TOKENS, TRL, TURNS, features, template_messages
from orchestrace_collector.export.decisions import FIXED_REASONS
from orchestrace_collector.export.tokens import load_tokenizer
from orchestrace_collector.output import latest_traces, latest_turns
from typer.testing import CliRunner

EXAMPLES = ["supervisor", "swarm", "map_reduce", "hierarchical", "human_in_the_loop"]
runner = CliRunner()
pytestmark = pytest.mark.xdist_group("example_runs")


def export(*args: str) -> None:
    done = runner.invoke(app, ["export", *args])
    assert done.exit_code == 0, done.output


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def supervisor(
    tmp_path_factory: pytest.TempPathFactory, example_run: Callable[[str], ExampleRun]
) -> tuple[ExampleRun, Path]:
    """Two rollouts of the supervisor example's task, content captured, their traces copied into one
    directory, then the spans of the first converted twice more into it and annotated (a revision)."""
    first, second = example_run("supervisor-content-a"), example_run("supervisor-content-b")
    assert first.trace_dir and second.trace_dir
    out = tmp_path_factory.mktemp("supervisor") / "out"
    for source in (first.trace_dir, second.trace_dir):
        for file in source.rglob("*"):
            if file.is_file():
                target = out / file.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                if file.suffix == ".jsonl":
                    with target.open("a", encoding="utf-8") as handle:
                        handle.write(file.read_text(encoding="utf-8"))
                else:
                    target.write_bytes(file.read_bytes())
    for _ in range(2):
        done = runner.invoke(app, ["convert", str(first.trace_dir.parent / "spans.jsonl"), "--out", str(out)])
        assert done.exit_code == 0, done.output
    (trace_id,) = [t["trace_id"] for t in first.traces]
    annotation = f"annotate {out} --trace-id {trace_id} --reward 1 --family verifier --name unit_tests"
    done = runner.invoke(app, annotation.split())
    assert done.exit_code == 0, done.output
    merged = ExampleRun(
        first.stdout, first.spans + second.spans, first.traces + second.traces, first.turns + second.turns
    )
    return merged, out


def test_turns_one_row_each_from_the_latest_revision(
    supervisor: tuple[ExampleRun, Path], tmp_path: Path
) -> None:
    run, out = supervisor
    traces = latest_traces([out])
    assert len(traces) == 2 and sorted(int(t["metrics"]["revision"]) for t in traces.values()) == [0, 1]
    expected = {t["turn_id"]: t for ts in latest_turns(out, traces).values() for t in ts}
    assert len(expected) == len(run.turns) == 20
    export(str(out), "--format", "parquet", "--to", str(tmp_path / "turns.parquet"))
    export(str(out), "--format", "jsonl", "--to", str(tmp_path / "turns.jsonl"))
    table = pq.read_table(tmp_path / "turns.parquet")
    assert table.schema.equals(TURNS)
    for rows in (table.to_pylist(), jsonl(tmp_path / "turns.jsonl")):
        assert sorted(r["turn_id"] for r in rows) == sorted(expected)
        for row in rows:
            turn = expected[row["turn_id"]]
            assert row["reward"] == turn["reward"] and row["agent"] == turn["agent"]
            assert [m["content"] for m in row["prompt"]] == [m["content"] for m in turn["prompt"]]
            assert row["revision"] == int(traces[row["trace_id"]]["metrics"]["revision"])
    annotated = [r for r in table.to_pylist() if r["revision"] == 1]
    assert annotated and all(
        {"key": "verifier:unit_tests", "value": 1.0} in r["episode_rewards"] for r in annotated
    )
    # Both formats load together with datasets, whatever the order.
    both = load_dataset(
        "parquet",
        data_files=[str(tmp_path / "turns.parquet")] * 2,
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert both.num_rows == 40


def test_trl_and_groups(supervisor: tuple[ExampleRun, Path], tmp_path: Path) -> None:
    _, out = supervisor
    export(str(out), "--format", "trl", "--to", str(tmp_path / "trl.jsonl"))
    rows = list(
        load_dataset(
            "json",
            data_files=str(tmp_path / "trl.jsonl"),
            features=features(TRL),
            split="train",
            cache_dir=str(tmp_path / "cache"),
        )
    )
    assert len(rows) == 20 and {r["task_id"] for r in rows} == {"moons"}
    assert len({r["trace_id"] for r in rows}) == 2  # two rollouts in the task's group
    assert all(r["prompt"] and r["completion"][0]["role"] == "assistant" for r in rows)
    # The scripted model answers the same in both rollouts: no preference pair to make, which is an error.
    pairs = ["--format", "trl", "--pairs", "--to", str(tmp_path / "dpo.jsonl")]
    done = runner.invoke(app, ["export", str(out), *pairs])
    assert done.exit_code == 1 and "no trl rows to write from 2 traces" in done.output
    assert not (tmp_path / "dpo.jsonl").exists()


def test_tokens_rebuild_the_turns(supervisor: tuple[ExampleRun, Path], tmp_path: Path) -> None:
    _, out = supervisor
    directory = build_tokenizer(tmp_path / "tokenizer")
    tokenizer = load_tokenizer(directory)
    export(str(out), "--format", "tokens", "--tokenizer", str(directory), "--to", str(tmp_path / "t.parquet"))
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.schema.equals(TOKENS)
    turns = {t["turn_id"]: t for t in latest_turns(out, latest_traces([out])).values() for t in t}
    rows = table.to_pylist()
    assert sorted(t for r in rows for t in r["turn_ids"]) == sorted(turns)
    for row in rows:
        last = turns[row["turn_ids"][-1]]
        whole = tokenizer.apply_chat_template(
            template_messages([*row_messages(last["prompt"]), *row_messages(last["completion"])]),
            tools=last.get("tools"),  # the tools the model was offered are part of what it read
            tokenize=False,
        )
        assert tokenizer.decode(row["input_ids"]) == whole
        assert len(row["turn_ends"]) == len(row["turn_ids"])
        assert [row["token_rewards"][i] for i in row["turn_ends"]] == [
            turns[t]["reward"] or 0.0 for t in row["turn_ids"]
        ]
    researcher = [r for r in rows if r["agent"] == "researcher"]
    assert len(researcher) == 2 and all(len(r["turn_ids"]) == 2 for r in researcher)  # merged, per rollout


def row_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from orchestrace_collector.export.source import message

    return [message(m) for m in messages]


def test_decisions_one_row_per_decision_event(supervisor: tuple[ExampleRun, Path], tmp_path: Path) -> None:
    _, out = supervisor
    export(str(out), "--format", "decisions", "--to", str(tmp_path / "d.parquet"))
    table = pq.read_table(tmp_path / "d.parquet")
    assert table.schema.equals(DECISIONS)
    traces = latest_traces([out])
    events = [(t, e) for t in traces.values() for e in t["events"] if e["type"] == "orchestrator_decision"
              and e.get("reason") not in FIXED_REASONS]  # the graph's wiring chose nothing
    rows = table.to_pylist()
    assert sorted((r["trace_id"], r["decision_id"]) for r in rows) == sorted(
        (t["trace_id"], e["id"]) for t, e in events
    )
    handoffs = [r for r in rows if r["handoff"]]
    assert handoffs and all(r["turn_id"] and r["context"] for r in handoffs)  # a model call chose them
    assert {r["choice"] for r in handoffs} == {"researcher", "mathematician", "writer"}
    assert {r["decision"] for r in rows} == {"delegate", "stop"}


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_exports(
    example: str, example_run: Callable[[str], ExampleRun], tmp_path: Path
) -> None:
    run = example_run(example)
    assert run.trace_dir is not None
    out = run.trace_dir
    export(str(out), "--format", "jsonl", "--to", str(tmp_path / "t.jsonl"))
    assert sorted(r["turn_id"] for r in jsonl(tmp_path / "t.jsonl")) == sorted(
        t["turn_id"] for t in run.turns
    )
    export(str(out), "--format", "decisions", "--include-fixed", "--to", str(tmp_path / "d.jsonl"))
    n_decisions = sum(e["type"] == "orchestrator_decision" for e in run.events)
    assert len(jsonl(tmp_path / "d.jsonl")) == n_decisions > 0
    # content not captured: no empty rows, and nothing to write is an error
    done = runner.invoke(app, ["export", str(out), "--format", "trl", "--to", str(tmp_path / "trl.jsonl")])
    assert done.exit_code == 1 and "no trl rows to write" in done.output
    assert not (tmp_path / "trl.jsonl").exists()
