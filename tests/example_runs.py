"""Running an example as users do, in its own process, and reading back what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrace_collector.output import latest_traces, latest_turns

ROOT = Path(__file__).resolve().parents[1]
#: Every example app (``examples/<name>/app.py``).
EXAMPLES = ["supervisor", "swarm", "map_reduce", "hierarchical", "human_in_the_loop", "agents_triage",
            "agents_as_tools"]
#: The runs several tests read (the ``example_run`` fixture): each example as it is, and two rollouts of the
#: supervisor's task with content captured (``supervisor-content-a``, ``-b``).
SHARED_RUNS: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in EXAMPLES},
    **{f"supervisor-content-{side}": ("supervisor", "--capture-content") for side in ("a", "b")},
}


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


def run_examples(runs: Sequence[tuple[str, Path, *tuple[str, ...]]]) -> list[ExampleRun]:
    """``python -m examples.<name>.app <options>`` for each ``(name, out, *options)``, each in its own
    process, as many at once as there are cores (more would only make each wait longer for a core, and some
    examples measure how much of their work overlaps): spans to ``out/spans.jsonl``, traces to
    ``out/traces``."""
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        futures = [pool.submit(_run_example, *run) for run in runs]
        try:
            return [future.result() for future in futures]
        except BaseException:
            pool.shutdown(cancel_futures=True)  # one failed: start no more
            raise


def _run_example(name: str, out: Path, *options: str) -> ExampleRun:
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", f"examples.{name}.app", "--exporter", f"file:{out / 'spans.jsonl'}",
               "--trace-dir", str(out / "traces"), *options]
    with (out / "stdout.txt").open("w") as stdout, (out / "stderr.txt").open("w") as stderr:
        done = subprocess.run(command, cwd=ROOT, stdout=stdout, stderr=stderr, timeout=240, check=False)
    assert done.returncode == 0, (out / "stderr.txt").read_text()
    return _read_run((out / "stdout.txt").read_text(), out)


def _read_run(stdout: str, out: Path) -> ExampleRun:
    spans_file, trace_dir = out / "spans.jsonl", out / "traces"
    spans = [
        span
        for line in spans_file.read_text(encoding="utf-8").splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    traces = latest_traces([trace_dir])
    turns = latest_turns(trace_dir, traces)
    turns_of = [t for ts in turns.values() for t in ts]
    return ExampleRun(stdout, spans, list(traces.values()), turns_of, trace_dir)
