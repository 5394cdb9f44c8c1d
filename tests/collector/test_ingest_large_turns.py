"""A model call near the default capture limit travels whole over OTLP (HTTP and gRPC) into the written turn:
the transport cuts nothing that reaches the training data."""

from __future__ import annotations

import textwrap

import pytest
from collector_fixtures import RunningCollector, run_into_collector, validate_trace_dir
from orchestrace_collector.output import latest_turns

PROGRAM = textwrap.dedent("""
    import sys
    import orchestrace as ot

    exporter, endpoint = sys.argv[1:3]
    handle = ot.configure("large-turns", exporter=exporter, endpoint=endpoint, capture_content=True)

    @ot.llm("big-model")
    def chat(messages):
        return "".join(m["content"] for m in messages)[::-1]

    @ot.agent
    def writer():
        # 7 messages, ~900 KB together: under the 1 MiB default, far over any 16 KiB cut
        chat([{"role": "user", "content": f"{i}:" + "ab" * 64_000} for i in range(7)])

    with ot.task("large"):
        writer()
    handle.shutdown()
""")


@pytest.mark.parametrize("exporter", ["otlp", "otlp-grpc"])
def test_a_large_call_reaches_the_turn_whole(collector: RunningCollector, exporter: str) -> None:
    run_into_collector(collector, exporter, PROGRAM)
    traces = validate_trace_dir(collector.out)
    (turns,) = latest_turns(collector.out, traces).values()
    (turn,) = turns
    prompt = [{"role": "user", "content": f"{i}:" + "ab" * 64_000} for i in range(7)]
    assert turn["prompt"] == prompt
    assert turn["completion"] == [
        {"role": "assistant", "content": "".join(m["content"] for m in prompt)[::-1]}
    ]
    assert "truncated" not in turn
