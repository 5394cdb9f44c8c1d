"""``orchestrace convert / validate / stats / annotate`` and ``--reward``."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from collector_fixtures import (
    JAEGER_EXPORT,
    RunningCollector,
    encode_otlp_json,
    encode_protobuf,
    record_run,
    validate_trace_dir,
)
from convert_support import GOLDEN
from orchestrace_collector.cli import app
from orchestrace_collector.output import latest_traces
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture
def dumps(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "dumps"
    folder.mkdir()
    files = {
        "protobuf": folder / "run.pb",
        "otlp_json": folder / "run.json",
        "json_lines": folder / "collector-file-exporter.jsonl",
        "jaeger": folder / "jaeger.json",
        "gzip": folder / "run.pb.gz",
    }
    files["protobuf"].write_bytes(encode_protobuf(record_run("cli-protobuf")))
    files["otlp_json"].write_text(json.dumps(encode_otlp_json(record_run("cli-json"))))
    lines = [record_run("cli-lines"), record_run("cli-lines-2")]
    files["json_lines"].write_text("\n".join(json.dumps(encode_otlp_json(spans)) for spans in lines) + "\n")
    files["jaeger"].write_text(json.dumps(JAEGER_EXPORT))
    files["gzip"].write_bytes(gzip.compress(encode_protobuf(record_run("cli-gzip"))))
    return files


@pytest.mark.parametrize("kind", ["protobuf", "otlp_json", "json_lines", "jaeger", "gzip"])
def test_convert_each_format(dumps: dict[str, Path], tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["convert", str(dumps[kind]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    traces = validate_trace_dir(out)
    expected = {"json_lines": 2}.get(kind, 1)
    assert len(traces) == expected
    assert all(t["metrics"]["spans"] >= 2 for t in traces.values())


def test_convert_a_directory_and_a_bad_file(dumps: dict[str, Path], tmp_path: Path) -> None:
    bad = dumps["protobuf"].parent / "broken.json"
    bad.write_text('{"resourceSpans": [')
    out = tmp_path / "out"
    result = runner.invoke(app, ["convert", str(dumps["protobuf"].parent), "--out", str(out)])
    assert result.exit_code == 1
    # one line, whole, whatever the path's length: output that is not a terminal is never wrapped
    assert any(line.startswith("error: ") and line.endswith("(char 19)") and "broken.json" in line
               for line in result.output.splitlines()), result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)
    assert len(validate_trace_dir(out)) == 6, "the good files are still converted"


def test_convert_missing_file_and_unknown_engine(tmp_path: Path, dumps: dict[str, Path]) -> None:
    missing = runner.invoke(app, ["convert", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 1 and "no such file" in missing.output
    engine = runner.invoke(
        app, ["convert", str(dumps["jaeger"]), "--out", str(tmp_path / "o"), "--engine", "x"]
    )
    assert engine.exit_code == 1 and "unknown engine" in engine.output


def test_validate_exit_codes(dumps: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["convert", str(dumps["otlp_json"]), "--out", str(out)]).exit_code == 0
    good = runner.invoke(app, ["validate", str(out)])
    assert good.exit_code == 0 and "1 episode, 1 revision: 1/1 valid" in good.output
    trace = json.loads(next(out.glob("traces-*.jsonl")).read_text())
    trace["edges"].append({"src": trace["events"][0]["id"], "dst": "no-such-event", "type": "causal"})
    trace["costs"]["tokens"] = -1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(trace) + "\n" + "not json\n")
    result = runner.invoke(app, ["validate", str(out), str(bad)])
    assert result.exit_code == 1 and "1 episode, 3 revisions: 1/3 valid" in result.output
    assert runner.invoke(app, ["validate", str(tmp_path / "empty.jsonl")]).exit_code == 1


def test_stats_table(dumps: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    runner.invoke(app, ["convert", str(dumps["json_lines"]), str(dumps["protobuf"]), "--out", str(out)])
    result = runner.invoke(app, ["stats", str(out)], terminal_width=200)
    assert result.exit_code == 0
    assert "events by type" in result.output and "tool_call" in result.output
    traces_row = next(line for line in result.output.splitlines() if line.strip("│ ").startswith("traces "))
    assert traces_row.split("│")[2].strip() == "3"


def test_annotate_writes_a_new_revision(dumps: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    runner.invoke(app, ["convert", str(dumps["otlp_json"]), "--out", str(out)])
    ((trace_id, before),) = latest_traces([out]).items()
    result = runner.invoke(app, ["annotate", str(out), "--task-id", "cli-json", "--reward", "1"])  # team
    assert result.exit_code == 0, result.output
    counted = runner.invoke(app, ["validate", str(out)])
    assert "1 episode, 2 revisions: 2/2 valid" in counted.output, counted.output
    result = runner.invoke(
        app,
        [
            "annotate",
            str(out),
            "--trace-id",
            trace_id,
            "--reward",
            "0.5",
            "--family",
            "verifier",
            "--name",
            "unit_tests",
        ],
    )
    assert result.exit_code == 0, result.output
    after = validate_trace_dir(out)[trace_id]
    assert after["metrics"]["revision"] == 2 and before["metrics"]["revision"] == 0
    assert after["rewards"]["team"] == 1.0 and after["rewards"]["verifier:unit_tests"] == 0.5
    # Both are team-unit channels: the events' credit splits their sum.
    assert sum(e.get("credit", 0) for e in after["events"]) == pytest.approx(1.5)
    unknown = runner.invoke(
        app, ["annotate", str(out), "--trace-id", "nope", "--reward", "1", "--family", "team"]
    )
    assert unknown.exit_code == 1 and "no trace" in unknown.output
    bad_family = runner.invoke(
        app, ["annotate", str(out), "--trace-id", trace_id, "--reward", "1", "--family", "vibes"]
    )
    assert bad_family.exit_code == 1


def test_reward_function_on_convert(
    dumps: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_rewards.py").write_text(
        "def score(trace):\n"
        "    return {'team': float(len(trace.events)), 'hybrid': 0.25}\n"
        "def broken(trace):\n"
        "    raise ValueError('bad reward code')\n"
        "def nan(trace):\n"
        "    return {'team': float('nan'), 'verifier:judge': 1.0, 'vibes': 1.0, 'tool': 1.0}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["convert", str(dumps["protobuf"]), "--out", str(out), "--reward", "my_rewards:score"]
    )
    assert result.exit_code == 0, result.output
    (trace,) = validate_trace_dir(out).values()
    assert trace["rewards"]["team"] == len(trace["events"]) and trace["rewards"]["hybrid"] == 0.25
    out2 = tmp_path / "out2"
    result = runner.invoke(
        app, ["convert", str(dumps["protobuf"]), "--out", str(out2), "--reward", "my_rewards:broken"]
    )
    assert result.exit_code == 0 and len(validate_trace_dir(out2)) == 1, (
        "a failing reward function loses no trace"
    )
    out3 = tmp_path / "out3"
    result = runner.invoke(
        app, ["convert", str(dumps["protobuf"]), "--out", str(out3), "--reward", "my_rewards:nan"]
    )
    (trace,) = validate_trace_dir(out3).values()
    assert result.exit_code == 0 and "team" not in trace["rewards"]
    # A tool's reward has no tool to go to from a reward function: refused and counted, not the team's.
    assert trace["rewards"]["verifier:judge"] == 1.0 and trace["metrics"]["rejected_rewards"] == 3
    result = runner.invoke(
        app, ["convert", str(dumps["protobuf"]), "--out", str(out2), "--reward", "my_rewards"]
    )
    assert result.exit_code == 1 and "module:function" in result.output


def test_nothing_to_work_on_is_an_error_on_every_command(tmp_path: Path) -> None:
    """One rule: no spans / traces / rows is one ``error:`` line, exit 1, and nothing written."""
    empty_dir, empty_file = tmp_path / "empty", tmp_path / "empty.jsonl"
    empty_dir.mkdir()
    empty_file.write_text("")
    out = tmp_path / "out"
    for args, message in [
        (["convert", str(empty_file), "--out", str(out)], "no spans in"),
        (["validate", str(empty_dir)], "no traces in"),
        (["stats", str(empty_dir)], "no traces in"),
        (["export", str(empty_dir), "--format", "jsonl", "--to", str(tmp_path / "t.jsonl")], "no traces in"),
        (["annotate", str(empty_dir), "--task-id", "t", "--reward", "1"], "no trace"),
    ]:
        done = runner.invoke(app, args)
        assert done.exit_code == 1, (args, done.output)
        (line,) = done.output.splitlines()
        assert line.startswith("error: ") and message in line, (args, line)
    assert not out.exists() and not (tmp_path / "t.jsonl").exists()
    assert sorted(p.name for p in empty_dir.iterdir()) == []


def test_stats_sums_the_keys_of_each_unit_instance_into_one_row(tmp_path: Path) -> None:
    from orchestrace_collector.stats import compute_stats, stats_tables

    rewards = {"team": 1.0, "verifier:tests": 0.5, "agent:worker#2": 0.2,
               **{f"credit:agent:worker#{k}": 0.25 for k in range(1, 5)}}
    stats = compute_stats([{"trace_id": "a", "events": [], "rewards": rewards}])
    table = next(t for t in stats_tables(stats) if t.title == "rewards")
    cells = [list(column.cells) for column in table.columns]
    assert dict(zip(cells[0], zip(*cells[1:], strict=True), strict=True)) == {
        "agent:*": ("1", "1", "0.2", "0.2", "0.2"),
        "credit:agent:*": ("4", "1", "1", "1", "1"),
        "team": ("1", "1", "1", "1", "1"),
        "verifier:tests": ("1", "1", "0.5", "0.5", "0.5"),
    }


def test_every_help_shows_an_example() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert {"collect", "convert", "validate", "stats", "export", "annotate"} <= set(commands)
    for name, command in commands.items():
        if not command.add_help_option:  # its --help is that of the program it hands over to (proxy)
            assert command.epilog.startswith(f"Example: orchestrace {name} ")
            continue
        done = runner.invoke(app, [name, "--help"], terminal_width=200)
        assert done.exit_code == 0 and f"Example: orchestrace {name} " in done.output, done.output


def test_output_to_a_pipe_is_never_wrapped(dumps: dict[str, Path], tmp_path: Path) -> None:
    """A real process whose stdout is a pipe and whose stdin is no terminal, without COLUMNS: long paths
    and ids stay on their line (rich would wrap them at 80 columns)."""
    out = tmp_path / ("a-directory-name-long-enough-to-pass-eighty-columns-" * 2)
    assert runner.invoke(app, ["convert", str(dumps["otlp_json"]), "--out", str(out)]).exit_code == 0
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-m", "orchestrace_collector.cli", "validate", str(out)],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 0, done.stderr
    assert any(str(out) in line for line in done.stdout.splitlines()), done.stdout


def test_convert_into_the_output_of_a_running_collector_is_refused(collector: RunningCollector) -> None:
    """Both keep what they wrote in ``OUT/wal`` (see docs/provenance.md): one writer at a time."""
    dump = str(GOLDEN / "autogen_spans.jsonl")
    done = runner.invoke(app, ["convert", dump, "--out", str(collector.out)])
    assert done.exit_code == 1 and "in use by another process" in done.output, done.output
    assert latest_traces([collector.out]) == {}
    collector.stop()
    done = runner.invoke(app, ["convert", dump, "--out", str(collector.out)])
    assert done.exit_code == 0 and latest_traces([collector.out]), done.output


def test_a_second_collector_on_the_same_output_is_refused(collector: RunningCollector) -> None:
    done = runner.invoke(app, ["collect", "--out", str(collector.out), "--port", "0", "--grpc-port", "0"])
    assert done.exit_code == 1 and "in use by another process" in done.output, done.output
    assert collector.process.poll() is None  # the first one runs on


def test_the_ray_engine_refuses_an_output_that_holds_written_episodes(tmp_path: Path) -> None:
    """Ray's engine does not replay ``OUT/wal``: into a directory a local convert wrote, a straggler's span
    would be an episode of its own, so it is refused before anything starts (docs/provenance.md)."""
    dump, out = str(GOLDEN / "autogen_spans.jsonl"), tmp_path / "out"
    assert runner.invoke(app, ["convert", dump, "--out", str(out)]).exit_code == 0
    before = latest_traces([out])
    done = runner.invoke(app, ["convert", dump, "--out", str(out), "--engine", "ray"])
    assert done.exit_code == 1 and "--engine local" in done.output, done.output
    assert latest_traces([out]) == before
