"""Fixtures of the example tests."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from example_runs import ROOT, ExampleRun, run_example

# The examples are a package at the repository root (``python -m examples.<name>.app``), not an installed one.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], ExampleRun]:
    """Runs each example once per session (several tests read the same run)."""
    runs: dict[str, ExampleRun] = {}

    def get(name: str) -> ExampleRun:
        if name not in runs:
            runs[name] = run_example(name, tmp_path_factory.mktemp(name))
        return runs[name]

    return get
