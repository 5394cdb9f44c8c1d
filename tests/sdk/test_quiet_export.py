"""An app whose collector is not running: one warning line and no wait at exit, not the OTLP exporter's
retries (a log line each, seconds at exit); ``ORCHESTRACE_QUIET=false`` gives those back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from collector_fixtures import free_port

APP = """
import sys, time
import orchestrace as ot

handle = ot.configure("quiet-app", exporter="otlp", endpoint=sys.argv[1])

@ot.agent
def worker(n):
    return n

for n in range(2):  # two batches: the warning is still one line
    with ot.task(f"task-{n}"):
        worker(n)
    handle.force_flush()
started = time.monotonic()
handle.shutdown()
print(f"{time.monotonic() - started:.3f}")
"""


def _run(tmp_path: Path, env: dict[str, str]) -> tuple[list[str], float]:
    script = tmp_path / "app.py"
    script.write_text(APP)
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run([sys.executable, str(script), endpoint], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return [line for line in done.stderr.splitlines() if line.strip()], float(done.stdout.split()[-1])


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_nothing_listening_is_one_warning_line_and_no_wait(tmp_path: Path, protocol: str) -> None:
    lines, shutdown_s = _run(tmp_path, {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol})
    (line,) = lines
    assert "orchestrace: nothing listens at " in line and "ORCHESTRACE_QUIET=false" in line
    assert shutdown_s < 1.0  # the exporter's retries took its whole timeout (5 s) here


def test_orchestrace_quiet_false_gives_the_exporters_messages_back(tmp_path: Path) -> None:
    lines, _ = _run(tmp_path, {"ORCHESTRACE_QUIET": "false", "OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
    assert not any("nothing listens" in line for line in lines)
    assert any("Transient error" in line or "Failed to export" in line for line in lines), lines
