"""The orchestrace SDK's own OTLP exporters (``ot.configure(exporter=...)``) sending to ``collect``."""

from __future__ import annotations

import textwrap

import pytest
from collector_fixtures import RunningCollector, run_into_collector, validate_trace_dir

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
    task = f"sdk-{exporter}"
    run_into_collector(collector, exporter, PROGRAM, task)
    (trace,) = validate_trace_dir(collector.out).values()
    assert trace["task_id"] == task
    assert {e["agent"] for e in trace["events"]} >= {"supervisor", "researcher"}
    assert sum(e["type"] == "tool_call" for e in trace["events"]) == 2
    assert trace["costs"]["tool_calls"] == 2
