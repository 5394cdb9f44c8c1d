"""Fixtures of the example tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from example_runs import EXAMPLES, ExampleRun, run_examples


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], ExampleRun]:
    """Runs each example once per session (several tests read the same run): all of them at once, when the
    first is asked for."""
    runs: dict[str, ExampleRun] = {}

    def get(name: str) -> ExampleRun:
        if not runs:
            runs.update(zip(EXAMPLES, run_examples([(n, tmp_path_factory.mktemp(n)) for n in EXAMPLES]),
                            strict=True))
        return runs[name]

    return get
