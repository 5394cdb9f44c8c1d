"""A long episode reaches the trace whole: every span through a collector whose body limit its batches exceed
(the exporter splits what is refused as too large), each turn's prompt rebuilt from history references, and
what is really lost counted on both sides."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orchestrace as ot
import pytest
from collector_fixtures import RunningCollector, start_collector, validate_trace_dir
from orchestrace.config import set_config
from orchestrace.exporters import ENV_MAX_REQUEST_BYTES
from orchestrace_collector.output import latest_turns
from sdk_spans import new_provider

Prompt = list[dict[str, Any]]
#: The collector's body limit here (MiB): a few dozen turns' spans are more.
BODY_MB = 0.1
#: The exporter's request limit over gRPC, under the collector's body limit.
GRPC_LIMIT = 50_000


def _episode(turns: int, reply_bytes: int) -> list[Prompt]:
    """An ``@ot.llm`` agent loop in one rewarded task: each call's prompt is the whole history so far.
    Returns the prompts the model received."""
    received: list[Prompt] = []

    @ot.llm("m")
    def model(messages: Prompt) -> str:
        received.append(list(messages))
        return f"reply {len(received)} " + "x" * reply_bytes

    @ot.agent
    def solver() -> None:
        history: Prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
        for k in range(turns):
            reply = model(history)
            history += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"next {k}"}]

    with ot.task("long-task"):
        solver()
        ot.reward(1.0)
    return received


def _collector(tmp_path: Path) -> RunningCollector:
    return start_collector(tmp_path / "collected", "--quiet-period", "0.2", "--max-body-mb", str(BODY_MB))


def _chat(prompt: Prompt) -> Prompt:
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


def _check_turns(out: Path, received: list[Prompt]) -> None:
    traces = validate_trace_dir(out)
    (trace,) = traces.values()
    assert trace["task_id"] == "long-task" and trace["rewards"]["team"] == 1.0
    turns = latest_turns(out, traces)[trace["trace_id"]]
    assert len(turns) == len(received)
    for turn, prompt in zip(turns, received, strict=True):
        assert turn["prompt"] == _chat(prompt)
        assert not turn.get("truncated") and not turn.get("prompt_incomplete")


@pytest.mark.slow
def test_a_long_episode_is_written_whole_through_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """300 turns through the real OTLP exporter to a collector refusing bodies over 0.1 MiB (the SDK's own
    limit is above it: the refused batches are split), to trace_dir and to a span dump converted offline."""
    monkeypatch.setenv(ENV_MAX_REQUEST_BYTES, str(1 << 20))
    collector = _collector(tmp_path)
    dump = tmp_path / "spans.jsonl"
    handle = ot.configure(exporter=["otlp", f"file:{dump}"], endpoint=collector.base_url,
                          trace_dir=tmp_path / "trace_dir", tracer_provider=new_provider(),
                          capture_content=True)
    try:
        with caplog.at_level(logging.ERROR, logger="orchestrace"):
            received = _episode(300, 1000)
            assert handle.force_flush()
        assert handle.dropped_spans == 0 and "dropped span" not in caplog.text
    finally:
        handle.shutdown()
        set_config(None)
        assert collector.stop() == 0
    assert "requests refused as too large (413)" in collector.log_text()  # then split: nothing lost
    converted = tmp_path / "converted"
    done = subprocess.run([sys.executable, "-m", "orchestrace_collector.cli", "convert", str(dump), "--out",
                           str(converted)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    for out in (collector.out, tmp_path / "trace_dir", converted):
        _check_turns(out, received)
    # The history went out once: the dump is linear in the episode's content (each reply once, or twice
    # counting the next prompt that names it), not the quadratic sum of its prompts.
    content = sum(len(json.dumps(m)) for m in received[-1])
    assert dump.stat().st_size < 4 * content


@pytest.mark.parametrize("exporter", ["otlp", "otlp-grpc"])
def test_a_span_too_large_alone_goes_without_its_content_and_the_rest_arrives(
        exporter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Over HTTP the collector refuses the request (413) and the exporter splits it; gRPC cannot tell a
    request refused for its size (it retries until its timeout), so there the exporter's own limit splits."""
    grpc = exporter == "otlp-grpc"
    if grpc:
        collector, handle = _grpc_configure(tmp_path, monkeypatch)
    else:
        monkeypatch.setenv(ENV_MAX_REQUEST_BYTES, str(1 << 20))
        collector = _collector(tmp_path)
        handle = ot.configure(exporter="otlp", endpoint=collector.base_url, tracer_provider=new_provider(),
                              capture_content=True)

    @ot.tool
    def store(blob: str) -> int:
        return len(blob)

    try:
        with caplog.at_level(logging.ERROR, logger="orchestrace"):
            with ot.task("big-tool"):
                received = _episode(3, 100)
                store("y" * int(BODY_MB * 2 * (1 << 20)))  # one span twice the body limit
                ot.reward(0.5)
            handle.force_flush()
        assert (handle.cut_spans, handle.dropped_spans) == (1, 0)
        assert caplog.text.count("sending without its content span 'execute_tool store'") == 1
        assert (f"over the {GRPC_LIMIT}-byte request limit" if grpc
                else "refused as too large by the receiver (413)") in caplog.text
    finally:
        handle.shutdown()
        set_config(None)
        assert collector.stop() == 0
    traces = validate_trace_dir(collector.out)
    (trace,) = traces.values()
    assert trace["task_id"] == "big-tool" and trace["rewards"]["team"] == 0.5
    assert len(latest_turns(collector.out, traces)[trace["trace_id"]]) == len(received)
    (call,) = [event for event in trace["events"] if event["type"] == "tool_call"]
    assert call["tool"] == "store" and call["content_ref"].startswith("sha256:")  # its ref, not its content
    if not grpc:
        assert re.search(r"[1-9][0-9]* requests refused as too large \(413\)", collector.log_text())


def test_a_span_too_large_even_without_content_is_dropped_and_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(ENV_MAX_REQUEST_BYTES, "100")  # below any span
    collector = _collector(tmp_path)
    handle = ot.configure(exporter="otlp", endpoint=collector.base_url, tracer_provider=new_provider(),
                          capture_content=True)
    try:
        with caplog.at_level(logging.ERROR, logger="orchestrace"):
            _episode(2, 10)
            handle.force_flush()
        spans = 4  # the task, the agent, two model calls
        assert handle.dropped_spans == handle.cut_spans == spans
        assert caplog.text.count("orchestrace: dropped span") == 1
    finally:
        handle.shutdown()
        set_config(None)
        assert collector.stop() == 0
    assert not list(collector.out.glob("traces*.jsonl"))  # nothing arrived: nothing written



def _grpc_configure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunningCollector, Any]:
    assert GRPC_LIMIT < BODY_MB * (1 << 20)
    monkeypatch.setenv(ENV_MAX_REQUEST_BYTES, str(GRPC_LIMIT))
    collector = _collector(tmp_path)
    return collector, ot.configure(exporter="otlp-grpc", endpoint=f"http://{collector.grpc_endpoint}",
                                   tracer_provider=new_provider(), capture_content=True)


def test_over_grpc_the_exporters_limit_splits_batches(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """gRPC cannot tell a request refused for its size (it retries until its timeout), so the exporter's own
    limit is what splits: every turn arrives whole."""
    collector, handle = _grpc_configure(tmp_path, monkeypatch)
    try:
        received = _episode(30, 3000)  # 90 KB of replies: batches over the limit
        assert handle.force_flush()
        assert (handle.cut_spans, handle.dropped_spans) == (0, 0)
    finally:
        handle.shutdown()
        set_config(None)
        assert collector.stop() == 0
    _check_turns(collector.out, received)

