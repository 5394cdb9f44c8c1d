"""The orchestrace SDK's own OTLP exporters (``ot.configure(exporter=...)``) sending to ``collect``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from collector_fixtures import RunningCollector, validate_trace_dir

PROGRAM = textwrap.dedent("""
    import sys
    import orchestrace as ot

    exporter, endpoint, task = sys.argv[1:4]
    handle = ot.configure("ingest-sdk-app", exporter=exporter, endpoint=endpoint)

    @ot.tool()
    def lookup(query: str) -> str:
        return query.upper()

    @ot.agent(role="researcher")
    def researcher(question: str) -> str:
        return lookup(question) + lookup(question + "?")

    @ot.agent(role="supervisor")
    def supervisor(question: str) -> str:
        return researcher(question)

    with ot.task(task):
        supervisor("what is orchestration")
    handle.shutdown()
""")


@pytest.mark.parametrize("exporter", ["otlp", "otlp-grpc"])
def test_sdk_run_over_otlp_becomes_a_trace(collector: RunningCollector, exporter: str) -> None:
    endpoint = collector.base_url if exporter == "otlp" else f"http://{collector.grpc_endpoint}"
    task = f"sdk-{exporter}"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, exporter, endpoint, task],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert collector.stop() == 0
    (trace,) = validate_trace_dir(collector.out).values()
    assert trace["task_id"] == task
    assert {e["agent"] for e in trace["events"]} >= {"supervisor", "researcher"}
    assert sum(e["type"] == "tool_call" for e in trace["events"]) == 2
    assert trace["costs"]["tool_calls"] == 2
