"""The README's "decorate an agent" example runs as printed and yields a valid orchestration trace."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from example_runs import ExampleRun

ROOT = Path(__file__).resolve().parents[1]


def test_decorate_example_runs_and_converts(tmp_path: Path, trace_dir_validator: Any) -> None:
    (block, *_) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert 'exporter="console"' in block
    script = tmp_path / "example.py"
    # Same program, written to a trace directory instead of the console.
    to_dir = f'exporter="none", trace_dir={str(tmp_path / "out")!r}'
    script.write_text(block.replace('exporter="console"', to_dir))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    (trace,) = trace_dir_validator(tmp_path / "out").values()
    assert trace["task_id"] == "task-42" and trace["topology"] == "centralized"
    types = {event["type"] for event in trace["events"]}
    expected = {
        "spawn",
        "tool_call",
        "tool_result",
        "message",
        "aggregate",
        "return",
        "orchestrator_decision",
    }
    assert expected <= types
    assert trace["rewards"]["team"] == 1.0
    assert sum(edge["type"] == "aggregate" for edge in trace["edges"]) == 2


# Runs each recipe given on stdin (a JSON list) as a program of its own (fresh globals) in one interpreter, so
# that their imports (datasets, transformers, trl, pandas) load once; prints what each printed, as JSON.
RECIPES_RUNNER = """
import contextlib, io, json, sys
printed = []
for recipe in json.load(sys.stdin):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(recipe, "<recipe>", "exec"), {"__name__": "__main__"})
    printed.append(out.getvalue())
print(json.dumps(printed))
"""


@pytest.mark.xdist_group("example_runs")
def test_dump_training_traces_recipes_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example_run: Callable[[str], ExampleRun]
) -> None:
    """The section's export commands, then each consumer's recipe, as printed, on a run of the supervisor
    example with content captured (a tokenizer built here stands for ``my-tokenizer/``)."""
    from export_fixtures import build_tokenizer
    from orchestrace_collector.cli import app
    from typer.testing import CliRunner

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Dump training traces") :]
    section = section[: section.index("\n## ", 1)]
    trace_dir = example_run("supervisor-content-a").trace_dir
    assert trace_dir
    shutil.copytree(trace_dir, tmp_path / "traces")  # the commands' `traces/`; the shared run stays as it was
    build_tokenizer(tmp_path / "my-tokenizer")
    commands = [
        line.split("#", 1)[0].split()
        for block in re.findall(r"```sh\n(.*?)```", section, re.S)
        for line in block.splitlines()
        if line.startswith("orchestrace export")
    ]
    assert {c[c.index("--format") + 1] for c in commands} == {
        "parquet",
        "trl",
        "tokens",
        "decisions",
        "jsonl",
    }
    monkeypatch.chdir(tmp_path)  # the commands' paths are relative
    for command in commands:  # the `orchestrace` command, in this process
        done = CliRunner().invoke(app, command[1:])
        assert done.exit_code == 0, (command, done.output, done.exception)
    researcher = [json.loads(line) for line in (tmp_path / "researcher.jsonl").read_text().splitlines()]
    assert researcher and all(r["agent"] == "researcher" and r["episode_reward"] >= 0.1 for r in researcher)
    recipes = re.findall(r"```python\n(.*?)```", section, re.S)
    assert all(len(recipe.strip().splitlines()) <= 12 for recipe in recipes)
    ran = subprocess.run([sys.executable, "-c", RECIPES_RUNNER], input=json.dumps(recipes), cwd=tmp_path,
                         capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, ran.stderr
    trl, tokens, triplets, decisions = json.loads(ran.stdout.splitlines()[-1])
    assert trl.startswith("10 rows in 1 groups; completion: <call>transfer_to_researcher {}</call>")
    assert re.match(r"\(\d+, \d+\) generated tokens: [1-9]", tokens)
    assert triplets.startswith("10 triplets")
    assert "choices: ['mathematician', 'moon_team', 'researcher', 'supervisor#1'" in decisions


def test_instrument_another_framework_example_runs_and_converts(tmp_path: Path,
                                                                trace_dir_validator: Any) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Instrument another framework", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    assert 'exporter="console"' in block and "orchestrace.instrumentation" in block
    script = tmp_path / "framework.py"
    script.write_text(block.replace('exporter="console"',
                                    f'exporter="none", trace_dir={str(tmp_path / "out")!r}'))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    (trace,) = trace_dir_validator(tmp_path / "out").values()
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in trace["events"]:
        by_type.setdefault(event["type"], []).append(event)
    (call,) = by_type["tool_call"]
    assert (call["agent"], call["tool"]) == ("triage", "track")
    assert len(by_type["tool_result"]) == 1
    assert any(e.get("decision") == "delegate" and e.get("handoff") is True
               for e in by_type["orchestrator_decision"]), json.dumps(trace["events"])


def test_openai_agents_section_is_ten_lines_that_import() -> None:
    """The section's program is as short as promised, and what it imports exists (running it needs a key)."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Auto-instrument the OpenAI Agents SDK") :]
    (block,) = re.findall(r"```python\n(.*?)```", section[: section.index("\n## ", 1)], re.S)
    assert len(block.strip().splitlines()) <= 10
    imports = "\n".join(line for line in block.splitlines() if line.startswith(("import ", "from ")))
    run = subprocess.run([sys.executable, "-c", imports + "\nOpenAIAgentsInstrumentor().instrument()"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
