"""Running an example as users do, in its own process, and reading back what it wrote."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrace_collector.output import latest_traces, latest_turns

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ExampleRun:
    """What one run of an example printed and wrote (the last revision of each trace, and its turns)."""

    stdout: str
    traces: list[dict[str, Any]]
    turns: list[dict[str, Any]]

    @property
    def events(self) -> list[dict[str, Any]]:
        return [event for trace in self.traces for event in trace["events"]]


def run_example(name: str, out: Path, *options: str) -> ExampleRun:
    """``python -m examples.<name>.app`` writing its orchestration traces to ``out`` in-process."""
    command = [sys.executable, "-m", f"examples.{name}.app", "--exporter", "none", "--trace-dir", str(out)]
    done = subprocess.run(
        [*command, *options], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    traces = latest_traces([out])
    turns = latest_turns(out, traces)
    return ExampleRun(done.stdout, list(traces.values()), [t for ts in turns.values() for t in ts])
