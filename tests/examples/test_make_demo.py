"""``make demo`` end to end: collector started, supervisor example exported over OTLP, summary printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from example_runs import ROOT
from orchestrace_collector.output import latest_traces, latest_turns


def test_demo_collects_summarizes_and_validates_one_supervisor_run(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    command = [sys.executable, str(ROOT / "examples" / "demo.py"), "--out", str(out)]
    wide = {**os.environ, "COLUMNS": "200"}  # rich wraps at 80 columns when not on a terminal
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=wide)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Mars and Jupiter have 97 moons together." in done.stdout
    assert "team=1" in done.stdout
    assert "1 episode, 1 revision: 1/1 valid" in done.stdout
    assert "--exporter jaeger" in done.stdout
    assert "examples.agents_triage.app" in done.stdout and "examples.agents_as_tools.app" in done.stdout
    # the closing hints name this environment's interpreter (uv and a bare python may not be on PATH)
    hints = [line.split()[0] for line in done.stdout.splitlines() if " -m examples." in line]
    assert len(hints) == 3 and all(Path(hint).resolve() == Path(sys.executable).resolve() for hint in hints)
    # what the summary describes is on disk: the one run, its reward and its model calls
    (trace,) = latest_traces([out]).values()
    assert trace["rewards"]["team"] == 1.0
    assert len(latest_turns(out, {trace["trace_id"]: trace})[trace["trace_id"]]) == 10

