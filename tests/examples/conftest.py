"""Fixtures of the example tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from example_runs import ExampleRun, run_example


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], ExampleRun]:
    """Runs each example once per session (several tests read the same run)."""
    runs: dict[str, ExampleRun] = {}

    def get(name: str) -> ExampleRun:
        if name not in runs:
            runs[name] = run_example(name, tmp_path_factory.mktemp(name))
        return runs[name]

    return get
