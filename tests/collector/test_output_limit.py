"""The amplification limit: hostile spans whose strings would be written many times (a huge agent name on
every event, a conversation's prompts rebuilt on every turn) give bounded, valid, marked output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from collector_fixtures import encode_protobuf, start_collector, validate_trace_dir
from fault_support import PeakRss, Sent, record_fault
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace import semconv as sc
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.output import latest_turns
from orchestrace_collector.output_limit import ID_CHARS, limit_output, shorten

PROTOBUF = {"Content-Type": "application/x-protobuf"}
BIG = 64 << 10


def _record(build: Any) -> list[Any]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    build(provider.get_tracer("hostile"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def _named_agents(task: str, names: list[str], tools: int) -> list[Any]:
    """A workflow running two activations of each agent (so labels are ``name#k``), with ``tools`` tool
    calls each; every name, role and id is as long as given."""

    def build(tracer: Any) -> None:
        root = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.ORCH_TASK_ID: task}
        with tracer.start_as_current_span("invoke_workflow", attributes=root):
            for name in names * 2:
                agent = {
                    sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                    sc.GEN_AI_AGENT_NAME: name,
                    sc.ORCH_AGENT_ROLE: "r" + name,
                    sc.GEN_AI_AGENT_ID: "id" + name,
                }
                with tracer.start_as_current_span("invoke_agent", attributes=agent):
                    for _ in range(tools):
                        tool = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "lookup"}
                        with tracer.start_as_current_span("execute_tool", attributes=tool):
                            pass

    return _record(build)


def _conversation(task: str, calls: int, size: int) -> list[Any]:
    """One agent's chat calls, each naming the previous one as its prompt's prefix (prompts stored once):
    its turns, rebuilt whole, grow with the square of ``calls``."""

    def build(tracer: Any) -> None:
        root = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.ORCH_TASK_ID: task}
        agent = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "talker"}
        with tracer.start_as_current_span("wf", attributes=root), tracer.start_as_current_span(
            "agent", attributes=agent
        ):
            previous, history = None, 0
            for index in range(calls):
                attrs: dict[str, Any] = {
                    sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                    sc.GEN_AI_REQUEST_MODEL: "m",
                    sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "content": f"q{index} " * size}]),
                    sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "content": f"a{index}"}]),
                }
                if previous is not None:
                    attrs |= {sc.ORCH_PREFIX_SPAN_ID: previous, sc.ORCH_PREFIX_LENGTH: history,
                              sc.ORCH_INPUT_MESSAGE_COUNT: history + 1}
                with tracer.start_as_current_span("chat m", attributes=attrs) as span:
                    previous = format(span.get_span_context().span_id, "016x")
                history += 2

    return _record(build)


def test_shorten_keeps_names_distinct_and_labels_matching() -> None:
    a, b = "x" * 1000 + "a", "x" * 1000 + "b"
    assert shorten(a) != shorten(b) and len(shorten(a)) < ID_CHARS
    assert shorten(a + "#2") == shorten(a) + "#2"
    assert shorten("agent:" + a) == "agent:" + shorten(a)
    assert shorten(a + ".late1") == shorten(a) + ".late1"
    assert shorten(shorten(a)) == shorten(a) and shorten("short") == "short"
    many_parts = ".".join(["part"] * 1000)  # short parts, long whole: still bounded
    assert len(shorten(many_parts)) < ID_CHARS


def test_hostile_names_and_conversations_give_bounded_valid_marked_output(tmp_path: Path) -> None:
    names = ["n" * BIG + "-one", "n" * BIG + "-two"]
    agents = _named_agents("huge-names", names, tools=100)
    talk = _conversation("long-talk", calls=80, size=800)  # 3 KiB a message, 10 MiB of turns unbounded
    body = encode_protobuf(agents + talk)
    collector = start_collector(tmp_path / "out", "--quiet-period", "0.2", "--max-trace-mb", "1")
    rss = PeakRss(collector.process.pid)
    response = httpx.post(collector.http_endpoint, content=body, headers=PROTOBUF, timeout=60)
    assert response.status_code == 200
    assert collector.stop() == 0
    peak = rss.stop()

    traces = {t["task_id"]: t for t in validate_trace_dir(collector.out).values()}
    lines = {
        json.loads(line)["task_id"]: len(line)
        for line in (collector.out / "traces-00000.jsonl").read_text().splitlines()
    }
    turns = latest_turns(collector.out, {t["trace_id"]: t for t in traces.values()})

    named = traces["huge-names"]
    # Unbounded, each of the agents' 800 events would carry 3 copies of a 64 KiB string (150 MiB).
    assert len(named["events"]) > 800
    assert lines["huge-names"] < 2 * len(body)
    cut_names = {shorten(n) for n in names}
    assert {e["agent"] for e in named["events"] if e.get("activation")} == cut_names | {"invoke_workflow"}
    assert {e["to"] for e in named["events"] if e["type"] == "spawn"} <= cut_names, "to names match cut names"
    assert named["metrics"]["truncated"] == 6  # 2 names, 2 roles, 2 ids (names carry no activation labels)
    assert named["metrics"]["truncated_bytes"] > 400 * 3 * BIG

    talked = traces["long-talk"]
    written = lines["long-talk"] + sum(
        len(line)
        for line in (collector.out / "turns-00000.jsonl").read_text().splitlines()
        if json.loads(line)["trace_id"] == talked["trace_id"]
    )
    unbounded = sum(len(f"q{j} ") * 800 for k in range(80) for j in range(k + 1))
    assert unbounded > 8 << 20 and len(body) < 2 << 20
    assert written <= 1.1 * (1 << 20), f"{written} bytes written for a 1 MiB limit"
    by_start = sorted(turns[talked["trace_id"]], key=lambda t: t["t"])
    for k, turn in enumerate(by_start):
        assert turn["completion"][0]["content"] == f"a{k}", "completions are kept"
        newest = turn["prompt"][-1]["content"]
        assert newest == f"q{k} " * 800, "the newest prompt message is kept first"
        assert len(turn["prompt"]) == 2 * k + 1, "cut messages keep their place and role"
    cut = [t for t in by_start if t.get("truncated")]
    assert cut and by_start[0] not in cut, "only the long prompts are cut"
    assert by_start[-1]["prompt"][0]["content"] == "", "the oldest messages go first"
    assert talked["metrics"]["truncated"] == len(cut)
    assert talked["metrics"]["truncated_bytes"] == sum(t["truncated"]["prompt"] for t in cut)
    sent = Sent(sent=1, acked={"huge-names": len(agents), "long-talk": len(talk)})
    record_fault(
        f"amplification: one {len(body) >> 10} KiB request (64 KiB names x 800 events, 80 chained prompts), "
        f"--max-trace-mb 1: {max(lines.values()) >> 10} KiB largest trace line, {written >> 10} KiB for the "
        "conversation",
        sent,
        sum(t["metrics"]["spans"] for t in traces.values()),
        peak,
    )


def test_under_the_budget_nothing_is_cut() -> None:
    episode = convert_episode([span_from_readable(s) for s in _conversation("small", calls=5, size=10)])
    before = [t.model_dump() for t in episode.turns]
    limit_output(episode.trace, episode.turns)
    assert [t.model_dump() for t in episode.turns] == before
    assert "truncated" not in episode.trace.metrics


def test_a_trace_whose_structure_alone_is_over_the_budget_keeps_its_start_within_it(tmp_path: Path) -> None:
    """Many spans (here 2 agents x 2 activations x 400 tool calls) against a 64 KiB budget: the text cuts
    cannot make it fit, so its latest events go, and the trace says so."""
    spans = _named_agents("many-spans", ["alpha", "beta"], tools=400)
    collector = start_collector(tmp_path / "out", "--quiet-period", "0.2", "--max-trace-mb", "0.0625")
    try:
        body = encode_protobuf(spans)
        assert httpx.post(collector.http_endpoint, content=body, headers=PROTOBUF).status_code == 200
    finally:
        assert collector.stop() == 0
    (trace,) = validate_trace_dir(collector.out).values()
    files = collector.out.glob("traces-*.jsonl")
    (line,) = [line for path in files for line in path.read_bytes().splitlines() if line]
    assert len(line) <= 64 << 10, f"{len(line)} bytes written for a 64 KiB budget"
    whole = convert_episode([span_from_readable(s) for s in spans]).trace  # type: ignore[arg-type]
    kept = len(trace["events"])
    assert trace["metrics"]["truncated_events"] == len(whole.events) - kept > 0
    assert trace["metrics"]["incomplete"] == 1
    first = sorted(whole.events, key=lambda e: e.t)[:kept]
    assert {e["id"] for e in trace["events"]} == {e.id for e in first}, "its start kept, its latest left out"
    assert "latest" in collector.log_text() and "left out" in collector.log_text()


def _decisions(task: str, options: list[str], decisions: int) -> list[Any]:
    """An agent making ``decisions`` routing decisions among ``options`` (agent names), each choosing the
    first of them, as ``ot.decide(..., options=...)`` records them."""

    def build(tracer: Any) -> None:
        root = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.ORCH_TASK_ID: task}
        agent = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "router"}
        with tracer.start_as_current_span("wf", attributes=root), tracer.start_as_current_span(
            "agent", attributes=agent
        ) as span:
            for _ in range(decisions):
                decision = {sc.ORCH_DECISION_KIND: "route", sc.ORCH_TARGET_AGENT: options[0],
                            sc.ORCH_DECISION_OPTIONS: options}
                span.add_event(sc.EVENT_DECISION, decision)

    return _record(build)


def test_decision_options_are_cut_as_names_are_and_count_in_the_budget(tmp_path: Path) -> None:
    """A decision's ``options`` are agent names: each longer than 256 characters is cut as ``to`` is (the
    choice still one of its options), and many options count in the budget like any other text."""
    huge = [f"{k}-" + "o" * BIG for k in range(8)]  # 8 x 64 KiB names, on each of 20 decisions
    many = [f"option-{k:06d}-" + "p" * 20 for k in range(5000)]  # 170 KiB of short names, on each of 20
    body = encode_protobuf(_decisions("huge-options", huge, 20) + _decisions("many-options", many, 20))
    collector = start_collector(tmp_path / "out", "--quiet-period", "0.2", "--max-trace-mb", "1")
    try:
        response = httpx.post(collector.http_endpoint, content=body, headers=PROTOBUF, timeout=60)
        assert response.status_code == 200
    finally:
        assert collector.stop() == 0
    traces = {t["task_id"]: t for t in validate_trace_dir(collector.out).values()}
    lines = {json.loads(line)["task_id"]: len(line)
             for line in (collector.out / "traces-00000.jsonl").read_text().splitlines()}

    decided = [e for e in traces["huge-options"]["events"] if e.get("options")]
    assert len(decided) == 20
    for event in decided:
        assert event["options"] == [shorten(o) for o in huge]
        assert event["to"] == event["options"][0]  # the choice matches its cut option
    assert traces["huge-options"]["metrics"]["truncated"] == len(huge)  # each distinct name counted once
    assert lines["huge-options"] < 100 << 10  # 10 MiB of options unbounded

    assert lines["many-options"] <= 1 << 20, f"{lines['many-options']} bytes written for a 1 MiB limit"
    assert traces["many-options"]["metrics"]["truncated"] > 0
