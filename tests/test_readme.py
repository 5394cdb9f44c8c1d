"""The README's "decorate an agent" example runs as printed and yields a valid orchestration trace."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    expected = {"spawn", "tool_call", "tool_result", "message", "aggregate", "return",
                "orchestrator_decision"}
    assert expected <= types
    assert trace["rewards"]["team"] == 1.0
    assert sum(edge["type"] == "aggregate" for edge in trace["edges"]) == 2
