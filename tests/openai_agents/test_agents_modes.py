"""Every way to run an agent: the same spans, parented the same way, whatever the entry point."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orchestrace as ot
import pytest
from agents import Agent, Runner, trace
from agents_apps import TRIAGE_TOKENS, triage_app
from agents_spans import Spans
from opentelemetry import trace as otel_trace
from opentelemetry.trace import StatusCode
from orchestrace import semconv as sc
from written_traces import of_type

from examples.agents_fakes import ScriptedResponsesModel, say

MODES = ("run", "run_sync", "run_streamed")


async def run(agent: Agent[Any], text: str, mode: str) -> Any:
    if mode == "run":
        return (await Runner.run(agent, text)).final_output
    if mode == "run_sync":  # its own event loop, in a worker thread (this one already runs a loop)
        box: list[Any] = []
        worker = threading.Thread(target=lambda: box.append(Runner.run_sync(agent, text).final_output))
        worker.start()
        worker.join()
        return box[0]
    streamed = Runner.run_streamed(agent, text)
    async for _ in streamed.stream_events():
        pass
    return streamed.final_output


def check_triage(spans: Spans, workflows: int = 1) -> None:
    """Parents: workflow > agents (both: a handoff passes control within the run) > model calls and tools."""
    runs = spans.named("invoke_workflow Agent workflow")
    assert len(runs) == workflows
    run_ids = {r.context.span_id for r in runs}
    for name in ("triage", "math"):
        for agent in spans.named(f"invoke_agent {name}"):
            assert agent.parent is not None and agent.parent.span_id in run_ids
            assert agent.attributes[sc.GEN_AI_AGENT_NAME] == name
            assert agent.status.status_code == StatusCode.OK
    chats = spans.named("chat scripted-model")
    assert sorted(str(spans.parent_name(c)) for c in chats) == sorted(
        ["invoke_agent triage", "invoke_agent math", "invoke_agent math"] * workflows)
    tokens = [int(c.attributes[key]) for c in chats
              for key in (sc.GEN_AI_USAGE_INPUT_TOKENS, sc.GEN_AI_USAGE_OUTPUT_TOKENS)]
    assert sum(tokens) == TRIAGE_TOKENS * workflows
    for tool in spans.named("execute_tool add"):
        assert spans.parent_name(tool) == "invoke_agent math"
    assert all(s.end_time is not None for s in spans.all)


@pytest.mark.parametrize("mode", MODES)
async def test_every_run_mode(spans: Spans, mode: str) -> None:
    assert await run(triage_app(), "What is 2 + 3?", mode) == "2 + 3 = 5"
    check_triage(spans)
    written, episode = spans.convert()
    assert written["costs"]["tokens"] == TRIAGE_TOKENS
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("triage", 7, 3), ("math", 12, 6), ("math", 20, 4)]


async def test_runs_inside_one_user_trace_are_one_workflow(spans: Spans) -> None:
    with trace("support session"):
        await Runner.run(triage_app(), "first")
        await Runner.run(triage_app(), "second")
    (workflow,) = spans.named("invoke_workflow support session")
    agents = [s for s in spans.all if s.name.startswith("invoke_agent")]
    assert len(agents) == 4 and all(spans.parent(a) is workflow for a in agents)
    written, _ = spans.convert()
    assert written["costs"]["tokens"] == 2 * TRIAGE_TOKENS


async def test_under_a_user_span_and_an_ot_task(task_spans: Spans) -> None:
    spans = task_spans
    tracer = otel_trace.get_tracer("user", tracer_provider=spans.provider)
    with tracer.start_as_current_span("request"), ot.task("ticket-7") as task:
        await Runner.run(triage_app(), "What is 2 + 3?")
    workflow = spans.one("invoke_workflow Agent workflow")
    assert spans.parent_name(workflow) == "invoke_workflow ticket-7"
    assert spans.parent_name(spans.one("invoke_workflow ticket-7")) == "request"
    # The Agents SDK's run is a part of the user's task: the same episode, one written trace.
    assert workflow.attributes[sc.ORCH_EPISODE_ID] == task.episode_id
    written, _ = spans.convert()
    assert written["trace_id"] == task.episode_id and written["task_id"] == "ticket-7"
    assert written["costs"]["tokens"] == TRIAGE_TOKENS


async def test_concurrent_runs_keep_their_own_trees(spans: Spans) -> None:
    answers = await asyncio.gather(*(Runner.run(triage_app(), f"q{k}") for k in range(4)))
    assert [a.final_output for a in answers] == ["2 + 3 = 5"] * 4
    check_triage(spans, workflows=4)
    for workflow in spans.named("invoke_workflow Agent workflow"):
        episode = workflow.attributes[sc.ORCH_EPISODE_ID]
        inside = [s for s in spans.all if s.attributes.get(sc.GEN_AI_CONVERSATION_ID) == episode]
        assert sorted(s.name for s in inside if s.name.startswith("invoke_agent")) == [
            "invoke_agent math", "invoke_agent triage"]


def test_run_sync_from_plain_code(spans: Spans) -> None:
    assert Runner.run_sync(triage_app(), "What is 2 + 3?").final_output == "2 + 3 = 5"
    check_triage(spans)
    assert not otel_trace.get_current_span().get_span_context().is_valid  # nothing left attached


def writer() -> Agent[Any]:
    text = " ".join(f"word{k}" for k in range(40))
    return Agent(name="writer", model=ScriptedResponsesModel([say(text, input_tokens=9, output_tokens=40)]))


async def test_streaming_abandoned_half_way_and_cancelled(spans: Spans) -> None:
    streamed = Runner.run_streamed(writer(), "write")
    seen = 0
    async for event in streamed.stream_events():
        seen += event.type == "raw_response_event"
        if seen == 5:
            break
    streamed.cancel()
    await spans.settled("invoke_workflow Agent workflow")
    assert not streamed.is_complete or streamed.final_output is None
    names = sorted(s.name for s in spans.all)
    assert names == ["chat", "invoke_agent writer", "invoke_workflow Agent workflow"]
    assert all(s.end_time is not None for s in spans.all)
    # Between events the caller's code runs in its own context, not inside the run's spans.
    assert not otel_trace.get_current_span().get_span_context().is_valid
    written, episode = spans.convert()
    assert [e["type"] for e in written["events"]] == ["orchestrator_decision", "spawn", "return", "return"]
    assert episode.turns[0].output_tokens is None  # the reply never completed


async def test_streaming_abandoned_without_cancel_runs_to_its_end(spans: Spans) -> None:
    async def read_one() -> None:
        async for _ in Runner.run_streamed(writer(), "write").stream_events():
            break

    await read_one()
    await spans.settled("invoke_workflow Agent workflow")
    chat = spans.one("chat scripted-model")
    assert chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 40
    written, _ = spans.convert()
    assert written["costs"]["tokens"] == 49 and len(of_type(written, "return")) == 2
