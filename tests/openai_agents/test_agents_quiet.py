"""The Agents SDK's own exporter complains on every run when no OpenAI key is set; instrumented, the app is
quiet unless ``ORCHESTRACE_QUIET=false``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from example_runs import ROOT

NO_KEY = "OPENAI_API_KEY is not set, skipping trace export"


@pytest.mark.parametrize("quiet", [True, False])
def test_no_key_complaint_only_when_asked_for(quiet: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    if not quiet:
        env["ORCHESTRACE_QUIET"] = "false"
    done = subprocess.run([sys.executable, "-m", "examples.agents_triage.app", "--exporter", "none"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "refunded" in done.stdout  # the app ran
    assert (NO_KEY in done.stderr) is not quiet, done.stderr
