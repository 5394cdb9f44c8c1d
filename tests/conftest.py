"""Fixtures shared by every test folder. Helpers live in ``collector_fixtures.py``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from collector_fixtures import RunningCollector, start_collector, validate_trace_dir
from example_runs import SHARED_RUNS, ExampleRun, run_examples

# pytest-xdist's workers get COLUMNS=80 and LINES=24 from execnet; the CLI honours COLUMNS (a width asked
# for), so the tests of its whole lines off a terminal would see 80 columns under `make test` alone.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

# The examples are a package at the repository root (``python -m examples.<name>.app``), not an installed one.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[RunningCollector]:
    """``orchestrace collect`` as a subprocess on free ports, quiet period 0.2 s, stopped with SIGTERM after
    the test (``.http_endpoint``, ``.grpc_endpoint``, ``.out``; ``.stop()`` to flush before reading)."""
    running = start_collector(tmp_path / "collected", "--quiet-period", "0.2")
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture
def trace_dir_validator() -> Callable[[Path], dict[str, dict[str, Any]]]:
    """``validate_trace_dir(path)``: asserts every written trace validates; returns the last revisions."""
    return validate_trace_dir


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], ExampleRun]:
    """``example_run(key)``: a run of ``example_runs.SHARED_RUNS`` (several tests read the same run; none may
    change what it wrote). All of them run once per session, together, when the first is asked for. Tests
    using this are marked ``xdist_group("example_runs")`` so that one pytest-xdist worker runs them all."""
    runs: dict[str, ExampleRun] = {}

    def get(key: str) -> ExampleRun:
        if not runs:
            started: list[tuple[str, Path, *tuple[str, ...]]] = [
                (app[0], tmp_path_factory.mktemp(run), *app[1:]) for run, app in SHARED_RUNS.items()]
            runs.update(zip(SHARED_RUNS, run_examples(started), strict=True))
        return runs[key]

    return get


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``make pytest`` runs the suite on two pytest-xdist workers (``--dist loadgroup``): the tests of one
    file stay on one worker (their module fixtures run once), unless marked into another group."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
