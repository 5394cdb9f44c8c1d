"""Parents across asyncio tasks, thread pools and processes, with 50 concurrent sub-agents."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import orchestrace as ot
from opentelemetry import trace
from orchestrace import semconv as sc
from sdk_spans import Spans

N = 50


def _check_children(spans: Spans, parent_name: str, child_name: str) -> None:
    """Every child span has the parent span as parent and the parent agent's id as parent_id."""
    parent = spans.one(parent_name)
    children = [c for c in spans.named(child_name) if c.parent and c.parent.span_id == parent.context.span_id]
    assert len(children) == N
    for child in children:
        assert child.context.trace_id == parent.context.trace_id
        assert child.attributes[sc.ORCH_AGENT_PARENT_ID] == parent.attributes[sc.GEN_AI_AGENT_ID]
        tools = [t for t in spans.named("execute_tool probe")
                 if t.parent and t.parent.span_id == child.context.span_id]
        assert len(tools) == 1  # the sub-agent's own tool call is its child, not a sibling's


@ot.tool
def probe(i: int) -> int:
    return i


async def test_fifty_concurrent_subagents_with_gather_and_taskgroup(spans: Spans) -> None:
    @ot.agent
    async def sub(i: int) -> int:
        await asyncio.sleep(0.001 * (i % 5))  # interleave
        return probe(i)

    @ot.agent
    async def gatherer() -> list[int]:
        return list(await asyncio.gather(*(sub(i) for i in range(N))))

    @ot.agent
    async def grouper() -> int:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(sub(i)) for i in range(N)]
        return sum(t.result() for t in tasks)

    await asyncio.gather(gatherer(), grouper())
    assert len(spans.named("invoke_agent sub")) == 2 * N  # every sub-agent is under one of the two
    assert len({s.attributes[sc.GEN_AI_AGENT_ID] for s in spans.named("invoke_agent sub")}) == 2 * N
    for name in ("invoke_agent gatherer", "invoke_agent grouper"):
        _check_children(spans, name, "invoke_agent sub")


def test_fifty_subagents_in_threads(spans: Spans) -> None:
    barrier = threading.Barrier(10)

    @ot.agent
    def sub(i: int) -> int:
        if i < 10:
            barrier.wait(timeout=10)  # force real concurrency among the first ten
        return probe(i)

    @ot.agent
    def pooled() -> list[int]:
        with ot.ThreadPoolExecutor(max_workers=10) as pool:
            return list(pool.map(sub, range(N)))

    @ot.agent
    def wrapped() -> list[int]:
        with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
            futures = [pool.submit(ot.wrap_context(sub), i) for i in range(N)]
            return [f.result() for f in futures]

    assert pooled() == list(range(N))
    barrier.reset()
    assert wrapped() == list(range(N))
    for name in ("invoke_agent pooled", "invoke_agent wrapped"):
        _check_children(spans, name, "invoke_agent sub")


def test_plain_executor_without_the_helper_loses_the_parent(spans: Spans) -> None:
    """Documents why ``ot.ThreadPoolExecutor`` / ``ot.wrap_context`` exist."""

    @ot.agent
    def sub() -> None:
        return None

    @ot.agent
    def boss() -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(sub).result()

    boss()
    assert spans.one("invoke_agent sub").parent is None


CHILD = """
import json, sys
import orchestrace as ot
handle = ot.configure("child", exporter="file:" + sys.argv[1], batch=False)

@ot.agent
def remote_worker() -> str:
    return "done"

with ot.attach(json.loads(sys.stdin.read())):
    remote_worker()
handle.shutdown()
"""


def test_context_crosses_a_process_boundary(spans: Spans, tmp_path: Path) -> None:
    out = tmp_path / "child.jsonl"

    @ot.agent
    def parent_agent() -> dict[str, str]:
        carrier = ot.inject()
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        subprocess.run([sys.executable, "-c", CHILD, str(out)], input=json.dumps(carrier), text=True,
                       check=True, env=env, timeout=120)
        return carrier

    carrier = parent_agent()
    assert carrier["traceparent"].startswith("00-")
    parent = spans.one("invoke_agent parent_agent")
    (line,) = out.read_text().splitlines()
    (child,) = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert child["name"] == "invoke_agent remote_worker"
    assert child["traceId"] == format(parent.context.trace_id, "032x")
    assert child["parentSpanId"] == format(parent.context.span_id, "016x")
    attributes = {a["key"]: a["value"].get("stringValue") for a in child["attributes"]}
    assert attributes[sc.ORCH_AGENT_PARENT_ID] == parent.attributes[sc.GEN_AI_AGENT_ID]


def test_extract_of_an_empty_carrier_is_harmless(spans: Spans) -> None:
    @ot.agent
    def lonely() -> None:
        return None

    with ot.attach({}):
        lonely()
    with ot.attach({"traceparent": "garbage"}):
        lonely()
    assert [s.parent for s in spans.named("invoke_agent lonely")] == [None, None]
    assert ot.inject() == {}


def _waits(span: object) -> list[tuple[int, int]]:
    flat = list(span.attributes.get(sc.ORCH_WAITS, ()))  # type: ignore[attr-defined]
    return list(zip(flat[::2], flat[1::2], strict=True))


def test_work_handed_to_the_pool_runs_beside_its_parent_which_records_its_waits(spans: Spans) -> None:
    """A sub-agent submitted to ``ot.ThreadPoolExecutor`` runs beside the lead (``orchestrace.concurrent``),
    what the sub-agent and the lead call themselves does not; the lead's blocking ``result()`` is a wait, a
    ``result()`` of a done future is none, and the sub-agent's exception reaches the lead unchanged."""
    release = threading.Event()
    raised = ValueError("the user's own")

    @ot.agent
    def sub(i: int) -> int:
        release.wait(timeout=10)
        if i < 0:
            raise raised
        return probe(i)

    @ot.agent
    def lead() -> int:
        with ot.ThreadPoolExecutor(max_workers=2) as pool:
            slow, failing = pool.submit(sub, 1), pool.submit(sub, -1)
            probe(0)  # the lead's own call while they wait
            threading.Timer(0.1, release.set).start()
            total = slow.result()
            try:
                failing.result()
            except ValueError as exc:
                assert exc is raised
            return total

    assert lead() == 1
    boss = spans.one("invoke_agent lead")
    assert all(s.attributes[sc.ORCH_CONCURRENT] is True for s in spans.named("invoke_agent sub"))
    assert not [s for s in spans.named("execute_tool probe") if sc.ORCH_CONCURRENT in s.attributes]
    assert sc.ORCH_CONCURRENT not in boss.attributes
    waits = _waits(boss)
    assert boss.start_time <= waits[0][0] and waits[-1][1] <= boss.end_time  # type: ignore[operator]
    # One blocked stretch (the second result() and leaving the pool follow it within a millisecond).
    assert len(waits) == 1 and 0.08e9 <= waits[0][1] - waits[0][0] < 1e9, waits


def test_a_future_already_done_is_no_wait_and_a_long_map_a_short_list(spans: Spans) -> None:
    @ot.agent
    def sub(i: int) -> int:
        return probe(i)

    @ot.agent
    def lead() -> tuple[bool, int]:
        with ot.ThreadPoolExecutor(max_workers=1) as pool:
            done = pool.submit(sub, 0)
            concurrent.futures.wait([done])
            done.result()  # nothing left to wait for
            waits = _waits(trace.get_current_span())
            return waits, sum(pool.map(sub, range(N)))

    assert lead() == ([], sum(range(N)))  # it hands work out, and has not waited for it
    # N results waited for one after another, a few microseconds apart: one wait, or a few.
    assert 1 <= len(_waits(spans.one("invoke_agent lead"))) < 10


async def test_gather_runs_its_awaitables_beside_the_caller_and_records_the_wait(spans: Spans) -> None:
    @ot.agent
    async def sub(i: int) -> int:
        await asyncio.sleep(0.05)
        if i < 0:
            raise ValueError(i)
        return probe(i)

    @ot.agent
    async def lead() -> list[object]:
        got: list[object] = await ot.gather(sub(1), sub(2))
        await asyncio.sleep(0.01)  # the lead's own work between the two
        got += await ot.gather(sub(-1), return_exceptions=True)
        probe(3)  # after the gather: the lead's own call again
        return got

    got = await lead()
    assert got[:2] == [1, 2] and isinstance(got[2], ValueError)
    assert all(s.attributes[sc.ORCH_CONCURRENT] is True for s in spans.named("invoke_agent sub"))
    assert not [s for s in spans.named("execute_tool probe") if sc.ORCH_CONCURRENT in s.attributes]
    waits = _waits(spans.one("invoke_agent lead"))
    assert len(waits) == 2 and all(end - start >= 0.04e9 for start, end in waits), waits


def test_wrap_context_runs_beside_and_nothing_is_recorded_outside_a_span(spans: Spans) -> None:
    @ot.agent
    def sub() -> None:
        return None

    @ot.agent
    def lead() -> None:
        thread = threading.Thread(target=ot.wrap_context(sub))
        thread.start()
        thread.join()

    lead()
    assert spans.one("invoke_agent sub").attributes[sc.ORCH_CONCURRENT] is True
    with ot.ThreadPoolExecutor(max_workers=1) as pool:  # no span: nothing to record on, nothing raised
        assert pool.submit(sub).result() is None
    assert sc.ORCH_CONCURRENT not in spans.named("invoke_agent sub")[-1].attributes


def test_leaving_the_pool_while_its_work_runs_is_a_wait(spans: Spans) -> None:
    @ot.agent
    def lead() -> None:
        with ot.ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(time.sleep, 0.05)

    lead()
    ((start, end),) = _waits(spans.one("invoke_agent lead"))
    assert end - start >= 0.04e9
