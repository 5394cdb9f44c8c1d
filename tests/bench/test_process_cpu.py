"""The Ray benchmark's CPU breakdown by process (``bench.ray_convert.ProcessCpu``), on made-up samples."""

from __future__ import annotations

import pytest

from bench.ray_convert import ProcessCpu

VENV = "/venv/lib/python3.11/site-packages/ray"
WORKER = f"{VENV}/_private/workers/default_worker.py"
RAYLET = f"{VENV}/core/src/ray/raylet/raylet --python_worker_command=python {WORKER}"


def test_kinds_and_worker_phases() -> None:
    cpu = ProcessCpu(driver=10)
    cpu.start(20, 5.0)  # running before the command: only what it uses from now on counts
    cpu.sample(20, 5.5, RAYLET)
    cpu.sample(21, 0.25, f"{VENV}/core/src/ray/gcs/gcs_server --port=1")
    cpu.sample(10, 1.0, "python orchestrace convert")
    cpu.sample(30, 1.5, f"python {WORKER} --node-ip-address=127.0.0.1")
    cpu.sample(30, 2.0, "ray::IDLE")
    cpu.sample(30, 3.0, "ray::scan")
    cpu.sample(30, 3.5, "ray::IDLE")
    cpu.sample(30, 6.0, "ray::_convert_task")
    cpu.sample(31, 0.5, "ray::DashboardAgent --foo")
    assert cpu.seconds == pytest.approx(
        {
            "driver": 1.0,
            "raylet": 0.5,
            "gcs_server": 0.25,
            "worker_startup": 2.0,
            "worker_tasks": 3.5,
            "worker_idle": 0.5,
            "other": 0.5,
        }
    )
    assert cpu.workers() == {"count": 1, "tasks": ["ray::scan ray::_convert_task"]}
