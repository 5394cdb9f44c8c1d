"""Ground truth: apps whose true answer is known by construction, compared with what was written in-process
(``trace_dir``), offline (``convert``) and through ``collect`` alike."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orchestrace as ot
import pytest
from collector_fixtures import RunningCollector
from ground_truth_apps import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    UNITS_REWARDS,
    UNITS_TURNS,
    WAYS,
    ask,
    handing_out_app,
    parallel_app,
    run_three_ways,
    search,
    tokens_by_agent,
    units_app,
)
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.trace import Link, SpanKind, set_span_in_context


def channel_sums(turns: list[dict[str, Any]]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    for turn in turns:
        for key, share in (turn.get("credit") or {}).items():
            sums[key] += share
    return dict(sums)


def test_rollouts_of_one_task_are_episodes_of_their_own(tmp_path: Path, collector: RunningCollector) -> None:
    episode_ids: dict[float, str] = {}

    @ot.agent
    def solver(value: float) -> float:
        ask(f"solve {value}")
        return value

    def rollout(value: float) -> None:
        with ot.task("grpo-task") as run:
            solver(value)
            ot.reward(value, family="team")
        assert run.episode_id is not None
        episode_ids[value] = run.episode_id

    def app() -> None:
        for value in (1.0, 0.0, 0.5):  # one after the other
            rollout(value)
        threads = [threading.Thread(target=rollout, args=(v,)) for v in (0.25, 0.75, 0.125)]  # at once
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    outputs = run_three_ways(tmp_path, collector, app)
    for way in WAYS:
        traces = outputs[way].traces
        assert set(traces) == set(episode_ids.values()), way  # trace_id = the episode id the block returned
        for value, episode in episode_ids.items():
            trace = traces[episode]
            assert trace["task_id"] == "grpo-task"  # the group of the rollouts
            assert trace["rewards"]["team"] == value, way
            turns = outputs[way].turns[episode]
            assert len(turns) == 1 and turns[0]["reward"] == pytest.approx(value)


def test_rewards_of_every_unit_land_on_their_turns_and_add_up(tmp_path: Path,
                                                             collector: RunningCollector) -> None:
    outputs = run_three_ways(tmp_path, collector, units_app)
    for way in WAYS:
        trace, turns = outputs[way].only()
        rewards = trace["rewards"]
        assert {k: rewards[k] for k in UNITS_REWARDS} == pytest.approx(UNITS_REWARDS), way
        assert len(turns) == UNITS_TURNS
        # Every channel is carried whole by the turns file.
        assert channel_sums(turns) == pytest.approx(UNITS_REWARDS), way
        for turn in turns:
            assert turn["reward"] == pytest.approx(sum(turn["credit"].values()))
        assert sum(t["reward"] for t in turns) == pytest.approx(sum(UNITS_REWARDS.values()))

        by_agent: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)  # by activation
        for turn in turns:
            by_agent[turn["agent"], turn["activation"]].append(turn)
        first, second = sorted(a for a in by_agent if a[0] == "writer")
        # The agent reward with target "writer" lands on the writer that had just finished, the handle's on
        # the writer that recorded it; neither reaches the lead.
        assert [t["credit"]["individual"] for t in by_agent[first]] == pytest.approx([0.3, 0.3])
        assert [t["credit"]["individual"] for t in by_agent[second]] == pytest.approx([0.15, 0.15])
        assert rewards["agent:writer"] == pytest.approx(0.9)  # keys name the agent: its activations add up
        assert not any("#" in key for key in rewards)
        lead = sorted(by_agent["units_lead", 1], key=lambda t: t["t"])
        assert all("individual" not in t["credit"] for t in lead)
        # The role reward is shared by the writers' turns; the tool reward goes to the turn that asked for
        # the tool (the lead's first); the process reward stays on the call that recorded it.
        assert [t["credit"].get("role", 0) for t in by_agent[first] + by_agent[second]] == [0.125] * 4
        assert [t["credit"].get("tool", 0) for t in lead] == pytest.approx([-0.2, 0, 0])
        assert [t["credit"].get("process", 0) for t in lead] == pytest.approx([0, 0.25, 0])
        # Team-unit channels split over the causal turns (all of them here).
        assert [t["credit"]["team"] for t in turns] == pytest.approx([1 / UNITS_TURNS] * UNITS_TURNS)
        assert sum(rewards[k] for k in rewards if k.startswith("credit:agent:")) == pytest.approx(
            sum(UNITS_REWARDS.values()))
        # Tokens: known per call; events, turns and costs agree.
        per_call = PROMPT_TOKENS + COMPLETION_TOKENS
        assert trace["costs"]["tokens"] == per_call * UNITS_TURNS
        assert sum(e.get("tokens", 0) for e in trace["events"]) == per_call * UNITS_TURNS
        assert all(t["input_tokens"] == PROMPT_TOKENS and t["t_end"] >= t["t"] for t in turns)
        assert trace["metrics"]["revision"] == 0 and isinstance(trace["metrics"]["revision"], int)


def test_bad_rewards_are_rejected_loudly_and_counted(tmp_path: Path, collector: RunningCollector,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    before = ot.rejected_rewards()

    @ot.agent
    def judged() -> None:
        ask("work")
        ot.reward(math.nan)
        ot.reward(-math.inf, family="team")
        ot.reward("high", family="team")  # type: ignore[arg-type]
        ot.reward(1.0, family="bonus")
        ot.reward(1.0, unit="planet")
        ot.reward(0.5, unit="agent", target="nobody")  # no such agent: refused by the collector
        ot.reward(1.0, family="team")

    def app() -> None:
        ot.reward(1.0)  # outside any episode
        with ot.task("bad-rewards"):
            judged()

    outputs = run_three_ways(tmp_path, collector, app)
    after = ot.rejected_rewards()
    assert {k: after[k] - before.get(k, 0) for k in after} == {
        "not_finite": 2, "not_a_number": 1, "unknown_family": 1, "unknown_unit": 1, "outside_episode": 1}
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert trace["rewards"]["team"] == 1.0
        assert not any("nobody" in key for key in trace["rewards"])  # no phantom key
        metrics = trace["metrics"]
        assert metrics["rejected_rewards"] == 6
        assert (metrics["rejected_rewards:not_finite"], metrics["rejected_rewards:no_target"]) == (2, 1)
        assert turns[0]["reward"] == 1.0
    assert "reward rejected (not_finite)" in caplog.text


def test_causal_credit_gives_nothing_to_a_branch_nobody_used(tmp_path: Path,
                                                             collector: RunningCollector) -> None:
    @ot.agent
    def worker(name: str) -> str:
        ask(name)
        return f"result of {name}"

    @ot.agent
    def lead() -> str:
        with ot.ThreadPoolExecutor(3) as pool:
            used, also_used, _ignored = pool.map(worker, ["w1", "w2", "w3"])
        with ot.aggregate([used, also_used]) as merge:  # the third result is never read
            merge.set_result(answer := used + also_used)
        ot.reward(1.0, family="team")
        return answer

    def app() -> None:
        with ot.task("ignored-branch"):
            lead()

    for credit, expected in (("causal", [0.5, 0.5, 0.0]), ("uniform", [1 / 3] * 3)):
        run_dir = tmp_path / credit
        run_dir.mkdir()
        collector_copy = collector if credit == "causal" else _fresh(collector, run_dir, credit)
        outputs = run_three_ways(run_dir, collector_copy, app, credit=credit)
        for way in WAYS:
            _, turns = outputs[way].only()
            rewards = sorted((t["reward"] for t in turns), reverse=True)
            assert rewards == pytest.approx(expected), (credit, way)


def _fresh(collector: RunningCollector, where: Path, credit: str) -> RunningCollector:
    from collector_fixtures import start_collector

    return start_collector(where / "collected", "--quiet-period", "0.2", "--credit", credit)


@pytest.mark.parametrize("mode", ["none", "tool", "model"])
def test_parallelism_counts_all_busy_time(tmp_path: Path, collector: RunningCollector, mode: str) -> None:
    outputs = run_three_ways(tmp_path / "p", collector, parallel_app(mode, parallel=True))
    for way in WAYS:
        trace, _ = outputs[way].only()
        # 4 by construction; scheduler delays on a loaded machine shorten the overlap, never lengthen it
        assert 3.0 <= trace["metrics"]["parallelism_efficiency"] <= 4.2, (mode, way, trace["metrics"])


@pytest.mark.parametrize(("how", "works"), [("threads", True), ("threads", False), ("gather", False)])
def test_a_parents_own_work_while_its_children_run_is_busy_time(
        tmp_path: Path, collector: RunningCollector, how: str, works: bool) -> None:
    """A lead hands three 0.3 s branches to workers and waits for them, or works 0.3 s itself meanwhile (half
    of it in a model call): the summed busy time is 0.3 s per thing that works, 1.2 s or 0.9 s, and the
    parallelism 4 or 3. Its waits are recorded (the SDK's pool and gather), so its own work is told apart
    from its waiting; its model call is counted once."""
    busy = 0.3 * (3 + works)
    outputs = run_three_ways(tmp_path, collector, handing_out_app(how, works))
    for way in WAYS:
        trace, _ = outputs[way].only()
        metrics, wall = trace["metrics"], trace["costs"]["wall_clock_s"]
        # The sleeps give each thing at least its time; the bookkeeping around them adds a little.
        assert busy <= metrics["parallelism_efficiency"] * wall <= busy + 0.1, (way, metrics, wall)
        assert metrics["parallelism_efficiency"] >= 3 + works - 0.5, (way, metrics, wall)


def test_sequential_work_reads_about_one(tmp_path: Path, collector: RunningCollector) -> None:
    outputs = run_three_ways(tmp_path / "s", collector, parallel_app("tool", parallel=False, seconds=0.1))
    for way in WAYS:
        trace, _ = outputs[way].only()
        assert 0.9 <= trace["metrics"]["parallelism_efficiency"] <= 1.1, (way, trace["metrics"])


def test_an_annotation_survives_a_late_span(tmp_path: Path, collector: RunningCollector) -> None:
    """A late span reopens a trace that ``annotate`` already revised: the new revision is numbered above the
    annotated one and keeps its reward (in-process and through the collector)."""
    from collector_fixtures import validate_trace_dir
    from opentelemetry import trace as otel_trace
    from orchestrace_collector.annotate import annotate
    from orchestrace_collector.output import latest_turns

    handle = ot.configure("late", exporter="otlp", endpoint=collector.base_url, trace_dir=tmp_path / "dir",
                          tracer_provider=TracerProvider(shutdown_on_exit=False), batch=False)
    try:
        with ot.task("late-task") as run:
            ask("first")
            root = otel_trace.get_current_span().get_span_context()
        assert handle.force_flush()
        outs = [tmp_path / "dir", collector.out]
        for out in outs:
            _wait_for(lambda out=out: run.episode_id in _latest(out))
            annotate(out, reward=0.75, family="verifier", name="judge", trace_id=run.episode_id)
        # A span of the same run arrives late (a straggling worker's export).
        parent = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(root))
        late = handle.tracer_provider.get_tracer("late").start_span(
            "execute_tool straggler", context=parent,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "straggler"})
        late.end()
        assert handle.force_flush()
        for out in outs:
            _wait_for(lambda out=out: _latest(out)[run.episode_id]["metrics"]["revision"] == 2)
    finally:
        handle.shutdown()
    assert collector.stop() == 0
    for out in outs:
        traces = validate_trace_dir(out)
        trace = traces[run.episode_id]
        assert trace["metrics"]["revision"] == 2  # 0 converted, 1 annotated, 2 the late span
        assert trace["rewards"]["verifier:judge"] == 0.75
        assert "straggler" in {e.get("tool") for e in trace["events"]}
        (turn,) = latest_turns(out, traces)[run.episode_id]
        assert turn["credit"] == {"verifier:judge": 0.75}


def _latest(out: Path) -> dict[str, Any]:
    from orchestrace_collector.output import latest_traces

    return latest_traces([out]) if out.exists() else {}


def _wait_for(condition: Any, timeout_s: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (KeyError, FileNotFoundError):
            pass
        time.sleep(0.05)
    raise AssertionError("timed out")


ROLLOUT_SCRIPT = """
import sys
import orchestrace as ot
handle = ot.configure("rollout-worker", exporter="otlp", endpoint=sys.argv[1])
with ot.task("shared-task") as run:
    ot.reward(float(sys.argv[2]), family="team")
print(run.episode_id)
handle.shutdown()
"""


def test_rollouts_in_two_processes_are_two_traces(tmp_path: Path, collector: RunningCollector) -> None:
    import subprocess
    import sys

    workers = [subprocess.Popen([sys.executable, "-c", ROLLOUT_SCRIPT, collector.base_url, value],
                                stdout=subprocess.PIPE, text=True) for value in ("1.0", "0.0")]
    episodes = [worker.communicate(timeout=120)[0].strip() for worker in workers]
    assert all(worker.returncode == 0 for worker in workers)
    assert collector.stop() == 0
    from collector_fixtures import validate_trace_dir

    traces = validate_trace_dir(collector.out)
    assert sorted(traces) == sorted(episodes)
    assert sorted(t["rewards"]["team"] for t in traces.values()) == [0.0, 1.0]
    assert {t["task_id"] for t in traces.values()} == {"shared-task"}


@pytest.mark.parametrize("app", ["units", "parallel", "works-beside", "gather"])
def test_the_recompute_recipe_gives_the_written_numbers(tmp_path: Path, collector: RunningCollector,
                                                        app: str) -> None:
    """``examples/recompute_trace.py`` rebuilds rewards, credit, parallelism and cost from the files; also
    busy time where a lead works while the children it handed work to run (its ``waits``, their
    ``concurrent``)."""
    from examples.recompute_trace import latest, recompute

    apps = {"units": units_app, "parallel": parallel_app("tool", True),
            "works-beside": handing_out_app("threads", True), "gather": handing_out_app("gather", False)}
    outputs = run_three_ways(tmp_path, collector, apps[app])
    for way in WAYS:
        traces, turns = latest(outputs[way].out)
        for trace_id, trace in traces.items():
            got = recompute(trace, turns.get(trace_id, []))
            assert got["rewards"] == pytest.approx({k: v for k, v in trace["rewards"].items()
                                                    if ":" not in k or k.startswith("verifier:")}), way
            for turn in turns.get(trace_id, []):
                for key, share in got["team_credit"][turn["turn_id"]].items():
                    assert turn["credit"][key] == pytest.approx(share), (way, key)
            assert got["parallelism_efficiency"] == pytest.approx(
                trace["metrics"]["parallelism_efficiency"], rel=0.02), way
            assert (got["tokens"], got["tool_calls"], got["messages"]) == (
                trace["costs"]["tokens"], trace["costs"]["tool_calls"], trace["costs"]["messages"])


@pytest.mark.parametrize("first", ["alpha", "zeta"])
def test_a_fan_out_is_written_the_same_whichever_worker_started_first(tmp_path: Path,
                                                                     collector: RunningCollector,
                                                                     first: str) -> None:
    started = threading.Event()

    def work(name: str) -> str:
        started.set()  # inside its span: the other worker may start now
        time.sleep(0.05)  # both run at once
        ask(name)
        return name

    workers = {name: ot.agent(name=name)(work) for name in ("alpha", "zeta")}

    def start(name: str) -> str:
        if name != first:
            started.wait()
        return workers[name](name)

    @ot.agent
    def lead() -> str:
        ask("plan")  # its tokens count on one of the starts it led to
        with ot.ThreadPoolExecutor(2) as pool:
            return "+".join(pool.map(start, ["alpha", "zeta"]))

    def app() -> None:
        with ot.task("fan-out"):
            lead()

    outputs = run_three_ways(tmp_path, collector, app)
    call = PROMPT_TOKENS + COMPLETION_TOKENS
    for way in WAYS:
        trace, _ = outputs[way].only()
        starts = [e for e in trace["events"]
                  if e["agent"] == "lead" and e["type"] in ("orchestrator_decision", "spawn")]
        ran_first = [e["t"] for e in starts if e["to"] == first]
        assert ran_first < [e["t"] for e in starts if e["to"] != first], way
        # The lead's model call counts on the start of "alpha", the first by name, whichever ran first.
        holders = [(e["type"], e.get("to"), e["tokens"]) for e in trace["events"]
                   if e["agent"] == "lead" and e.get("tokens")]
        assert holders == [("orchestrator_decision", "alpha", call)], way
        assert trace["costs"]["tokens"] == 3 * call
        # No edge between the two starts: which came first was the threads' race.
        ids = {e["id"] for e in starts}
        between = [x for x in trace["edges"] if {x["src"], x["dst"]} <= ids and x["type"] == "temporal"]
        assert between == [], way


def test_model_calls_outside_any_agent_are_written_as_samples(tmp_path: Path,
                                                              collector: RunningCollector) -> None:
    """Two model calls made straight from the app (no agent, tool or task around them): each is its own OTel
    trace, so its own episode, closed by the service's return, with its one turn and its tokens."""

    def app() -> None:
        ask("first")
        ask("second")

    outputs = run_three_ways(tmp_path, collector, app)
    for way in WAYS:
        traces = outputs[way].traces
        assert len(traces) == 2, way
        for trace_id, trace in traces.items():
            (ret,) = trace["events"]
            # The stand-in is named after the resource's service.name (the test's provider sets none).
            assert (ret["type"], ret["agent"], ret["tokens"]) == ("return", "unknown_service:python",
                                                                  PROMPT_TOKENS + COMPLETION_TOKENS), way
            assert trace["costs"]["tokens"] == PROMPT_TOKENS + COMPLETION_TOKENS, way
            (turn,) = outputs[way].turns[trace_id]
            assert (turn["agent"], turn["input_tokens"], turn["output_tokens"], turn["event_ids"]) == (
                "unknown_service:python", PROMPT_TOKENS, COMPLETION_TOKENS, ["e1"]), way


def test_an_agent_that_calls_itself_is_one_activation_per_call(tmp_path: Path,
                                                                collector: RunningCollector) -> None:
    """Recursion: ``solve(2)`` calls ``solve(1)``, which calls ``solve(0)``, which alone asks the model; the
    two outer calls hold nothing but the call they make (the shape of a wrapper span around the same agent,
    which is one activation). Three activations, each delegating to the next, each returning to its caller."""

    @ot.agent
    def solve(depth: int) -> str:
        if depth:
            return solve(depth - 1)
        ask("base case")
        return "solved"

    def app() -> None:
        with ot.task("recursion"):
            solve(2)

    outputs = run_three_ways(tmp_path, collector, app)
    for way in WAYS:
        trace, turns = outputs[way].only()
        root = trace["system"]  # the task's run is the service's root agent
        spawns = [(e["agent"], e["to"], e["to_activation"]) for e in trace["events"] if e["type"] == "spawn"]
        assert spawns == [(root, "solve", 1), ("solve", "solve", 2), ("solve", "solve", 3)], way
        returns = [(e["from"], e["from_activation"], e.get("to"), e.get("to_activation"))
                   for e in trace["events"] if e["type"] == "return"]
        assert returns[:3] == [
            ("solve", 3, "solve", 2), ("solve", 2, "solve", 1), ("solve", 1, root, 1)], way
        (turn,) = turns
        assert (turn["agent"], turn["input_tokens"]) == ("solve", PROMPT_TOKENS), way


def test_a_message_to_a_handle_reaches_that_activation(tmp_path: Path, collector: RunningCollector) -> None:
    """``lead`` runs ``worker`` twice, then thanks the first by its handle (``ot.current_agent()`` inside
    it): the message is to ``worker#1``, not to the latest worker, which its name alone would give."""
    handles: list[Any] = []

    @ot.agent
    def worker(i: int) -> int:
        handles.append(ot.current_agent())
        ask(f"part {i}")
        return i

    @ot.agent
    def lead() -> None:
        worker(1)
        worker(2)
        ot.message(handles[0], content="thanks")

    def app() -> None:
        handles.clear()
        with ot.task("handles"):
            lead()

    outputs = run_three_ways(tmp_path, collector, app)
    for way in WAYS:
        trace, _ = outputs[way].only()
        (message,) = [e for e in trace["events"] if e["type"] == "message"]
        assert (message["agent"], message["to"], message["to_activation"]) == ("lead", "worker", 1), way


def test_an_announced_spawn_is_carried_out_by_the_spawners_own_worker(tmp_path: Path,
                                                                      collector: RunningCollector) -> None:
    """Two threads: ``announcer`` records ``ot.spawn("worker")``, then waits while ``bystander`` runs a
    ``worker`` of its own (no announcement), then runs its worker. The spawn is the announcer's worker's
    (the second), not the first worker to start after it; each worker returns to the agent that ran it."""
    announced, bystander_done = threading.Event(), threading.Event()

    @ot.agent
    def worker(tag: str) -> str:
        ask(tag)
        return tag

    @ot.agent
    def announcer() -> str:
        ot.spawn("worker")
        announced.set()
        assert bystander_done.wait(10)
        return worker("announced")

    @ot.agent
    def bystander() -> str:
        assert announced.wait(10)
        try:
            return worker("meanwhile")
        finally:
            bystander_done.set()

    @ot.agent
    def lead() -> None:
        with ot.ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(announcer), pool.submit(bystander)]:
                future.result()

    def app() -> None:
        announced.clear()
        bystander_done.clear()
        with ot.task("threads"):
            lead()

    outputs = run_three_ways(tmp_path, collector, app)
    for way in WAYS:
        trace, _ = outputs[way].only()
        spawns = {(e["agent"], e["to"], e["to_activation"]) for e in trace["events"] if e["type"] == "spawn"}
        assert {s for s in spawns if s[1] == "worker"} == {("bystander", "worker", 1),
                                                          ("announcer", "worker", 2)}, way
        (decision,) = [e for e in trace["events"] if e.get("decision") == "spawn"]
        chose = (decision["agent"], decision["to"], decision["to_activation"])
        assert chose == ("announcer", "worker", 2), way
        returns = {(e["from"], e["from_activation"], e.get("to"))
                   for e in trace["events"] if e["type"] == "return"}
        assert {("worker", 1, "bystander"), ("worker", 2, "announcer")} <= returns, way


@pytest.mark.parametrize("call", ["spawn", "delegate"])
@pytest.mark.parametrize("first", ["p1", "p2"])
def test_spawned_payloads_pair_with_their_workers_and_number_them(tmp_path: Path, collector: RunningCollector,
                                                                   first: str, call: str) -> None:
    """The lead spawns (or delegates to) ``worker`` with payloads p1 then p2 (``ot.spawn(..., content=...)``,
    ``ot.delegate(..., content=...)``) and runs both at once, the one given ``first`` forced to start first:
    each spawn leads to the worker that took its payload, and the workers are activations 1 (p1) and 2 (p2) of
    worker whichever started first."""
    started = threading.Event()

    @ot.agent
    def worker(payload: str) -> str:
        started.set()
        time.sleep(0.05)
        ask(payload)
        return payload.upper()

    def start(payload: str) -> str:
        if payload != first:
            started.wait()
        return worker(payload)

    @ot.agent
    def lead() -> str:
        payloads = ["p1", "p2"]
        for payload in payloads:
            (ot.spawn if call == "spawn" else ot.delegate)("worker", content=payload)
        with ot.ThreadPoolExecutor(2) as pool:
            return "+".join(pool.map(start, payloads))

    def app() -> None:
        with ot.task("spawned-payloads"):
            lead()

    outputs = run_three_ways(tmp_path, collector, app)
    refs = {payload: ot.content_ref(payload) for payload in ("p1", "p2")}
    for way in WAYS:
        trace, turns = outputs[way].only()
        spawned = {e["content_ref"]: e["to_activation"] for e in trace["events"]
                   if e["type"] == "spawn" and e.get("to") == "worker"}
        assert spawned == {refs["p1"]: 1, refs["p2"]: 2}, way
        started_at = {e["from_activation"]: e["t_start"] for e in trace["events"] if e["type"] == "return"
                      and e["agent"] == "worker"}
        activation_first = 1 if first == "p1" else 2
        assert min(started_at, key=started_at.__getitem__) == activation_first, way  # the order was forced
        # Each worker's turn (its one model call) is its own activation's.
        assert sorted((t["agent"], t["activation"]) for t in turns if t["agent"] == "worker") == [
            ("worker", 1), ("worker", 2)], way


def test_other_libraries_span_shapes_give_their_calls_and_tokens_once(tmp_path: Path,
                                                                       collector: RunningCollector) -> None:
    """An agent whose model calls and tools another library records in shapes of its own: a ``call_llm``
    span with a model and usage but no operation name (6 + 2 tokens), a tool call told twice (an MCP
    client's ``tools/call`` inside ``execute_tool``), and a chat span whose messages are on its details
    event (3 + 1)."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("another-library")
    def text(role: str, content: str) -> str:
        return json.dumps([{"role": role, "parts": [{"type": "text", "content": content}]}])

    messages = {"gen_ai.input.messages": text("user", "hi"),
                "gen_ai.output.messages": text("assistant", "yo")}

    @ot.agent
    def helper() -> None:
        usage = {"gen_ai.usage.input_tokens": 6, "gen_ai.usage.output_tokens": 2}
        with tracer.start_as_current_span("call_llm", attributes={"gen_ai.request.model": "m-1", **usage}):
            pass
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        with (tracer.start_as_current_span("execute_tool search", attributes=tool),
              tracer.start_as_current_span("tools/call search", attributes=tool)):
            pass
        with tracer.start_as_current_span("chat m-2", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m-2",
                "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 1}) as chat:
            chat.add_event("gen_ai.client.inference.operation.details", messages)

    def app() -> None:
        with ot.task("foreign-shapes"):
            helper()

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        calls = sorted((t["model"], t["input_tokens"], t["output_tokens"]) for t in turns)
        assert calls == [("m-1", 6, 2), ("m-2", 3, 1)], way
        assert trace["costs"]["tokens"] == 12 and trace["costs"]["tool_calls"] == 1, way
        assert [e["tool"] for e in trace["events"] if e["type"] == "tool_call"] == ["search"], way
        (chat,) = [t for t in turns if t["model"] == "m-2"]
        assert chat["input_ref"] == ot.content_ref(messages["gen_ai.input.messages"]), way


def test_openinference_agents_of_one_class_keep_their_own_names(tmp_path: Path,
                                                                collector: RunningCollector) -> None:
    """OpenInference names an agent's span after its class (smolagents: ``ToolCallingAgent.run``) and the
    agent in ``agent.name`` (or ``graph.node.name``); each agent span also carries the sum of its model calls'
    tokens. A manager (10 + 2, then 30 + 4) runs two managed agents of one class, ``web_agent`` (5 + 1) and
    ``docs_agent`` (7 + 1, 8 + 1, named by ``graph.node.name``), each calling a tool once per model call."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("openinference.instrumentation.smolagents")

    def agent(cls: str, name: str, calls: list[tuple[int, int]], managed: list[Any],
              key: str = "agent.name") -> None:
        with tracer.start_as_current_span(f"{cls}.run", attributes={
                "openinference.span.kind": "AGENT", key: name}) as span:
            for step, (prompt, completion) in enumerate(calls, 1):
                chain = {"openinference.span.kind": "CHAIN"}
                with tracer.start_as_current_span(f"Step {step}", attributes=chain):
                    with tracer.start_as_current_span("LiteLLMModel.generate", attributes={
                            "openinference.span.kind": "LLM", "llm.model_name": "m",
                            "llm.token_count.prompt": prompt, "llm.token_count.completion": completion}):
                        pass
                    for run in managed if step == 1 else []:
                        run()
                    with tracer.start_as_current_span("SearchTool", attributes={
                            "openinference.span.kind": "TOOL", "tool.name": "search"}):
                        pass
            span.set_attributes({"llm.token_count.prompt": sum(p for p, _ in calls),
                                 "llm.token_count.completion": sum(c for _, c in calls)})

    def app() -> None:
        agent("CodeAgent", "manager", [(10, 2), (30, 4)], [
            lambda: agent("ToolCallingAgent", "web_agent", [(5, 1)], []),
            lambda: agent("ToolCallingAgent", "docs_agent", [(7, 1), (8, 1)], [], "graph.node.name"),
        ])

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert tokens_by_agent(turns) == {"manager": 46, "web_agent": 6, "docs_agent": 17}, way
        assert trace["costs"]["tokens"] == 69 and trace["costs"]["tool_calls"] == 5, way
        assert [e["to"] for e in trace["events"] if e["type"] == "spawn"] == ["web_agent", "docs_agent"], way
        returns = {e["agent"]: e.get("to") for e in trace["events"] if e["type"] == "return"}
        assert returns == {"web_agent": "manager", "docs_agent": "manager", "manager": None}, way


@pytest.mark.parametrize("library", ["openllmetry", "openinference"])
def test_another_librarys_handoff_is_the_agents_handoff(tmp_path: Path, collector: RunningCollector,
                                                        library: str) -> None:
    """An OpenAI Agents triage as other instrumentations record it: the workflow runs ``Triage`` (10 + 1),
    which hands off to ``Billing`` (a span inside ``Triage``: OpenLLMetry's with ``gen_ai.handoff.to_agent``,
    OpenInference's a ``TOOL`` named ``handoff to Billing``); ``Billing``, a sibling of ``Triage`` under
    the workflow, calls the model (20 + 2), a tool, the model again (30 + 3)."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer(library)
    oi = library == "openinference"

    def chat(prompt: int, completion: int) -> None:
        with tracer.start_as_current_span("response", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": prompt, "gen_ai.usage.output_tokens": completion}):
            pass

    def span(name: str, openinference: dict[str, Any], openllmetry: dict[str, Any]) -> Any:
        return tracer.start_as_current_span(name, attributes=openinference if oi else openllmetry)

    def agent(name: str) -> Any:
        return span(name, {"openinference.span.kind": "AGENT"},
                    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name})

    def app() -> None:
        workflow = {"traceloop.span.kind": "workflow"}
        with span("Agent workflow", {"openinference.span.kind": "AGENT"}, workflow):
            with agent("Triage"):
                chat(10, 1)
                with span("handoff to Billing", {"openinference.span.kind": "TOOL"},
                          {"gen_ai.operation.name": "handoff", "gen_ai.handoff.from_agent": "Triage",
                           "gen_ai.handoff.to_agent": "Billing"}):
                    pass
            with agent("Billing"):
                chat(20, 2)
                with span("refund", {"openinference.span.kind": "TOOL", "tool.name": "refund"},
                          {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund"}):
                    pass
                chat(30, 3)

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert tokens_by_agent(turns) == {"Triage": 11, "Billing": 55}, way
        assert trace["costs"]["tool_calls"] == 1, way  # the handoff is no tool call
        spawns = [(e["agent"], e["to"]) for e in trace["events"] if e["type"] == "spawn"]
        assert spawns == [("Agent workflow", "Triage"), ("Triage", "Billing")], way
        (handoff,) = [e for e in trace["events"] if e.get("handoff")]
        assert (handoff["type"], handoff["agent"], handoff["to"], handoff["decision"]) == (
            "orchestrator_decision", "Triage", "Billing", "delegate"), way


def test_work_handed_over_by_message_stays_in_the_run(tmp_path: Path, collector: RunningCollector) -> None:
    """A message-passing runtime (AutoGen's, with no span around the run): ``lead`` (5 + 1 tokens) publishes
    a job; the runtime processes it on another thread in a trace of its own, whose root links to the
    publishing span, and runs ``worker`` there (7 + 1). One run, one episode: the lead hands the worker its
    work."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("runtime")
    inbox: list[Any] = []

    @ot.llm("m", provider="fake")
    def call(prompt: str, tokens: int) -> dict[str, Any]:
        return {"choices": [{"message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": tokens, "completion_tokens": 1}}

    @ot.agent
    def worker(job: str) -> str:
        call(job, 7)
        return "done"

    @ot.agent
    def lead() -> None:
        call("plan", 5)
        with tracer.start_as_current_span("publish worker", kind=SpanKind.PRODUCER) as published:
            inbox.append(("job", published.get_span_context()))

    def runtime() -> None:
        job, sender = inbox.pop()
        with tracer.start_as_current_span("process worker", context=otel_context.Context(),
                                          links=[Link(sender)], kind=SpanKind.CONSUMER):
            worker(job)

    def app() -> None:
        lead()
        thread = threading.Thread(target=runtime)
        thread.start()
        thread.join()

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert tokens_by_agent(turns) == {"lead": 6, "worker": 8}, way
        assert trace["costs"]["tokens"] == 14, way
        spawns = [(e["agent"], e["to"]) for e in trace["events"] if e["type"] == "spawn"]
        assert spawns == [("lead", "worker")], way
        returns = [e.get("to") for e in trace["events"] if e["type"] == "return" and e["agent"] == "worker"]
        assert returns == ["lead"], way


def test_embeddings_and_retrieval_are_no_samples(tmp_path: Path, collector: RunningCollector) -> None:
    """A retrieval agent embeds its question (50 tokens, recorded by an instrumentation with the GenAI
    ``embeddings`` operation), retrieves (50), then calls its model (7 + 1): one turn, 8 tokens; the 100
    tokens of the model used without generating in ``costs.embedding_tokens``."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("an-embeddings-client")

    @ot.llm("m", provider="fake")
    def call(prompt: str) -> dict[str, Any]:
        return {"choices": [{"message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 1}}

    @ot.agent
    def rag() -> None:
        usage = {"gen_ai.request.model": "e-1", "gen_ai.usage.input_tokens": 50}
        for op in ("embeddings", "retrieval"):
            with tracer.start_as_current_span(f"{op} e-1", attributes={"gen_ai.operation.name": op, **usage}):
                pass
        call("answer")

    def app() -> None:
        with ot.task("rag"):
            rag()

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert [(t["model"], t["input_tokens"], t["output_tokens"]) for t in turns] == [("m", 7, 1)], way
        assert trace["costs"]["tokens"] == 8, way
        assert trace["costs"]["embedding_tokens"] == 100, way  # embeddings and retrieval, 50 each


class _PendingSpans(SpanProcessor):
    """What Logfire exports: a zero-length copy of each span as it starts (its attributes, plus
    ``logfire.span_type=pending_span``), under it; the span itself follows when it ends."""

    def __init__(self, provider: TracerProvider) -> None:
        self._tracer = provider.get_tracer("logfire")

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        attributes = dict(span.attributes or {})
        if attributes.get("logfire.span_type") == "pending_span":
            return
        attributes.update({"logfire.span_type": "pending_span", "logfire.pending_parent_id": "0" * 16})
        copy = self._tracer.start_span(span.name, context=set_span_in_context(span), attributes=attributes,
                                       start_time=span.start_time)
        copy.end(end_time=span.start_time)


def test_logfires_pending_spans_count_for_nothing(tmp_path: Path, collector: RunningCollector) -> None:
    """The same run with every span also exported, when it starts, as Logfire's pending copy: a lead calls a
    tool, its model (PROMPT + COMPLETION tokens) and a worker (the same): one tool call, two turns, one
    spawn."""
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(_PendingSpans(provider))

    @ot.agent
    def worker() -> None:
        ask("work")

    @ot.agent
    def lead() -> None:
        search("facts")
        ask("plan")
        worker()

    def app() -> None:
        with ot.task("pending"):
            lead()

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert tokens_by_agent(turns) == {"lead": PROMPT_TOKENS + COMPLETION_TOKENS,
                                          "worker": PROMPT_TOKENS + COMPLETION_TOKENS}, way
        assert trace["costs"]["tool_calls"] == 1, way
        assert [(e["agent"], e["to"]) for e in trace["events"] if e["type"] == "spawn"] == [
            (trace["system"], "lead"), ("lead", "worker")], way  # the task's run: the service's root agent


def test_langfuse_observations_give_agents_tools_and_samples(tmp_path: Path,
                                                             collector: RunningCollector) -> None:
    """A run recorded by Langfuse's OTel SDK (``langfuse.observation.type``, usage as a JSON object): the
    researcher's generation (12 + 3) and tool, the writer it runs (5 + 2) and the writer's embedding (50,
    no sample)."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("langfuse-sdk")

    prompt = json.dumps([{"role": "user", "content": "find facts"}])
    reply = json.dumps({"role": "assistant", "content": "searching"})

    def observation(name: str, kind: str, usage: dict[str, int] | None = None, **content: str) -> Any:
        attributes = {"langfuse.observation.type": kind}
        if usage is not None:
            attributes["langfuse.observation.model.name"] = "m-1"
            attributes["langfuse.observation.usage_details"] = json.dumps(usage)
        attributes.update({f"langfuse.observation.{key}": value for key, value in content.items()})
        return tracer.start_as_current_span(name, attributes=attributes)

    def app() -> None:
        with observation("research-run", "span"), observation("researcher", "agent"):
            with observation("llm", "generation", {"input": 12, "output": 3, "total": 15}, input=prompt,
                             output=reply):
                pass
            with observation("search", "tool", input='{"query": "facts"}'):
                pass
            with observation("writer", "agent"):
                with observation("llm", "generation", {"input": 5, "output": 2}):
                    pass
                with observation("embed", "embedding", {"input": 50}):
                    pass

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert tokens_by_agent(turns) == {"researcher": 15, "writer": 7}, way
        assert {t["model"] for t in turns} == {"m-1"}, way
        assert trace["costs"]["tokens"] == 22 and trace["costs"]["tool_calls"] == 1, way
        spawns = [(e["agent"], e["to"]) for e in trace["events"] if e["type"] == "spawn"]
        assert spawns == [("research-run", "researcher"), ("researcher", "writer")], way
        (first, _) = sorted(turns, key=lambda t: t["t"])
        assert first["input_ref"] == ot.content_ref(prompt), way
        assert first["output_ref"] == ot.content_ref(reply), way
        assert first["prompt"] == [{"role": "user", "content": "find facts"}], way
        (call,) = [e for e in trace["events"] if e["type"] == "tool_call"]
        assert call["content_ref"] == ot.content_ref('{"query": "facts"}'), way


def test_vercel_ai_sdk_calls_give_agents_tools_and_samples(tmp_path: Path,
                                                           collector: RunningCollector) -> None:
    """A run recorded by Vercel's AI SDK (``ai.*`` spans): a ``generateText`` the caller named ``supervisor``
    calls a model (10 + 4), which asks for ``research``; the tool runs a ``generateText`` named
    ``researcher`` (6 + 3); the supervisor's second call (20 + 5) answers. An unnamed ``generateText`` inside
    the researcher is its own model use (1 + 1), an embedding no sample."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("ai")
    ask = [{"role": "system", "content": "Delegate."},
           {"role": "user", "content": [{"type": "text", "text": "Why is the sky blue?"}]}]
    call = {"type": "tool-call", "toolCallId": "call-1", "toolName": "research", "input": {"topic": "sky"}}
    answered = [*ask, {"role": "assistant", "content": [call]},
                {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call-1",
                                              "toolName": "research",
                                              "output": {"type": "text", "value": "scattering"}}]}]

    def ai(operation: str, function_id: str | None = None, **attributes: Any) -> Any:
        attributes = {"ai.operationId": operation, "operation.name": operation, **attributes}
        if function_id is not None:
            attributes["ai.telemetry.functionId"] = function_id
        return tracer.start_as_current_span(operation, attributes=attributes)

    def provider_call(function_id: str | None, tokens: tuple[int, int], **attributes: Any) -> Any:
        return ai("ai.generateText.doGenerate", function_id, **{
            "gen_ai.system": "openai.chat", "gen_ai.request.model": "gpt-x", "ai.model.id": "gpt-x",
            "gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1],
            "ai.usage.promptTokens": tokens[0], "ai.usage.completionTokens": tokens[1], **attributes})

    def app() -> None:
        usage = {"ai.usage.promptTokens": 30, "ai.usage.completionTokens": 9}
        with ai("ai.generateText", "supervisor", **usage):
            with provider_call("supervisor", (10, 4), **{"ai.prompt.messages": json.dumps(ask),
                                                          "ai.response.toolCalls": json.dumps([call])}):
                pass
            with ai("ai.toolCall", **{"ai.toolCall.name": "research", "ai.toolCall.id": "call-1",
                                      "ai.toolCall.args": '{"topic":"sky"}',
                                      "ai.toolCall.result": '"scattering"'}):
                with ai("ai.generateText", "researcher"):
                    with provider_call("researcher", (6, 3)):
                        pass
                    with ai("ai.generateText"), provider_call(None, (1, 1)):
                        pass
                with ai("ai.embed", **{"ai.usage.tokens": 50, "ai.model.id": "embedder"}):
                    pass
            with provider_call("supervisor", (20, 5), **{"ai.prompt.messages": json.dumps(answered),
                                                          "ai.response.text": "Rayleigh scattering."}):
                pass

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert tokens_by_agent(turns) == {"supervisor": 39, "researcher": 11}, way
        assert trace["costs"]["tokens"] == 50 and trace["costs"]["tool_calls"] == 1, way
        (tool_call,) = [e for e in trace["events"] if e["type"] == "tool_call"]
        assert (tool_call["agent"], tool_call["tool"]) == ("supervisor", "research"), way
        assert tool_call["content_ref"] == ot.content_ref('{"topic":"sky"}'), way
        (result,) = [e for e in trace["events"] if e["type"] == "tool_result"]
        assert result["content_ref"] == ot.content_ref('"scattering"'), way
        spawns = [(e["agent"], e["to"]) for e in trace["events"] if e["type"] == "spawn"]
        assert spawns == [("supervisor", "researcher")], way
        first, _, _, last = sorted(turns, key=lambda t: t["t"])
        assert first["prompt"] == [{"role": "system", "content": "Delegate."},
                                   {"role": "user", "content": "Why is the sky blue?"}], way
        assert first["input_ref"] == ot.content_ref(json.dumps(ask)), way
        assert first["completion"] == [{"role": "assistant", "content": "", "tool_calls": [
            {"id": "call-1", "type": "function",
             "function": {"name": "research", "arguments": {"topic": "sky"}}}]}], way
        assert last["prompt"][2:] == [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call-1", "type": "function",
                 "function": {"name": "research", "arguments": {"topic": "sky"}}}]},
            {"role": "tool", "content": "scattering", "tool_call_id": "call-1", "name": "research"}], way
        assert last["completion"] == [{"role": "assistant", "content": "Rayleigh scattering."}], way


def test_a_run_named_after_its_root_agent_is_that_agents(tmp_path: Path,
                                                        collector: RunningCollector) -> None:
    """ADK's shape: a run (``invoke_workflow boss``) named after its root agent, in which the root agent
    (``invoke_agent boss``: 9 + 1 tokens, then a transfer tool) and the agent it transfers to
    (``invoke_agent helper``: 4 + 2) run side by side. One ``boss``, which spawns ``helper``."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("gcp.vertex.agent")

    def span(name: str, **attributes: Any) -> Any:
        return tracer.start_as_current_span(name, attributes=attributes)

    def model_call(tokens: tuple[int, int]) -> Any:
        return span("generate_content m", **{
            "gen_ai.operation.name": "generate_content", "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1]})

    def app() -> None:
        with span("invoke_workflow boss", **{"gen_ai.operation.name": "invoke_workflow",
                                             "gen_ai.workflow.name": "boss"}):
            with span("invoke_agent boss", **{"gen_ai.operation.name": "invoke_agent",
                                              "gen_ai.agent.name": "boss"}):
                with model_call((9, 1)):
                    pass
                with span("execute_tool transfer_to_agent", **{"gen_ai.operation.name": "execute_tool",
                                                               "gen_ai.tool.name": "transfer_to_agent"}):
                    pass
            with span("invoke_agent helper", **{"gen_ai.operation.name": "invoke_agent",
                                                "gen_ai.agent.name": "helper"}), model_call((4, 2)):
                pass

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert tokens_by_agent(turns) == {"boss": 10, "helper": 6}, way
        spawns = [(e["agent"], e["to"]) for e in trace["events"] if e["type"] == "spawn"]
        assert spawns == [("boss", "helper")], way
        # The transfer names no target (content not captured): a handoff to the agent that runs next.
        (decision,) = [e for e in trace["events"] if e["type"] == "orchestrator_decision"]
        assert (decision["agent"], decision["to"], decision.get("handoff")) == ("boss", "helper", True), way
        assert [(e["agent"], e.get("to")) for e in trace["events"] if e["type"] == "return"] == [
            ("helper", "boss"), ("boss", None)], way


def test_messages_on_one_event_each_give_the_turns_content(tmp_path: Path,
                                                           collector: RunningCollector) -> None:
    """A chat span recorded in the GenAI conventions' older form (Strands' default): an event per message
    sent (``gen_ai.system.message``, ``gen_ai.user.message``, with ``content``) and ``gen_ai.choice`` with
    the reply's ``message``; 3 + 1 tokens."""
    provider = TracerProvider(shutdown_on_exit=False)
    tracer = provider.get_tracer("strands.telemetry.tracer")
    sent = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]

    @ot.agent
    def helper() -> None:
        with tracer.start_as_current_span("chat", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 1}) as chat:
            for message in sent:
                chat.add_event(f"gen_ai.{message['role']}.message", {"content": message["content"]})
            chat.add_event("gen_ai.choice", {"message": "yo", "finish_reason": "end_turn"})

    def app() -> None:
        with ot.task("event-messages"):
            helper()

    outputs = run_three_ways(tmp_path, collector, app, provider)
    for way in WAYS:
        _, turns = outputs[way].only()
        (turn,) = turns
        assert (turn["input_tokens"], turn["output_tokens"]) == (3, 1), way
        assert turn["prompt"] == sent, way
        assert turn["completion"] == [{"role": "assistant", "content": "yo"}], way
        assert turn["input_ref"] == ot.content_ref(json.dumps(sent)), way


def test_a_stop_carries_the_options_it_was_decided_among(tmp_path: Path, collector: RunningCollector) -> None:
    """``ot.stop(..., options=...)``: the stop's row in the decisions dataset has those options, every way."""
    from orchestrace_collector.export import export

    @ot.agent
    def judge() -> None:
        ot.stop("good enough", options=["stop", "retry", "critic"])

    def app() -> None:
        with ot.task("stopping"):
            judge()

    outputs = run_three_ways(tmp_path, collector, app)
    for way in WAYS:
        to = tmp_path / f"{way}-decisions.jsonl"
        export([outputs[way].out], "decisions", to)
        rows = [json.loads(line) for line in to.read_text().splitlines()]
        stops = [(r["agent"], r["options"]) for r in rows if r["decision"] == "stop"]
        assert stops == [("judge", ["stop", "retry", "critic"])], (way, rows)
