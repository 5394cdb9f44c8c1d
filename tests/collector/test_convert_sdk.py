"""A real run of orchestrace's own SDK (decorators and orchestration calls) converted end to end."""

from __future__ import annotations

from collections.abc import Iterator

import orchestrace as ot
import pytest
from opentelemetry.sdk.trace import TracerProvider
from orchestrace.config import set_config
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.inprocess import span_from_readable
from written_traces import checked, edges_of, of_type


@pytest.fixture
def handle() -> Iterator[ot.TracingHandle]:
    handle = ot.configure(
        exporter="memory",
        tracer_provider=TracerProvider(shutdown_on_exit=False),
        batch=False,
        capture_content=True,
    )
    yield handle
    handle.shutdown()
    set_config(None)


@ot.tool
def search(query: str) -> str:
    return f"notes on {query}"


@ot.llm(model="fake-model", provider="test")
def think(prompt: str) -> str:
    ot.set_usage(input_tokens=10, output_tokens=4)
    return f"thoughts on {prompt}"


@ot.agent(role="researcher")
def researcher(topic: str) -> str:
    think(topic)
    return search(topic)


@ot.agent(role="lead")
def lead(question: str) -> str:
    think(question)
    ot.decide("plan", reason="two topics")
    ot.spawn("researcher", role="researcher")
    first = researcher("tides")
    second = researcher("moons")
    ot.message("researcher", "thanks")
    with ot.aggregate([first, second]) as merge:
        merged = f"{first}; {second}"
        merge.set_result(merged)
    ot.stop("answered")
    ot.reward(1.0, family="team")
    return merged


def test_sdk_run_converts_to_a_complete_trace(handle: ot.TracingHandle) -> None:
    with ot.task("task-sdk"):
        assert lead("what moves the sea?") == "notes on tides; notes on moons"
    handle.force_flush()
    episode = convert_episode([span_from_readable(s) for s in handle.get_finished_spans()])
    w = checked(episode)

    assert w["task_id"] == "task-sdk" and w["topology"] == "centralized"
    spawns = {(e["to"], e["to_activation"]): e for e in of_type(w, "spawn")}
    assert spawns["researcher", 1]["agent"] == "lead" and spawns["researcher", 2]["agent"] == "lead"
    decisions = {
        (e.get("decision"), e.get("label"), e.get("to"), e.get("to_activation"))
        for e in of_type(w, "orchestrator_decision")
    }
    # the explicit spawn became researcher 1's, the second call is a plain delegation; plus plan and stop
    assert {
        ("spawn", None, "researcher", 1),
        ("delegate", None, "researcher", 2),
        (None, "plan", None, None),
        ("stop", None, None, None),
    } <= decisions
    assert len(of_type(w, "despawn")) == 1
    agg = of_type(w, "aggregate")[0]
    researcher_returns = {e["id"] for e in of_type(w, "return") if e["agent"].startswith("researcher")}
    assert {src for src, dst in edges_of(w, "aggregate") if dst == agg["id"]} == researcher_returns
    assert [e["tool"] for e in of_type(w, "tool_call")] == ["search", "search"]
    message = of_type(w, "message")[0]
    assert message["from"] == "lead" and message["content_ref"].startswith("sha256:")
    assert episode.contents[message["content_ref"]]
    assert w["rewards"]["team"] == 1.0 and sum(e.get("credit", 0) for e in w["events"]) == pytest.approx(1.0)
    assert [(t.agent, t.activation, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("lead", 1, 10, 4),
        ("researcher", 1, 10, 4),
        ("researcher", 2, 10, 4),
    ]
    assert w["costs"]["tokens"] == 42 and w["costs"]["tool_calls"] == 2 and w["costs"]["messages"] == 1
    assert episode.turns[0].completion is not None
