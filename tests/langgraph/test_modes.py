"""Every execution mode: one workflow span per run, nodes under it, model calls and user spans under nodes."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Sequence

import pytest
from fakes import ScriptedChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from opentelemetry import trace
from orchestrace import semconv as sc
from sample_graphs import USER_SPAN, parallel, pipeline
from span_checks import Spans

INPUT = {"messages": [HumanMessage("hi")], "threads": []}


def check_run(spans: Spans, workflow_name: str = "invoke_workflow pipeline", runs: int = 1) -> None:
    workflows = spans.named(workflow_name)
    assert len(workflows) == runs
    ids = {w.context.span_id for w in workflows}
    for w in workflows:
        assert w.parent is None
        assert w.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_INVOKE_WORKFLOW
    for node in ("a", "b", "c"):
        found = spans.named(node)
        assert len(found) == runs, node
        for s in found:
            assert s.parent is not None and s.parent.span_id in ids
            assert s.attributes[sc.ORCH_OPERATION] == sc.OPERATION_NODE
    chats = spans.named("chat scripted-model")
    assert len(chats) == runs
    for chat in chats:
        assert spans.parent_name(chat) == "a"
        assert chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    for user in spans.named(USER_SPAN):
        assert spans.parent_name(user) == "a"
    # every node of a run sits under that run's workflow span
    for w in workflows:
        children = [s for s in spans.all if s.parent is not None and s.parent.span_id == w.context.span_id]
        assert sorted(s.name for s in children) == ["a", "b", "c"]


def test_invoke(spans: Spans) -> None:
    out = pipeline(spans.provider).invoke(INPUT)
    assert out["messages"][-1].content == "c"
    check_run(spans)


async def test_ainvoke(spans: Spans) -> None:
    await pipeline(spans.provider).ainvoke(INPUT)
    check_run(spans)


def test_stream(spans: Spans) -> None:
    chunks = list(pipeline(spans.provider).stream(INPUT, stream_mode="updates"))
    assert [next(iter(c)) for c in chunks] == ["a", "b", "c"]
    check_run(spans)


async def test_astream(spans: Spans) -> None:
    chunks = [c async for c in pipeline(spans.provider).astream(INPUT, stream_mode="updates")]
    assert len(chunks) == 3
    check_run(spans)


async def test_astream_events(spans: Spans) -> None:
    kinds = {e["event"] async for e in pipeline(spans.provider).astream_events(INPUT, version="v2")}
    assert "on_chat_model_end" in kinds
    check_run(spans)


def test_batch(spans: Spans) -> None:
    outs = pipeline(spans.provider).batch([INPUT, INPUT, INPUT])
    assert len(outs) == 3
    check_run(spans, runs=3)


async def test_abatch(spans: Spans) -> None:
    await pipeline(spans.provider).abatch([INPUT, INPUT])
    check_run(spans, runs=2)


def test_stream_messages_mode_keeps_usage(spans: Spans) -> None:
    tokens = [m.content for m, _ in pipeline(spans.provider).stream(INPUT, stream_mode="messages")
              if getattr(m, "content", None)]
    assert "".join(tokens[:3]).startswith("reply")  # really streamed token by token
    chat = spans.one("chat scripted-model")
    assert chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3  # "reply to hi"
    assert chat.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 1
    check_run(spans)


def test_stream_early_break_ends_every_span(spans: Spans) -> None:
    stream = pipeline(spans.provider).stream(INPUT, stream_mode="updates")
    for chunk in stream:
        # between chunks the caller's code runs in its own context, not in the graph's span
        assert not trace.get_current_span().get_span_context().is_valid
        assert "a" in chunk
        break
    stream.close()
    workflow = spans.one("invoke_workflow pipeline")
    assert workflow.end_time is not None
    assert workflow.status.status_code != trace.StatusCode.ERROR
    assert spans.named("c") == []  # the run really stopped early


def test_stream_abandoned_is_ended_by_garbage_collection(spans: Spans) -> None:
    def consume_one() -> None:
        for _ in pipeline(spans.provider).stream(INPUT, stream_mode="updates"):
            break

    consume_one()
    gc.collect()
    assert len(spans.named("invoke_workflow pipeline")) == 1


async def test_astream_early_break(spans: Spans) -> None:
    stream = pipeline(spans.provider).astream(INPUT, stream_mode="updates")
    async for _ in stream:
        assert not trace.get_current_span().get_span_context().is_valid
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert len(spans.named("invoke_workflow pipeline")) == 1
    assert spans.named("c") == []


async def test_astream_abandoned_is_ended(spans: Spans) -> None:
    async def consume_one() -> None:
        async for _ in pipeline(spans.provider).astream(INPUT, stream_mode="updates"):
            break

    await consume_one()
    # the event loop's async-generator hook closes the abandoned stream in a task of its own
    for _ in range(50):
        gc.collect()
        await asyncio.sleep(0.01)
        if spans.named("invoke_workflow pipeline"):
            break
    assert len(spans.named("invoke_workflow pipeline")) == 1


def check_parallel(spans: Spans, width: int) -> None:
    workflow = spans.one("invoke_workflow parallel")
    for i in range(width):
        node = spans.one(f"branch{i}")
        assert node.parent is not None and node.parent.span_id == workflow.context.span_id
        users = [u for u in spans.named(USER_SPAN) if u.attributes["node"] == f"branch{i}"]
        assert len(users) == 1 and spans.parent(users[0]) is node
    chats = spans.named("chat scripted-model")
    assert len(chats) == width
    # each model call sits under the branch whose message it answered
    for chat in chats:
        parent = spans.parent(chat)
        assert parent is not None and parent.name.startswith("branch")
    join = spans.one("join")
    assert spans.parent(join) is workflow


def test_thread_pool_parallel_nodes(spans: Spans) -> None:
    out = parallel(spans.provider, use_async=False).invoke(INPUT)
    assert threading.get_ident() not in out["threads"]  # the branches really ran in worker threads
    check_parallel(spans, 3)


async def test_asyncio_parallel_nodes(spans: Spans) -> None:
    await parallel(spans.provider, use_async=True, width=4).ainvoke(INPUT)
    check_parallel(spans, 4)


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_graph_under_a_user_span(spans: Spans, mode: str) -> None:
    graph = pipeline(spans.provider)
    with trace.get_tracer("user", tracer_provider=spans.provider).start_as_current_span("request") as request:
        graph.invoke(INPUT) if mode == "invoke" else list(graph.stream(INPUT))
    workflow = spans.one("invoke_workflow pipeline")
    assert workflow.parent is not None and workflow.parent.span_id == request.get_span_context().span_id


def test_model_span_covers_the_call(spans: Spans) -> None:
    # The span is started when the call ends, with the call's start time: the model runs inside its window.
    replied_at: list[int] = []

    def respond(messages: Sequence[BaseMessage]) -> AIMessage:
        replied_at.append(time.time_ns())
        return AIMessage("ok")

    llm = ScriptedChatModel(respond=respond)
    g = StateGraph(MessagesState)
    g.add_node("ask", lambda state: {"messages": [llm.invoke(state["messages"])]})
    g.add_edge(START, "ask")
    g.compile(name="timed").invoke({"messages": [HumanMessage("hi")]})
    chat, node = spans.one("chat scripted-model"), spans.one("ask")
    assert chat.start_time is not None and chat.end_time is not None
    assert node.start_time is not None and node.end_time is not None
    assert node.start_time <= chat.start_time < replied_at[0] < chat.end_time <= node.end_time
    assert spans.parent(chat) is node


def test_failed_model_call_has_an_error_span(spans: Spans) -> None:
    def respond(messages: Sequence[BaseMessage]) -> AIMessage:
        raise ValueError("model down")

    llm = ScriptedChatModel(respond=respond)
    with pytest.raises(ValueError, match="model down"):
        llm.invoke([HumanMessage("hi")])
    chat = spans.one("chat scripted-model")
    assert chat.status.status_code == trace.StatusCode.ERROR
    assert [e.name for e in chat.events] == ["exception"]
    assert chat.attributes[sc.ORCH_INPUT_REF].startswith("sha256:")
