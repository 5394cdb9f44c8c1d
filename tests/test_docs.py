"""The docs site: it builds with --strict, a page per CLI command comes from the CLI, every code block
marked runnable runs, and the pages' examples do what their text says (what tests/test_readme.py did for the
README before its contents moved here)."""

from __future__ import annotations

import importlib.util
import json
import os
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
DOCS = ROOT / "docs"
#: A fenced block right after this comment runs as it is (tests below); the comment does not show in the site.
RUNNABLE = re.compile(r"<!-- runnable -->\n```python\n(.*?)```", re.S)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """Broken links, anchors and API references fail the build (as in CI)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    import typer
    from orchestrace_collector.cli import app

    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert commands and {p.name for p in (site / "cli").iterdir() if p.is_dir()} == commands
    for page in ("getting-started", "sdk", "integrations/langgraph", "integrations/openai-agents",
                 "collector", "traces", "exports", "performance", "api/sdk", "api/collector"):
        assert (site / page / "index.html").is_file(), page
    api = (site / "api" / "sdk" / "index.html").read_text()
    documented = ("configure", "agent", "tool", "TaskRun", "reward")
    assert all(f'id="orchestrace.{name}"' in api for name in documented)
    assert (site / "repo" / "bench" / "results" / "scaling.png").is_file()  # a link out of docs/, served


def test_every_command_page_comes_from_the_command() -> None:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs_hooks" / "hooks.py")
    assert spec and spec.loader
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    pages = {name: hooks.command_page(name, command) for name, command in hooks._commands().items()}
    assert "--memory-limit-mb" in pages["collect"] and "`1024`" in pages["collect"]
    assert "| `--family` | `team` |" in pages["annotate"]
    assert "orchestrace export [OPTIONS] OUTS..." in pages["export"]
    for name, page in pages.items():
        assert page.startswith(f"# orchestrace {name}\n")
        assert f"orchestrace {name} " in page.split("Example:")[1]


def test_every_runnable_block_runs(tmp_path: Path, trace_dir_validator: Any) -> None:
    pages = sorted(DOCS.rglob("*.md"))
    blocks = [(page, block) for page in pages for block in RUNNABLE.findall(page.read_text())]
    assert blocks, "no block is marked runnable"
    for number, (page, block) in enumerate(blocks):
        cwd = tmp_path / str(number)
        cwd.mkdir()
        done = subprocess.run([sys.executable, "-c", block], cwd=cwd, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, (page, done.stderr)
        if (cwd / "traces").is_dir():
            assert trace_dir_validator(cwd / "traces"), page


def test_sdk_decorate_example_runs_and_converts(tmp_path: Path, trace_dir_validator: Any) -> None:
    (block, *_) = re.findall(r"```python\n(.*?)```", (DOCS / "sdk.md").read_text(), re.S)
    assert 'exporter="console"' in block and "@ot.llm" in block
    script = tmp_path / "example.py"
    to_dir = f'exporter="none", trace_dir={str(tmp_path / "out")!r}'
    script.write_text(block.replace('exporter="console"', to_dir))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    (trace,) = trace_dir_validator(tmp_path / "out").values()
    assert trace["task_id"] == "task-42" and trace["rewards"]["team"] == 1.0


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
    """The page's export commands, then each consumer's recipe, as printed, on a run of the supervisor
    example with content captured (a tokenizer built here stands for ``my-tokenizer/``)."""
    from export_fixtures import build_tokenizer
    from orchestrace_collector.cli import app
    from typer.testing import CliRunner

    section = (DOCS / "exports.md").read_text()
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
    # Choices are stable agent names (no activation labels); the graph's fixed edges are left out.
    assert "choices: ['mathematician', 'moon_team', 'researcher', 'writer']" in decisions


def test_instrument_another_framework_example_runs_and_converts(tmp_path: Path,
                                                                trace_dir_validator: Any) -> None:
    section = (DOCS / "integrations" / "other-frameworks.md").read_text()
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
