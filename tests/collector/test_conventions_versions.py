"""Today's GenAI names and the latest ``semantic-conventions-genai`` release's (under
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``): every example runs under both settings; the
spans differ by the renamed names only, and the collector writes the same traces from either."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import orchestrace as ot
import orchestrace_semconv as sc
import pytest
from collector_fixtures import encode_otlp_json
from example_runs import EXAMPLES, ExampleRun, run_examples
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace.config import set_config
from orchestrace_collector.offline import convert_local
from orchestrace_collector.output import TraceDirWriter
from written_traces import convert

pytestmark = pytest.mark.xdist_group("example_runs")

#: The renames of semconv/README.md's table, latest name -> default name (each latest name is new, so the
#: mapping back is unambiguous).
_DEFAULT_OPERATION = {sc.GEN_AI_LATEST.runner_operation: sc.GEN_AI_DEFAULT.runner_operation}
_DEFAULT_KEY = {sc.GEN_AI_LATEST.cache_write_input_tokens: sc.GEN_AI_DEFAULT.cache_write_input_tokens}


def _operation(span: dict[str, Any]) -> str | None:
    for attribute in span["attributes"]:
        if attribute["key"] == sc.GEN_AI_OPERATION_NAME:
            return str(attribute["value"]["stringValue"])
    return None


def _as_default(span: dict[str, Any]) -> dict[str, Any]:
    """An OTLP-JSON span with the latest names replaced by the default ones."""
    span = json.loads(json.dumps(span))
    for attribute in span["attributes"]:
        attribute["key"] = _DEFAULT_KEY.get(attribute["key"], attribute["key"])
        old = attribute["value"].get("stringValue")
        if attribute["key"] == sc.GEN_AI_OPERATION_NAME and old in _DEFAULT_OPERATION:
            attribute["value"]["stringValue"] = _DEFAULT_OPERATION[old]
            span["name"] = _DEFAULT_OPERATION[old] + span["name"].removeprefix(old)
    return span


def _shape(spans: list[dict[str, Any]]) -> Counter[tuple[str, str | None, tuple[str, ...]]]:
    """What a run's spans are, without what differs from run to run (ids, times, values)."""
    return Counter((s["name"].split(" ")[0], _operation(s), tuple(sorted(a["key"] for a in s["attributes"])))
                   for s in spans)


def _events(run: ExampleRun) -> Counter[tuple[str, str, str]]:
    return Counter((e["type"], str(e.get("agent")), str(e.get("decision"))) for e in run.events)


def _written(spans: list[dict[str, Any]], out: Path) -> dict[str, bytes]:
    """The output directory the collector writes from these spans, file by file."""
    out.mkdir(parents=True)
    (out / "spans.json").write_text(json.dumps(
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}))
    result = convert_local([out / "spans.json"], TraceDirWriter(out / "traces"))
    assert result.written and not result.failed and not result.bad_files
    return {path.name: path.read_bytes() for path in sorted((out / "traces").iterdir()) if path.is_file()}


@pytest.fixture(scope="module")
def latest_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ExampleRun]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, f"http, {sc.GEN_AI_LATEST_EXPERIMENTAL}")
        runs = run_examples([(name, tmp_path_factory.mktemp(f"latest-{name}")) for name in EXAMPLES])
    return dict(zip(EXAMPLES, runs, strict=True))


@pytest.mark.parametrize("name", EXAMPLES)
def test_both_settings_write_the_same_traces(name: str, example_run: Any, latest_runs: dict[str, ExampleRun],
                                             tmp_path: Path, trace_dir_validator: Any) -> None:
    default, latest = example_run(name), latest_runs[name]
    # The runs a framework steers, and only they, are conversation turns under the latest names: the Agents
    # SDK's and the langgraph-swarm graph's (any other LangGraph graph is the application's workflow).
    turns = [s for s in latest.spans if _operation(s) == sc.OP_HANDLE_CONVERSATION_TURN]
    assert bool(turns) == (name.startswith("agents_") or name == "swarm")
    assert all(s["name"].startswith(f"{sc.OP_HANDLE_CONVERSATION_TURN} ") for s in turns)
    assert not any(_operation(s) == sc.OP_HANDLE_CONVERSATION_TURN for s in default.spans)
    # Apart from those names, both settings made the same spans, and the same orchestration events.
    as_default = [_as_default(s) for s in latest.spans]
    assert _shape(as_default) == _shape(default.spans)
    assert _events(latest) == _events(default)
    # From the very same spans, either set of names gives the same bytes.
    written = _written(latest.spans, tmp_path / "latest")
    assert _written(as_default, tmp_path / "as-default") == written
    trace_dir_validator(tmp_path / "latest" / "traces")


def test_cache_counts_under_either_name_write_the_same_turns(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A model call with a prompt-cache read and write, recorded by the SDK under the latest names: the
    collector writes the same bytes from it and from it under the default names, and its turn has both
    counts."""
    monkeypatch.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, sc.GEN_AI_LATEST_EXPERIMENTAL)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    handle = ot.configure(tracer_provider=provider, exporter="none")
    try:
        @ot.llm(model="cached-model")
        def answer(question: str) -> str:
            ot.set_usage(input_tokens=1210, output_tokens=12, cache_read_input_tokens=1024,
                         cache_creation_input_tokens=150)
            return "42"

        @ot.agent
        def solver() -> str:
            return answer("what is six times seven?")

        with ot.task("cached"):
            solver()
    finally:
        handle.shutdown()
        set_config(None)
    spans = [span for resource in encode_otlp_json(list(memory.get_finished_spans()))["resourceSpans"]
             for scope in resource["scopeSpans"] for span in scope["spans"]]
    (chat,) = [span for span in spans if _operation(span) == sc.OP_CHAT]
    assert sc.GEN_AI_LATEST.cache_write_input_tokens in {a["key"] for a in chat["attributes"]}
    written = _written(spans, tmp_path / "latest")
    assert _written([_as_default(span) for span in spans], tmp_path / "as-default") == written
    (turn,) = [json.loads(line) for name, data in written.items() if name.startswith("turns")
               for line in data.decode().splitlines()]
    assert (turn["input_tokens"], turn["cache_read_input_tokens"], turn["cache_creation_input_tokens"]) == (
        1210, 1024, 150)


def test_a_plan_span_is_a_phase_of_its_agent() -> None:
    """Another library's spans under the latest conventions, inside an application's rollout: a
    conversation turn (a runner's run) holding an agent whose planning phase (``plan``, which states its
    model and usage, as a framework summing its call may) holds a model call. The turn is a workflow actor of
    its own, the agent the one actor under it, and the model call under ``plan`` that agent's one turn (no
    turn, no actor for the plan)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("another-library")
    op = sc.GEN_AI_OPERATION_NAME
    usage = {sc.GEN_AI_REQUEST_MODEL: "planner-model", sc.GEN_AI_USAGE_INPUT_TOKENS: 30,
             sc.GEN_AI_USAGE_OUTPUT_TOKENS: 8}
    with (
        tracer.start_as_current_span("invoke_workflow rollout", attributes={
            op: sc.OP_INVOKE_WORKFLOW, sc.GEN_AI_WORKFLOW_NAME: "rollout", sc.ORCH_TASK_ID: "plan-task"}),
        tracer.start_as_current_span(f"{sc.OP_HANDLE_CONVERSATION_TURN} planner", attributes={
            op: sc.OP_HANDLE_CONVERSATION_TURN, sc.GEN_AI_WORKFLOW_NAME: "planner"}),
        tracer.start_as_current_span("invoke_agent lead", attributes={op: sc.OP_INVOKE_AGENT,
                                                                      sc.GEN_AI_AGENT_NAME: "lead"}),
    ):
        plan = {op: sc.OP_PLAN, sc.GEN_AI_AGENT_NAME: "lead", **usage}
        with (tracer.start_as_current_span("plan lead", attributes=plan),
              tracer.start_as_current_span("chat planner-model", attributes={op: sc.OP_CHAT, **usage})):
            pass
        with tracer.start_as_current_span("execute_tool search", attributes={op: sc.OP_EXECUTE_TOOL,
                                                                            sc.GEN_AI_TOOL_NAME: "search"}):
            pass
    provider.shutdown()
    written, episode = convert(memory.get_finished_spans())
    actors = [(e["agent"], e.get("decision")) for e in written["events"] if e["type"] != "tool_result"]
    assert actors == [("rollout", "delegate"), ("rollout", None), ("planner", "delegate"), ("planner", None),
                      ("lead", None), ("lead", None), ("planner", None), ("rollout", None)]
    turns = [(turn.agent, turn.input_tokens, turn.output_tokens) for turn in episode.turns]
    assert turns == [("lead", 30, 8)]
    assert written["costs"]["tokens"] == 38
