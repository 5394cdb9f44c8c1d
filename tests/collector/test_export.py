"""``orchestrace export``: one row per unit from the latest revision, a schema that lets files of any runs
load together, filters, and the orchestrator decisions, on hand-built output directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import yaml
from datasets import load_dataset
from export_fixtures import episode, write
from orchestrace_collector.annotate import annotate
from orchestrace_collector.cli import app
from orchestrace_collector.export import DECISIONS, TURNS, ExportError, Filters, export, features
from orchestrace_collector.output import latest_traces, latest_turns
from orchestrace_collector.validate import validate_trace
from typer.testing import CliRunner

runner = CliRunner()


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_one_row_per_turn_whatever_the_revisions_and_repeated_conversions(tmp_path: Path) -> None:
    out = tmp_path / "out"
    a, b = episode("ta", "task-1", team=1.0, answer="42"), episode("tb", "task-1", team=0.0, answer="41")
    write(out, a, b)
    write(out, a, b)  # the same conversion run again into the same directory
    annotate(out, reward=0.5, family="team", trace_id="ta", validate=validate_trace)  # revision 1 of ta
    annotate(out, reward=0.25, family="team", trace_id="ta", validate=validate_trace)  # revision 2 of ta
    raw_turn_lines = sum(1 for f in out.glob("turns-*.jsonl") for _ in f.open())
    assert raw_turn_lines == 3 * 2 * 2 + 3 * 2  # every revision and repetition is still on disk

    traces = latest_traces([out])
    turns = latest_turns(out, traces)
    assert {k: len(v) for k, v in turns.items()} == {"ta": 3, "tb": 3}
    assert traces["ta"]["metrics"]["revision"] == 2

    n = export([out], "jsonl", tmp_path / "turns.jsonl")
    exported = rows(tmp_path / "turns.jsonl")
    assert n == len(exported) == 6
    assert len({r["turn_id"] for r in exported}) == 6
    by_id = {r["turn_id"]: r for r in exported}
    assert by_id["ta-p"]["revision"] == 2 and by_id["tb-p"]["revision"] == 0
    assert by_id["ta-p"]["episode_reward"] == 0.25  # the last annotation's team reward, counted once
    assert by_id["ta-p"]["episode_rewards"] == [{"key": "team", "value": 0.25}]


def test_several_output_directories_one_row_per_turn(tmp_path: Path) -> None:
    """One directory per collector; the same trace in both (a late revision on the other machine)."""
    a, b = episode("ta", "task-1", team=1.0, answer="42"), episode("tb", "task-2", team=0.0, answer="41")
    write(tmp_path / "c1", a, b)
    revised = (json.loads(json.dumps(a[0])), a[1])
    revised[0]["rewards"] = {"team": 0.5}
    write(tmp_path / "c2", revised, revision=1)
    export([tmp_path / "c1", tmp_path / "c2"], "jsonl", tmp_path / "all.jsonl")
    exported = rows(tmp_path / "all.jsonl")
    assert sorted(r["turn_id"] for r in exported) == ["ta-p", "ta-w1", "ta-w2", "tb-p", "tb-w1", "tb-w2"]
    assert {r["episode_reward"] for r in exported if r["trace_id"] == "ta"} == {0.5}


def test_every_turn_field_is_exported(tmp_path: Path) -> None:
    extra = {
        "t_end": 0.4,
        "truncated": {"completion": 120},
        "request": {"temperature": 0.7, "stop": ["x"]},
        "response_id": "resp-1",
        "response_model": "m-2024",
        "finish_reason": "stop",
        "agent_id": "w-1",
        "credit": {"team": 0.3, "verifier:unit_tests": 0.1},
    }
    write(
        tmp_path / "out", episode("ta", "task-1", team=1.0, answer="42", token_ids=True, worker_extra=extra)
    )
    export([tmp_path / "out"], "parquet", tmp_path / "turns.parquet")
    table = pq.read_table(tmp_path / "turns.parquet")
    assert table.schema.equals(TURNS)
    row = {r["turn_id"]: r for r in table.to_pylist()}["ta-w2"]
    assert row["credit"] == [
        {"channel": "team", "share": 0.3},
        {"channel": "verifier:unit_tests", "share": 0.1},
    ]
    assert row["truncated"] == [{"field": "completion", "bytes": 120}] and row["flags"] == ["truncated"]
    assert json.loads(row["request"]) == {"temperature": 0.7, "stop": ["x"]}
    assert (row["response_id"], row["response_model"], row["finish_reason"]) == ("resp-1", "m-2024", "stop")
    assert row["activation"] == 1 and row["agent_id"] == "w-1" and row["t_end"] == 0.4
    assert row["role"] == "executor"  # the agent's role, from the trace's events
    assert row["prompt_token_ids"] and row["completion_logprobs"] == [-0.5] * len(row["completion_token_ids"])
    assert row["reward"] == pytest.approx(0.3)
    planner = {r["turn_id"]: r for r in table.to_pylist()}["ta-p"]
    assert json.loads(planner["tools"])[0]["function"]["name"] == "route"
    (call,) = planner["completion"][0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"to": "worker"}


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run 1: no tool calls, no tools, no token ids, no rewards (every optional column null). Run 2: tool
    calls whose same-named argument has another type than in run 3's, token ids, truncation, credit."""
    bare = episode("r1", "task-1", team=None, answer="1", tool_calls=False)
    for turn in bare[1]:
        turn.pop("tools", None)
    write(tmp_path / "run1", bare)
    write(
        tmp_path / "run2",
        episode(
            "r2",
            "task-1",
            team=1.0,
            answer="2",
            route_args={"to": "worker", "n": 3},
            token_ids=True,
            worker_extra={"truncated": {"prompt": 9}, "credit": {"team": 0.3}},
        ),
        episode("r3", "task-2", team=0.5, answer="3", route_args={"to": ["worker"], "n": "three"}),
    )
    return tmp_path / "run1", tmp_path / "run2"


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_files_of_any_runs_load_together_in_any_order(tmp_path: Path, fmt: str) -> None:
    run1, run2 = _two_runs(tmp_path)
    files = [tmp_path / f"1.{fmt}", tmp_path / f"2.{fmt}"]
    export([run1], fmt, files[0])
    export([run2], fmt, files[1])
    for order in (files, files[::-1]):
        if fmt == "parquet":
            data = load_dataset(
                "parquet",
                data_files=[str(f) for f in order],
                split="train",
                cache_dir=str(tmp_path / "cache"),
            )
            assert pads.dataset([str(f) for f in order], format="parquet").to_table().num_rows == 9
        else:  # JSON lines: every field in every row; the types come from the published features
            data = load_dataset(
                "json",
                data_files=[str(f) for f in order],
                split="train",
                features=features(TURNS),
                cache_dir=str(tmp_path / "cache"),
            )
        assert data.num_rows == 9
        by_id = {r["turn_id"]: r for r in data}
        assert by_id["r1-p"]["completion"][0]["tool_calls"] is None
        args = {
            t: json.loads(by_id[f"{t}-p"]["completion"][0]["tool_calls"][0]["function"]["arguments"])
            for t in ("r2", "r3")
        }
        assert args == {"r2": {"to": "worker", "n": 3}, "r3": {"to": ["worker"], "n": "three"}}
        assert by_id["r2-w2"]["prompt_token_ids"] and by_id["r1-w2"]["prompt_token_ids"] is None
    for file in files:  # the same keys, in every row of every file
        if fmt == "jsonl":
            assert {tuple(r) for r in rows(file)} == {tuple(TURNS.names)}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_dataset_directory_loads_with_no_code(tmp_path: Path, fmt: str) -> None:
    """``--to DIR``: exports of runs with and without tool calls, each written on its own, load together with
    ``load_dataset(DIR)`` alone, in the fixed schema (the dataset card declares the features); exporting a
    run again replaces its file."""
    run1, run2 = _two_runs(tmp_path)
    dataset = tmp_path / "dataset"
    for run in (run1, run2, run1):
        done = runner.invoke(app, ["export", str(run), "--format", fmt, "--to", str(dataset)])
        assert done.exit_code == 0, done.output
    assert len(list((dataset / "turns").glob(f"*.{fmt}"))) == 2
    data = load_dataset(str(dataset), split="train", cache_dir=str(tmp_path / "cache"))
    assert data.num_rows == 9
    assert data.features == features(TURNS)
    by_id = {r["turn_id"]: r for r in data}
    assert by_id["r1-p"]["completion"][0]["tool_calls"] is None
    call = by_id["r2-p"]["completion"][0]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"to": "worker", "n": 3}
    other = "parquet" if fmt == "jsonl" else "jsonl"
    mixed = runner.invoke(app, ["export", str(run1), "--format", other, "--to", str(dataset)])
    assert mixed.exit_code == 1 and f"holds .{fmt} files" in mixed.output


def test_the_card_declares_every_schema_as_datasets_writes_it(tmp_path: Path) -> None:
    from orchestrace_collector.export import CONFIGS
    from orchestrace_collector.export.card import hf_features, write_card

    for config, schema in CONFIGS.items():
        assert hf_features(schema) == features(schema)._to_yaml_list(), config
        (tmp_path / config).mkdir()
        (tmp_path / config / "x.jsonl").write_text("")
    card = write_card(tmp_path, CONFIGS).read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == list(CONFIGS)
    assert [c for c in header["configs"] if c.get("default")] == [
        {"config_name": "turns", "default": True, "data_files": [{"split": "train", "path": "turns/*.jsonl"}]}
    ]
    assert {i["config_name"]: i["features"] for i in header["dataset_info"]} == {
        config: features(schema)._to_yaml_list() for config, schema in CONFIGS.items()
    }


def test_nothing_to_export_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = runner.invoke(app, ["export", str(empty), "--format", "jsonl", "--to", str(tmp_path / "t.jsonl")])
    assert done.exit_code == 1 and "no traces in" in done.output
    out = write(tmp_path / "out", episode("ta", "task-1", team=1.0, answer="42"))
    done = runner.invoke(app, ["export", str(out), "--format", "jsonl", "--to", str(tmp_path / "t.jsonl"),
                               "--agent", "nobody"])
    assert done.exit_code == 1 and "no jsonl rows to write from 1 traces" in done.output
    assert not (tmp_path / "t.jsonl").exists()


def test_filters(tmp_path: Path) -> None:
    out = write(
        tmp_path / "out",
        episode("ta", "task-1", team=1.0, answer="42", worker_extra={"truncated": {"completion": 3}}),
        episode("tb", "task-2", team=0.5, answer="41", metrics={"rejected_rewards": 1.0}),
        episode("tc", "task-3", team=None, answer="40", worker_extra={"prompt_incomplete": True}),
    )

    def kept(**options: Any) -> set[str]:
        export([out], "jsonl", tmp_path / "f.jsonl", filters=Filters(**options))
        return {r["turn_id"] for r in rows(tmp_path / "f.jsonl")}

    everything = kept()
    assert len(everything) == 9
    # By the episode's outcome (1.0, 0.5, None), never by a turn's share of it; no outcome: dropped.
    assert kept(min_reward=0.6) == {"ta-p", "ta-w1", "ta-w2"}
    assert kept(max_reward=0.5) == {"tb-p", "tb-w1", "tb-w2"}
    assert kept(agents=("planner",)) == {"ta-p", "tb-p", "tc-p"}
    assert kept(roles=("executor",)) == {"ta-w1", "ta-w2", "tb-w1", "tb-w2", "tc-w1", "tc-w2"}
    assert kept(tasks=("task-2", "task-3")) == {t for t in everything if t[:2] in ("tb", "tc")}
    assert kept(drop_flagged=True) == {
        "ta-p",
        "ta-w1",
        "tc-p",
        "tc-w1",
    }  # truncated, rejected, partial prompt
    flags = {r["turn_id"]: r["flags"] for r in rows(tmp_path / "f.jsonl")}
    assert all(f == [] for f in flags.values())


def test_decisions_match_the_events_of_the_trace(tmp_path: Path) -> None:
    served = episode("ta", "task-1", team=2.0, answer="42")
    for turn in served[1]:
        turn.update(response_model="policy-lora-planner", policy_version="step-7")
    out = write(tmp_path / "out", served, episode("tb", "task-1", team=0.0, answer="41"))
    assert export([out], "decisions", tmp_path / "d.parquet") == 4
    table = pq.read_table(tmp_path / "d.parquet")
    assert table.schema.equals(DECISIONS)
    traces = latest_traces([out])
    for row in table.to_pylist():
        events = traces[row["trace_id"]]["events"]
        index = next(i for i, e in enumerate(events) if e["id"] == row["decision_id"])
        event = events[index]
        assert event["type"] == "orchestrator_decision"
        assert (row["decision"], row["agent"], row["choice"]) == (
            event["decision"],
            event["agent"],
            event.get("to"),
        )
        assert row["context_event_ids"] == [e["id"] for e in events[:index]]
        assert row["context_refs"] == [e["content_ref"] for e in events[:index] if e.get("content_ref")]
        assert row["reward"] == event["credit"]
        assert row["episode_reward"] == traces[row["trace_id"]]["rewards"]["team"]
    delegate = next(r for r in table.to_pylist() if r["trace_id"] == "ta" and r["decision"] == "delegate")
    assert delegate["options"] == ["worker", "critic"] and delegate["choice"] == "worker"
    assert delegate["turn_id"] == "ta-p"  # the model call that made it: its prompt is the context
    assert [m["content"] for m in delegate["context"]] == ["You plan.", "Solve task-1."]
    assert delegate["role"] == "orchestrator" and delegate["reward"] == pytest.approx(0.4)
    # The policy of the model call that made it; a decision no model call made has none.
    assert (delegate["response_model"], delegate["policy_version"]) == ("policy-lora-planner", "step-7")
    stop = next(r for r in table.to_pylist() if r["trace_id"] == "ta" and r["decision"] == "stop")
    assert stop["choice"] is None and stop["options"] is None and stop["turn_id"] is None
    assert (stop["response_model"], stop["policy_version"]) == (None, None)
    assert stop["context_event_ids"] == ["e1", "e2", "e3", "e4", "e5", "e6"]


def test_cli_export_and_its_errors(tmp_path: Path) -> None:
    out = write(tmp_path / "out", episode("ta", "task-1", team=1.0, answer="42"),
                episode("tb", "task-1", team=0.2, answer="41"))
    done = runner.invoke(
        app,
        [
            "export",
            str(out),
            "--format",
            "jsonl",
            "--to",
            str(tmp_path / "t.jsonl"),
            "--agent",
            "worker",
            "--min-reward",
            "0.25",
        ],
    )
    assert done.exit_code == 0, done.output
    assert [r["turn_id"] for r in rows(tmp_path / "t.jsonl")] == ["ta-w1", "ta-w2"]
    for args, message in [
        (["--format", "csv"], "unknown format"),
        (["--format", "jsonl", "--pairs"], "--format trl options"),
        (["--format", "jsonl", "--outcome", "credit:agent:worker"], "give a reward channel"),
        (["--format", "trl", "--pairs", "--labels"], "at most one"),
        (["--format", "jsonl", "--tokenizer", str(tmp_path)], "--format tokens option"),
        (["--format", "tokens"], "no recorded token ids"),
        (["--format", "tokens", "--tokenizer", str(tmp_path / "nope")], "no such tokenizer"),
    ]:
        done = runner.invoke(app, ["export", str(out), "--to", str(tmp_path / "x.jsonl"), *args])
        assert done.exit_code == 1 and message in done.output, (args, done.output)
        assert "Traceback" not in done.output
    done = runner.invoke(app, ["export", str(tmp_path / "missing"), "--format", "jsonl", "--to", "x"])
    assert done.exit_code == 1 and "not an output directory" in done.output
    with pytest.raises(ExportError):
        export([out], "tokens", tmp_path / "x.jsonl", strict=True)
