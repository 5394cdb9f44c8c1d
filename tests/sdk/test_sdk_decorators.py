"""Every decorator kind on every kind of callable: spans, parents, preserved metadata, exceptions."""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import traceback
from collections.abc import AsyncIterator, Iterator

import orchestrace as ot
import pytest
from opentelemetry.trace import SpanKind, StatusCode
from orchestrace import semconv as sc
from orchestrace.config import set_config
from sdk_spans import Spans, configure_memory


def test_bare_and_called_forms_make_agent_spans(spans: Spans) -> None:
    @ot.agent
    def planner(goal: str) -> str:
        return goal.upper()

    @ot.agent("writer", role="author", agent_id="writer-1")
    def write(text: str) -> str:
        return text

    assert planner("x") == "X"
    assert write("y") == "y"
    plan, writer = spans.one("invoke_agent planner"), spans.one("invoke_agent writer")
    assert plan.kind == SpanKind.INTERNAL
    assert plan.attributes[sc.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert plan.attributes[sc.GEN_AI_AGENT_NAME] == "planner"
    assert str(plan.attributes[sc.GEN_AI_AGENT_ID]).startswith("planner-")
    assert len(str(plan.attributes[sc.GEN_AI_AGENT_ID])) == len("planner-") + 12
    assert writer.attributes[sc.GEN_AI_AGENT_ID] == "writer-1"
    assert writer.attributes[sc.ORCH_AGENT_ROLE] == "author"
    assert plan.attributes[sc.ORCH_INPUT_REF] == ot.content_ref("x")
    assert plan.attributes[sc.ORCH_OUTPUT_REF] == ot.content_ref("X")
    assert sc.GEN_AI_INPUT_MESSAGES not in plan.attributes  # capture is off


def test_every_call_is_a_fresh_agent_instance(spans: Spans) -> None:
    @ot.agent
    def worker() -> None:
        return None

    worker()
    worker()
    ids = {span.attributes[sc.GEN_AI_AGENT_ID] for span in spans.named("invoke_agent worker")}
    assert len(ids) == 2


def test_metadata_is_preserved() -> None:
    @ot.agent(role="r")
    async def coro(a: int, *, b: str = "x") -> str:
        """Coroutine doc."""
        return b * a

    @ot.tool
    def gen(n: int) -> Iterator[int]:
        yield from range(n)

    @ot.llm("m")
    async def agen(n: int) -> AsyncIterator[int]:
        yield n

    assert inspect.iscoroutinefunction(coro)
    assert str(inspect.signature(coro)) == "(a: 'int', *, b: 'str' = 'x') -> 'str'"
    assert coro.__doc__ == "Coroutine doc."
    assert coro.__name__ == "coro"
    assert inspect.isgeneratorfunction(gen)
    assert inspect.isasyncgenfunction(agen)
    assert not inspect.iscoroutinefunction(gen)


async def test_async_nesting_records_parent_agent(spans: Spans) -> None:
    @ot.agent
    async def child(x: int) -> int:
        await asyncio.sleep(0)
        return x + 1

    @ot.agent
    async def parent() -> int:
        return await child(1)

    assert await parent() == 2
    outer, inner = spans.one("invoke_agent parent"), spans.one("invoke_agent child")
    assert inner.parent is not None and inner.parent.span_id == outer.context.span_id
    assert inner.attributes[sc.ORCH_AGENT_PARENT_ID] == outer.attributes[sc.GEN_AI_AGENT_ID]
    assert sc.ORCH_AGENT_PARENT_ID not in outer.attributes


def test_tool_span(spans: Spans) -> None:
    @ot.tool(description="Adds two numbers.")
    def add(a: int, b: int) -> int:
        return a + b

    @ot.tool("lookup", trusted=True)
    def find(key: str, tool_call_id: str) -> str:
        """Looks a key up."""
        return key

    assert add(1, 2) == 3
    assert find("k", tool_call_id="call_7") == "k"
    added, found = spans.one("execute_tool add"), spans.one("execute_tool lookup")
    assert added.attributes[sc.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert added.attributes[sc.GEN_AI_TOOL_NAME] == "add"
    assert added.attributes[sc.GEN_AI_TOOL_TYPE] == "function"
    assert added.attributes[sc.GEN_AI_TOOL_DESCRIPTION] == "Adds two numbers."
    assert str(added.attributes[sc.GEN_AI_TOOL_CALL_ID]).startswith("call_")
    assert added.attributes[sc.ORCH_INPUT_REF] == ot.content_ref({"a": 1, "b": 2})
    assert added.attributes[sc.ORCH_OUTPUT_REF] == ot.content_ref(3)
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in added.attributes
    assert sc.ORCH_TOOL_TRUSTED not in added.attributes
    assert found.attributes[sc.GEN_AI_TOOL_CALL_ID] == "call_7"
    assert found.attributes[sc.GEN_AI_TOOL_DESCRIPTION] == "Looks a key up."
    assert found.attributes[sc.ORCH_TOOL_TRUSTED] is True


def test_tool_captures_arguments_and_result(captured: Spans) -> None:
    @ot.tool
    def search(query: str, limit: int = 3) -> list[str]:
        return [query] * limit

    search(query="otel", limit=2)
    span = captured.one("execute_tool search")
    assert span.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"limit":2,"query":"otel"}'
    assert span.attributes[sc.GEN_AI_TOOL_CALL_RESULT] == '["otel","otel"]'


def test_tool_arguments_by_signature_whatever_the_call_form(captured: Spans) -> None:
    """The same call is the same arguments, by parameter name with defaults filled in; ``*args`` a list,
    ``**kwargs`` merged, a method's instance and the ``tool_call_id`` keyword left out."""

    @ot.tool
    def add(a: int, b: int = 1) -> int:
        return a + b

    @ot.tool
    def many(first: int, *rest: int, flag: bool = False, tool_call_id: str = "", **extra: str) -> int:
        return first

    class Calculator:
        @ot.tool
        def double(self, x: int) -> int:
            return 2 * x

    for call in (lambda: add(2, 1), lambda: add(2, b=1), lambda: add(a=2, b=1), lambda: add(b=1, a=2),
                 lambda: add(2)):
        assert call() == 3
    many(1, 2, flag=True, tool_call_id="call_9", k="v")
    Calculator().double(5)
    written = [span.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] for span in captured.all]
    assert written == ['{"a":2,"b":1}'] * 5 + ['{"first":1,"flag":true,"k":"v","rest":[2]}', '{"x":5}']
    refs = {span.attributes[sc.ORCH_INPUT_REF] for span in captured.named("execute_tool add")}
    assert refs == {ot.content_ref({"a": 2, "b": 1})}


def test_methods_classmethods_staticmethods(spans: Spans) -> None:
    class Team:
        def __init__(self, prefix: str) -> None:
            self.prefix = prefix

        @ot.agent
        def member(self, x: str) -> str:
            return self.prefix + x

        @ot.tool
        @classmethod
        def make(cls, prefix: str) -> Team:
            return cls(prefix)

        @ot.tool
        @staticmethod
        def helper(x: int) -> int:
            return x * 2

        @classmethod
        @ot.agent("lead")
        def lead(cls) -> str:
            return cls.__name__

    team = Team.make("p-")
    assert isinstance(team, Team)
    assert team.member("x") == "p-x"
    assert Team.helper(2) == 4 and team.helper(3) == 6
    assert Team.lead() == "Team"
    assert len(spans.named("execute_tool make")) == 1
    assert len(spans.named("execute_tool helper")) == 2
    member = spans.one("invoke_agent member")
    assert member.attributes[sc.ORCH_INPUT_REF] == ot.content_ref("x")  # self is not part of the input
    assert len(spans.named("invoke_agent lead")) == 1


def test_generator_span_lasts_until_exhausted_and_is_current_only_inside(spans: Spans) -> None:
    @ot.tool
    def inner() -> int:
        return 1

    @ot.agent
    def stream(n: int) -> Iterator[int]:
        for i in range(n):
            inner()
            yield i
        return None

    generator = stream(3)
    assert spans.named("invoke_agent stream") == []  # starts at the first iteration
    assert next(generator) == 0
    assert spans.named("invoke_agent stream") == []  # still running
    assert ot.current_agent() is None  # not current between yields
    assert list(generator) == [1, 2]
    span = spans.one("invoke_agent stream")
    tools = spans.named("execute_tool inner")
    assert len(tools) == 3
    assert all(t.parent is not None and t.parent.span_id == span.context.span_id for t in tools)


def test_generator_closed_or_abandoned_ends_its_span(spans: Spans) -> None:
    closed_inside: list[bool] = []

    @ot.agent
    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed_inside.append(True)

    generator = endless()
    next(generator)
    generator.close()
    assert closed_inside == [True]
    assert len(spans.named("invoke_agent endless")) == 1

    abandoned = endless()
    next(abandoned)
    next(abandoned)
    del abandoned
    gc.collect()
    assert closed_inside == [True, True]
    assert len(spans.named("invoke_agent endless")) == 2
    assert all(s.status.status_code == StatusCode.UNSET for s in spans.named("invoke_agent endless"))


def test_generator_send_and_throw_are_forwarded(spans: Spans) -> None:
    @ot.agent
    def echo() -> Iterator[str]:
        received = yield "ready"
        while True:
            try:
                received = yield f"got {received}"
            except KeyError:
                received = "recovered"

    generator = echo()
    assert next(generator) == "ready"
    assert generator.send("a") == "got a"
    assert generator.throw(KeyError("k")) == "got recovered"
    generator.close()
    assert len(spans.named("invoke_agent echo")) == 1


async def test_async_generator_exhausted_closed_and_abandoned(spans: Spans) -> None:
    @ot.llm("stream-model")
    async def tokens(n: int) -> AsyncIterator[dict[str, object]]:
        for i in range(n):
            yield {"delta": str(i)}
        yield {"usage": {"input_tokens": 4, "output_tokens": n}}

    chunks = [chunk async for chunk in tokens(2)]
    assert len(chunks) == 3
    span = spans.one("chat stream-model")
    assert span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 4
    assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2

    early = tokens(5)
    await early.__anext__()
    await early.aclose()
    assert len(spans.named("chat stream-model")) == 2

    abandoned = tokens(5)
    await abandoned.__anext__()
    del abandoned
    gc.collect()
    for _ in range(100):  # the loop's finalizer runs aclose in a task of its own
        if len(spans.named("chat stream-model")) == 3:
            break
        await asyncio.sleep(0.01)
    assert len(spans.named("chat stream-model")) == 3


class Boom(Exception):
    pass


def _raise_boom() -> None:
    raise Boom("bad input")


def test_user_exception_passes_through_unchanged_and_is_recorded(spans: Spans) -> None:
    original = Boom("bad input")

    @ot.agent
    def failing() -> None:
        raise original

    @ot.tool
    def deep() -> None:
        _raise_boom()

    with pytest.raises(Boom) as info:
        failing()
    assert info.value is original
    with pytest.raises(Boom) as deep_info:
        deep()
    frames = [frame.name for frame in traceback.extract_tb(deep_info.value.__traceback__)]
    assert frames[-2:] == ["deep", "_raise_boom"]

    span = spans.one("invoke_agent failing")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "Boom"
    exception_events = [e for e in span.events if e.name == "exception"]
    assert exception_events and exception_events[0].attributes["exception.message"] == "bad input"


async def test_async_exception_and_cancellation_are_recorded(spans: Spans) -> None:
    @ot.agent
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("nope")

    @ot.agent
    async def slow() -> None:
        await asyncio.sleep(10)

    with pytest.raises(ValueError, match="nope"):
        await failing()
    task = asyncio.create_task(slow())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert spans.one("invoke_agent failing").status.status_code == StatusCode.ERROR
    assert spans.one("invoke_agent slow").status.status_code == StatusCode.ERROR


def test_generator_exception_is_recorded(spans: Spans) -> None:
    @ot.tool
    def broken() -> Iterator[int]:
        yield 1
        raise RuntimeError("mid-stream")

    with pytest.raises(RuntimeError, match="mid-stream"):
        list(broken())
    assert spans.one("execute_tool broken").status.status_code == StatusCode.ERROR


def test_task_decorator_and_context_manager(spans: Spans) -> None:
    @ot.agent
    def solo() -> str:
        return "ok"

    @ot.task(topology="single")
    def episode() -> str:
        return solo()

    assert episode() == "ok"
    with ot.task("task-7", topology="star", system="demo") as run:
        solo()
        run.set_success(True)
    assert run.task_id == "task-7"

    decorated = spans.one("invoke_workflow episode")
    assert decorated.attributes[sc.GEN_AI_OPERATION_NAME] == "invoke_workflow"
    assert decorated.attributes[sc.ORCH_TOPOLOGY] == "single"
    # No task id: the task is its own rollout, named by the episode's fresh id.
    assert decorated.attributes[sc.ORCH_TASK_ID] == decorated.attributes[sc.ORCH_EPISODE_ID]
    assert len(str(decorated.attributes[sc.ORCH_EPISODE_ID])) == 32
    block = spans.one("invoke_workflow task-7")
    assert block.attributes[sc.ORCH_EPISODE_ID] == run.episode_id != "task-7"
    assert block.attributes[sc.ORCH_TASK_ID] == "task-7"
    assert block.attributes[sc.ORCH_SYSTEM] == "demo"
    assert block.attributes[sc.ORCH_TASK_SUCCESS] == 1.0
    agents = spans.named("invoke_agent solo")
    assert {spans.parent_of(a).name for a in agents} == {"invoke_workflow episode", "invoke_workflow task-7"}  # type: ignore[union-attr]
    # The conversation is the episode (one rollout), never the task that groups rollouts.
    assert {a.attributes[sc.GEN_AI_CONVERSATION_ID] for a in agents} == {
        decorated.attributes[sc.ORCH_EPISODE_ID], run.episode_id}


@pytest.mark.parametrize("capture", [False, True])
def test_a_task_block_records_the_input_and_result_it_is_given(capture: bool) -> None:
    """A ``with ot.task`` block has no arguments: ``set_input`` records its input as ``set_result`` its
    output (refs always; with capture on the messages too, which Phoenix shows in its Input and Output
    panes, by the same rules as a decorated task's arguments and result)."""
    handle = configure_memory(capture_content=capture)
    try:
        with ot.task("task-8") as run:
            run.set_input("which moon is largest?")
            run.set_result("Ganymede")
        attributes = dict(Spans(handle).one("invoke_workflow task-8").attributes or {})
    finally:
        handle.shutdown()
        set_config(None)
    assert attributes.pop(sc.ORCH_INPUT_REF) == ot.content_ref("which moon is largest?")
    assert attributes.pop(sc.ORCH_OUTPUT_REF) == ot.content_ref("Ganymede")
    question = json.dumps([{"role": "user",
                            "parts": [{"type": "text", "content": "which moon is largest?"}]}])
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Ganymede"}],
                          "finish_reason": "stop"}])
    content = {sc.GEN_AI_INPUT_MESSAGES: question, sc.INPUT_VALUE: question, sc.INPUT_MIME_TYPE: sc.MIME_JSON,
               sc.GEN_AI_OUTPUT_MESSAGES: answer, sc.OUTPUT_VALUE: answer, sc.OUTPUT_MIME_TYPE: sc.MIME_JSON}
    assert {key: attributes[key] for key in content if key in attributes} == (content if capture else {})


async def test_async_task_block_and_bare_task(spans: Spans) -> None:
    @ot.task
    async def run() -> int:
        return 1

    assert await run() == 1
    async with ot.task() as block:
        pass
    with pytest.raises(KeyError), ot.task("failing"):
        raise KeyError("x")
    assert spans.one("invoke_workflow run").attributes[sc.GEN_AI_WORKFLOW_NAME] == "run"
    assert spans.one(f"invoke_workflow {block.task_id}")
    assert spans.one("invoke_workflow failing").status.status_code == StatusCode.ERROR


async def test_one_task_scope_entered_by_concurrent_tasks(spans: Spans) -> None:
    scope = ot.task(topology="centralized")

    @ot.agent
    async def step() -> None:
        await asyncio.sleep(0)

    async def episode(delay: float) -> str | None:
        async with scope as run:
            await asyncio.sleep(delay)  # the episodes end in the reverse order of their start
            await step()
            return run.task_id

    task_ids = await asyncio.gather(*(episode(0.01 * (3 - i)) for i in range(3)))
    assert len(set(task_ids)) == 3
    workflows = [s for s in spans.all if s.name.startswith("invoke_workflow ")]
    assert {s.attributes[sc.ORCH_TASK_ID] for s in workflows} == set(task_ids)
    for agent_span in spans.named("invoke_agent step"):
        parent = spans.parent_of(agent_span)
        assert parent is not None
        assert agent_span.attributes[sc.GEN_AI_CONVERSATION_ID] == parent.attributes[sc.ORCH_TASK_ID]
