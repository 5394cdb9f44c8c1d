"""A new user's first hour: a fresh clone, ``make demo``, then every command the README shows, as written, and
the commands the demo's closing hints print; they must work with nothing added to ``PATH``."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from example_runs import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # installs the environment and compiles with mypyc
#: README lines not run here: ``make demo`` runs first on its own, ``make test`` is this suite, and Docker
#: is not on the test machines.
NOT_RUN = ("make demo", "make test", "docker run")


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return [line for block in re.findall(r"```sh\n(.*?)```", readme, re.S) for line in block.splitlines()
            if line.strip() and not line.startswith(NOT_RUN)]


def _run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    return done


def test_readme_commands_work_on_a_fresh_clone(tmp_path: Path, trace_dir_validator: Any) -> None:
    clone = tmp_path / "orchestrace"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "COLUMNS")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))  # not this checkout's .venv/bin
    env["HF_HOME"] = str(tmp_path / "hf")
    demo = subprocess.run(["make", "demo"], cwd=clone, env=env, capture_output=True, text=True, timeout=1800,
                          check=False)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "1 episode, 1 revision: 1/1 valid" in demo.stdout

    # docs/getting-started.md's three ways to run an installed command
    ways = [".venv/bin/orchestrace validate out/demo",
            "source .venv/bin/activate && orchestrace validate out/demo",
            ".tools/bin/uv run --frozen orchestrace validate out/demo"]
    page = (ROOT / "docs" / "getting-started.md").read_text()
    assert all(part in page for way in ways for part in way.split(" && "))
    for way in ways if (clone / ".tools" / "bin" / "uv").exists() else ways[:2]:  # .tools/: uv not on PATH
        assert "1/1 valid" in _run(way, clone, env).stdout

    hints = [line for line in demo.stdout.splitlines() if line.startswith(".venv/bin/")]
    assert len(hints) == 3, demo.stdout[-2000:]  # the Jaeger run, the two OpenAI Agents SDK examples
    for hint in hints:  # nothing listens for Jaeger here: one warning line, exit 0
        _run(hint, clone, env)
    assert trace_dir_validator(clone / "out" / "agents_triage")

    collector: subprocess.Popen[str] | None = None
    for command in _readme_commands():
        if " collect " in command:  # "terminal 1": runs until stopped
            collector = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=clone, env=env,
                                         stderr=subprocess.PIPE, text=True)
            assert collector.stderr is not None
            ready = collector.stderr.readline()
            assert "orchestrace collector ready" in ready, ready
            continue
        if collector is not None and "validate" in command:  # "stop the collector with Ctrl-C"
            collector.send_signal(signal.SIGINT)
            assert collector.wait(timeout=60) == 0
            collector = None
            assert trace_dir_validator(clone / "traces")
        done = _run(command, clone, env)
        if "load_dataset" in command:
            assert re.search(r"num_rows: [1-9]", done.stdout), done.stdout
    assert collector is None
    assert (clone / "dataset" / "README.md").is_file()
    shutil.rmtree(clone, ignore_errors=True)
