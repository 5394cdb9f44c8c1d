"""Fixtures shared by every test folder. Helpers live in ``collector_fixtures.py``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from collector_fixtures import RunningCollector, start_collector, validate_trace_dir

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
