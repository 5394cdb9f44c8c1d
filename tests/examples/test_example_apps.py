"""Each example runs offline, prints its answer, and writes valid traces showing its orchestration."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyarrow.json
import pytest
from example_runs import EXAMPLES, ExampleRun
from orchestrace_collector.output import content_refs, read_content
from orchestrace_collector.validate import content_problems, validate_trace

Runner = Callable[[str], ExampleRun]
pytestmark = pytest.mark.xdist_group("example_runs")
STATUS_ERROR = 2  # OTLP Status.code


def decisions(run: ExampleRun, kind: str) -> list[dict[str, Any]]:
    return [e for e in run.events if e["type"] == "orchestrator_decision" and e.get("decision") == kind]


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_writes_valid_traces_and_turns(example: str, example_run: Runner) -> None:
    run = example_run(example)
    assert run.stdout.strip()
    assert run.traces
    for trace in run.traces:
        assert validate_trace(trace) == []
    # every example calls models, and every model call is a training sample
    assert run.turns
    assert all(turn["input_tokens"] > 0 and turn["output_tokens"] > 0 for turn in run.turns)
    # handoffs (ParentCommand) and interrupts (GraphInterrupt) are control flow, not errors
    assert run.spans
    assert [s["name"] for s in run.spans if s.get("status", {}).get("code") == STATUS_ERROR] == []


def test_supervisor_delegates_to_each_worker_and_is_rewarded(example_run: Runner) -> None:
    run = example_run("supervisor")
    assert "97 moons" in run.stdout
    (trace,) = run.traces
    assert trace["rewards"]["team"] == 1.0
    assert trace["metrics"]["task_success"] == 1.0
    delegated = {e["to"] for e in decisions(run, "delegate") if "to" in e}
    assert {"researcher", "mathematician", "writer"} <= delegated
    assert not delegated & {"model", "tools", "agent"}  # a worker's own ReAct loop is no orchestration
    tools = sorted(e["tool"] for e in run.events if e["type"] == "tool_call")
    worker_tools = [t for t in tools if not t.startswith("transfer_")]
    assert worker_tools == ["add", "count_words", "lookup_moons", "lookup_moons"]
    assert len(run.turns) == 10  # supervisor 4, each worker 2
    # The turns file carries the whole team reward; the call that wrote the final answer gets its share.
    assert sum(turn["reward"] for turn in run.turns) == pytest.approx(1.0)
    assert max(run.turns, key=lambda turn: turn["t"])["reward"] > 0


def test_swarm_records_handoffs_both_ways(example_run: Runner) -> None:
    run = example_run("swarm")
    assert "CASA-2N" in run.stdout
    assert "active: hotel_agent" in run.stdout  # streamed step by step
    handoffs = {(e.get("from", e["agent"]), e["to"]) for e in run.events if e.get("handoff")}
    assert ("travel_agent", "hotel_agent") in handoffs
    assert ("hotel_agent", "travel_agent") in handoffs


def test_map_reduce_spawns_one_worker_per_planet_and_aggregates(example_run: Runner) -> None:
    run = example_run("map_reduce")
    assert "Jupiter is the largest" in run.stdout
    (trace,) = run.traces
    spawns = [e for e in trace["events"] if e["type"] == "spawn"]
    spawned = [(e["to"], e["to_activation"]) for e in spawns if e.get("to") == "research"]
    assert len(set(spawned)) == 4  # one instance per Send, told apart though they share a node name
    (aggregate,) = [e for e in trace["events"] if e["type"] == "aggregate"]
    assert aggregate["agent"] == "summarize"
    inputs = [e for e in trace["edges"] if e["type"] == "aggregate" and e["dst"] == aggregate["id"]]
    assert len(inputs) >= 4
    # each concurrent worker's model call is credited to that worker (context kept across asyncio tasks)
    workers = [(t["agent"], t["activation"]) for t in run.turns if t["agent"] == "research"]
    assert sorted(workers) == sorted(set(spawned))


def test_hierarchical_reads_as_a_hierarchy(example_run: Runner) -> None:
    run = example_run("hierarchical")
    (trace,) = run.traces
    assert trace["topology"] == "hierarchical"
    delegated = {e["to"] for e in decisions(run, "delegate") if "to" in e}
    assert {"research_team", "writing_team", "searcher", "checker", "writer", "editor"} <= delegated


def test_agents_triage_hands_each_question_to_its_specialist(example_run: Runner) -> None:
    run = example_run("agents_triage")
    assert "duplicate 30 EUR is refunded" in run.stdout and "fix is in progress" in run.stdout
    assert len(run.traces) == 2  # one episode per question
    routes = []
    for trace in sorted(run.traces, key=lambda t: min(s["startTimeUnixNano"] for s in run.spans
                                                      if s["traceId"] == t["events"][0]["otel_trace_id"])):
        (handoff,) = [e for e in trace["events"] if e.get("handoff")]
        assert handoff["type"] == "orchestrator_decision" and handoff["agent"] == "triage"
        specialist = handoff["to"]
        routes.append(specialist)
        (spawn,) = [e for e in trace["events"] if e["type"] == "spawn" and e["agent"] == "triage"]
        assert spawn["to"] == specialist and (handoff["id"], spawn["id"]) in {
            (e["src"], e["dst"]) for e in trace["edges"] if e["type"] == "spawn"}
        (tool,) = [e for e in trace["events"] if e["type"] == "tool_call"]
        assert tool["agent"] == specialist
    assert routes == ["billing", "tech_support"]
    # Tokens known by construction: triage's routing turn and the specialist's two turns, per question.
    assert sorted(t["costs"]["tokens"] for t in run.traces) == [95 + 9 + 110 + 16 + 150 + 12,
                                                                  90 + 8 + 120 + 18 + 160 + 14]
    assert sorted((t["agent"], t["input_tokens"]) for t in run.turns) == [
        ("billing", 120), ("billing", 160), ("tech_support", 110), ("tech_support", 150), ("triage", 90),
        ("triage", 95)]


def test_agents_as_tools_spawns_the_specialists_in_parallel(example_run: Runner) -> None:
    run = example_run("agents_as_tools")
    assert "break-even at 180 cups" in run.stdout
    (trace,) = run.traces
    specialists = ["finance_advisor", "legal_advisor", "market_analyst"]
    spawned = sorted(e["to"] for e in trace["events"] if e["type"] == "spawn" and e["agent"] == "editor")
    assert spawned == specialists
    returned = sorted(e["from"] for e in trace["events"] if e["type"] == "return" and e.get("to") == "editor")
    assert returned == specialists
    assert sorted(e["to"] for e in trace["events"] if e["type"] == "despawn") == specialists
    assert trace["costs"]["tool_calls"] == 3
    assert trace["costs"]["tokens"] == 140 + 30 + 260 + 20 + 3 * (60 + 12)
    assert trace["metrics"]["parallelism_efficiency"] > 1.5  # 0.3, 0.25 and 0.2 s of work side by side
    assert len(run.turns) == 5


def test_human_in_the_loop_is_one_episode_with_interrupt_and_resume(example_run: Runner) -> None:
    run = example_run("human_in_the_loop")
    assert "Keep the receipt." in run.stdout
    (trace,) = run.traces  # two graph invocations, stitched by thread id
    kinds = [e.get("label") for e in trace["events"] if e["type"] == "human_intervention"]
    assert "interrupt" in kinds and "resume" in kinds
    assert len({e["otel_trace_id"] for e in trace["events"] if "otel_trace_id" in e}) == 2


def test_captured_content_becomes_chat_samples(example_run: Runner) -> None:
    run = example_run("supervisor-content-a")
    assert all(turn["prompt"] and turn["completion"] for turn in run.turns)
    assert any("97 moons" in m["content"] for turn in run.turns for m in turn["completion"])
    # Every content file hashes to its name, and every turn's refs read back from the store.
    store = run.trace_dir
    assert store
    files = [p for p in (store / "content").rglob("*") if p.is_file()]
    assert files and list(content_problems(store)) == []
    refs = content_refs(store)
    assert all(read_content(store, turn[key], refs) is not None
               for turn in run.turns for key in ("input_ref", "output_ref"))
    assert all(turn["finish_reason"] for turn in run.turns)
    # The reader Hugging Face's load_dataset("json") uses: one typed table, prompt and completion columns.
    (turns_file,) = store.glob("turns-*.jsonl")
    table = pyarrow.json.read_json(turns_file)
    assert table.num_rows == len(run.turns) and {"prompt", "completion", "reward"} <= set(table.column_names)


def _structure(run: ExampleRun) -> list[tuple[Any, ...]]:
    """What two runs of one program must agree on: each trace's events (who did what to whom, tokens, rewards)
    and the edges between them, up to the order of work that ran at once (its events may come in either time
    order); not ids, times or content refs (LangChain's messages and tool calls carry random ids). Each event
    is named by what it says and, three times over, by the names of the events its edges join (the
    Weisfeiler-Lehman refinement): two runs agree when they give the same names as often."""
    keys = ("type", "agent", "activation", "to", "from", "decision", "tool", "label", "tokens", "reward",
            "credit")
    structure = []
    for trace in sorted(run.traces, key=lambda t: str(t["task_id"])):
        name = {event["id"]: repr(tuple(event.get(key) for key in keys)) for event in trace["events"]}
        joined: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
        for edge in trace["edges"]:
            joined[edge["src"]].append(("out", edge["type"], edge["dst"]))
            joined[edge["dst"]].append(("in", edge["type"], edge["src"]))
        for _ in range(3):
            name = {
                event: _digest(own, sorted((way, kind, name[other]) for way, kind, other in joined[event]))
                for event, own in name.items()
            }
        structure.append((sorted(name.values()), len(trace["edges"]), trace["topology"]))
    return structure


def _digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def test_two_runs_of_one_program_write_the_same_trace(example_run: Runner) -> None:
    first, second = example_run("supervisor-content-a"), example_run("supervisor-content-b")
    assert first.traces and _structure(first) == _structure(second)
