"""The README fits on a screen and links only to pages that exist; its "decorate an agent" example runs as
printed and yields a valid orchestration trace; its Agents SDK program imports. What the README said before
moved to docs/ (tests/test_docs.py); its commands run on a fresh clone (test_readme_clone.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_readme_is_short_and_its_links_resolve() -> None:
    assert len(README.splitlines()) <= 160
    links = re.findall(r"\]\(([^)#\s]+)", README)
    local = [link for link in links if "://" not in link]
    assert {"docs/getting-started.md", "docs/sdk.md", "docs/exports.md", "docs/cli/index.md"} <= set(local)
    assert [link for link in local if not (ROOT / link).exists()] == []
    for use in ("## Decorate an agent", "## Auto-instrument LangGraph",
                "## Auto-instrument the OpenAI Agents SDK", "## Export to Jaeger or Phoenix",
                "## Dump and export training traces", "## Documentation"):
        assert use in README


def test_decorate_example_runs_and_converts(tmp_path: Path, trace_dir_validator: Any) -> None:
    (block, *_) = re.findall(r"```python\n(.*?)```", README, re.S)
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


def test_openai_agents_section_is_ten_lines_that_import() -> None:
    """The section's program is as short as promised, and what it imports exists (running it needs a key)."""
    section = README[README.index("## Auto-instrument the OpenAI Agents SDK") :]
    (block,) = re.findall(r"```python\n(.*?)```", section[: section.index("\n## ", 1)], re.S)
    assert len(block.strip().splitlines()) <= 10
    imports = "\n".join(line for line in block.splitlines() if line.startswith(("import ", "from ")))
    run = subprocess.run([sys.executable, "-c", imports + "\nOpenAIAgentsInstrumentor().instrument()"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_the_performance_row_shows_the_last_bench_run() -> None:
    # `make bench` rewrites the row from its results; a hand edit or a stale row fails here.
    from bench import report

    results = json.loads((ROOT / "bench" / "results" / "results.json").read_text())
    row = report.readme_row(results)
    assert row in README.splitlines()
    assert report.with_readme_row(README, results) == README
    changed = json.loads(json.dumps(results))
    changed["collector"]["ingest"]["spans_per_collector_cpu_s"] += 1000
    assert report.with_readme_row(README, changed) != README
