"""The instrumentor: entry point, one processor however often it is instrumented, quiet when uninstrumented,
the user's processors and the Agents SDK's own exporter left in place, OTel suppression honoured, zero-code
use, and the whole run through a real OTLP exporter into a real collector (ground truth by construction)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    RunConfig,
    Runner,
    TracingProcessor,
    add_trace_processor,
    flush_traces,
    function_tool,
)
from agents.tracing import TracingConfig
from agents_apps import TRIAGE_TOKENS, parallel_tokens, triage_app
from agents_spans import SENT, Spans
from collector_fixtures import RunningCollector, run_into_collector, validate_trace_dir
from opentelemetry.instrumentation.utils import suppress_instrumentation
from orchestrace_openai_agents import OpenAIAgentsInstrumentor

from examples.agents_fakes import ScriptedResponsesModel, UntracedModel, call, say

HERE = Path(__file__).resolve().parent


def test_entry_point_is_registered() -> None:
    (ep,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "openai_agents"]
    assert ep.load() is OpenAIAgentsInstrumentor


def test_instrument_twice_records_once_and_uninstrument_goes_quiet(spans: Spans) -> None:
    OpenAIAgentsInstrumentor().instrument(tracer_provider=spans.provider)  # already instrumented: no-op
    Runner.run_sync(triage_app(), "q")
    assert len(spans.named("invoke_workflow Agent workflow")) == 1
    assert len(spans.named("invoke_agent math")) == 1
    OpenAIAgentsInstrumentor().uninstrument()
    Runner.run_sync(triage_app(), "q")
    assert len(spans.named("invoke_workflow Agent workflow")) == 1  # nothing more
    OpenAIAgentsInstrumentor().instrument(tracer_provider=spans.provider)
    Runner.run_sync(triage_app(), "q")
    assert len(spans.named("invoke_workflow Agent workflow")) == 2


def test_a_model_that_traces_nothing_goes_quiet_when_uninstrumented(spans: Spans) -> None:
    """Its calls are wrapped on the model itself: uninstrumented, they pass straight through (the model keeps
    answering); instrumented again, they are turns again."""
    agent = Agent(name="own", model=UntracedModel([say("one"), say("two"), say("three")], model="own-model"))
    assert Runner.run_sync(agent, "q").final_output == "one"
    assert len(spans.named("chat own-model")) == 1
    OpenAIAgentsInstrumentor().uninstrument()
    assert Runner.run_sync(agent, "q").final_output == "two"
    assert len(spans.named("chat own-model")) == 1
    OpenAIAgentsInstrumentor().instrument(tracer_provider=spans.provider)
    assert Runner.run_sync(agent, "q").final_output == "three"
    assert len(spans.named("chat own-model")) == 2


def test_uninstrumented_mid_run_the_started_spans_still_end(spans: Spans) -> None:
    @function_tool
    def stop_tracing() -> str:
        """Uninstruments, from inside the run."""
        OpenAIAgentsInstrumentor().uninstrument()
        return "done"

    agent = Agent(name="quitter", tools=[stop_tracing], model=ScriptedResponsesModel(
        [call(("stop_tracing", {})), say("bye")]))
    assert Runner.run_sync(agent, "go").final_output == "bye"
    # what started before ends (exported); the model call after it starts no span
    assert sorted(s.name for s in spans.all) == [
        "chat scripted-model", "execute_tool stop_tracing", "invoke_agent quitter",
        "invoke_workflow Agent workflow"]


class Recorder(TracingProcessor):
    """A user's own processor."""

    def __init__(self) -> None:
        self.ended: list[str] = []
        self.enabled = True

    def on_trace_start(self, trace: Any) -> None: ...
    def on_trace_end(self, trace: Any) -> None: ...
    def on_span_start(self, span: Any) -> None: ...

    def on_span_end(self, span: Any) -> None:
        if self.enabled:
            self.ended.append(span.span_data.type)

    def shutdown(self) -> None: ...
    def force_flush(self) -> None: ...


def test_the_users_processors_and_the_sdks_exporter_stay(spans: Spans) -> None:
    recorder = Recorder()
    add_trace_processor(recorder)
    try:
        Runner.run_sync(triage_app(), "q")
        assert recorder.ended.count("agent") == 2 and "function" in recorder.ended
        assert len(spans.named("invoke_agent math")) == 1
        # With no API key the Agents SDK's own exporter sends nothing (the ``offline`` fixture checks it).
        # Given a key for one run, it still exports that run (to the recording transport): it is still there.
        sent = len(SENT)
        Runner.run_sync(triage_app(), "q", run_config=RunConfig(tracing=TracingConfig(api_key="sk-test")))
        flush_traces()
        assert len(SENT) > sent and all(r.headers["Authorization"] == "Bearer sk-test" for r in SENT[sent:])
        assert {r.url.host for r in SENT[sent:]} == {"api.openai.com"}  # where it would have gone
        del SENT[sent:]
    finally:
        recorder.enabled = False  # the Agents SDK cannot remove one processor


def test_suppressed_instrumentation_records_nothing(spans: Spans) -> None:
    with suppress_instrumentation():
        assert Runner.run_sync(triage_app(), "q").final_output == "2 + 3 = 5"
    assert spans.all == []


PROGRAM = textwrap.dedent("""
    import asyncio, sys
    exporter, endpoint, tests = sys.argv[1:4]
    sys.path.insert(0, tests)
    import orchestrace as ot
    from agents import Runner
    from orchestrace_openai_agents import OpenAIAgentsInstrumentor
    from agents_apps import parallel_tools_app, triage_app

    handle = ot.configure("agents-app", exporter=exporter, endpoint=endpoint, capture_content=True)
    OpenAIAgentsInstrumentor().instrument()
    Runner.run_sync(triage_app(), "What is 2 + 3?")
    asyncio.run(Runner.run(parallel_tools_app(3, delay=0.1), "research"))
    handle.shutdown()
""")


def test_runs_over_otlp_into_the_collector(collector: RunningCollector) -> None:
    # OTLP/HTTP only: both transports end in the same conversion (tests/collector covers gRPC).
    run_into_collector(collector, "otlp", PROGRAM, str(HERE))
    traces = validate_trace_dir(collector.out)
    assert len(traces) == 2
    by_agent = {next(e["to"] for e in t["events"] if e["type"] == "spawn"): t for t in traces.values()}
    triage, research = by_agent["triage"], by_agent["orchestrator"]
    assert triage["costs"]["tokens"] == TRIAGE_TOKENS and triage["costs"]["tool_calls"] == 1
    handoffs = [e for e in triage["events"] if e.get("handoff")]
    assert [(e["agent"], e["to"]) for e in handoffs] == [("triage", "math")]
    assert research["costs"]["tokens"] == parallel_tokens(3) and research["costs"]["tool_calls"] == 3
    spawned = sorted(e["to"] for e in research["events"]
                     if e["type"] == "spawn" and e["agent"] == "orchestrator")
    assert spawned == ["researcher0", "researcher1", "researcher2"]
    assert all(t["system"] == "agents-app" for t in traces.values())
    # the turns file: one sample per model call, with its prompt (content capture is on)
    turns = [line for path in collector.out.glob("turns*.jsonl") for line in path.read_text().splitlines()]
    assert len(turns) == 3 + 2 + 3


ZERO_CODE_APP = textwrap.dedent("""
    from agents import Agent, Runner
    from examples.agents_fakes import ScriptedResponsesModel, say

    agent = Agent(name="greeter", model=ScriptedResponsesModel([say("hello")]))
    print("result", Runner.run_sync(agent, "hi").final_output)
""")


def test_opentelemetry_instrument_zero_code(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(ZERO_CODE_APP)
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "zero-code", "PYTHONPATH": str(HERE.parents[1])}
    env.pop("OPENAI_API_KEY", None)
    command = [str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable, str(app)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    assert "result hello" in done.stdout
    for name in ('"name": "invoke_workflow Agent workflow"', '"name": "invoke_agent greeter"',
                 '"name": "chat scripted-model"'):
        assert name in done.stdout, done.stdout[-3000:]
