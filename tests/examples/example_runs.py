"""Running an example as users do, in its own process, and reading back what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrace_collector.output import latest_traces, latest_turns

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ExampleRun:
    """What one run of an example printed and wrote: its OTel spans (OTLP-JSON), and the last revision of
    each orchestration trace with its turns."""

    stdout: str
    spans: list[dict[str, Any]]
    traces: list[dict[str, Any]]
    turns: list[dict[str, Any]]
    trace_dir: Path | None = None  # where the run wrote them

    @property
    def events(self) -> list[dict[str, Any]]:
        return [event for trace in self.traces for event in trace["events"]]


def run_example(name: str, out: Path, *options: str) -> ExampleRun:
    """``python -m examples.<name>.app``: spans to ``out/spans.jsonl``, traces to ``out/traces``."""
    spans_file, trace_dir = out / "spans.jsonl", out / "traces"
    command = [sys.executable, "-m", f"examples.{name}.app", "--exporter", f"file:{spans_file}"]
    done = subprocess.run(
        [*command, "--trace-dir", str(trace_dir), *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    spans = [
        span
        for line in spans_file.read_text(encoding="utf-8").splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    traces = latest_traces([trace_dir])
    turns = latest_turns(trace_dir, traces)
    return ExampleRun(
        done.stdout, spans, list(traces.values()), [t for ts in turns.values() for t in ts], trace_dir
    )
