"""The instrumentor: entry point, idempotent instrument/uninstrument, exact undo, zero-code use."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import langchain_core.tools
import langgraph.graph._branch
import langgraph.pregel._runner
from langchain_core.messages import HumanMessage
from langgraph.pregel import Pregel
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace_langgraph import LangGraphInstrumentor
from sample_graphs import USER_SPAN, pipeline

INPUT = {"messages": [HumanMessage("hi")], "threads": []}
PATCHED = [
    (Pregel, "stream"), (Pregel, "astream"),
    (langgraph.pregel._runner, "run_with_retry"), (langgraph.pregel._runner, "arun_with_retry"),
    (langgraph.graph._branch.BranchSpec, "_finish"),
    (langchain_core.tools.BaseTool, "run"), (langchain_core.tools.BaseTool, "arun"),
]


def is_wrapped(owner: object, attribute: str) -> bool:
    return hasattr(owner.__dict__[attribute] if isinstance(owner, type) else getattr(owner, attribute),
                   "__wrapped__")


def test_entry_point_is_registered() -> None:
    (ep,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "langgraph"]
    assert ep.load() is LangGraphInstrumentor


def test_instrument_twice_uninstrument_twice() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    originals = {(id(o), a): (o.__dict__[a] if isinstance(o, type) else getattr(o, a)) for o, a in PATCHED}
    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    instrumentor.instrument(tracer_provider=provider)
    assert all(is_wrapped(o, a) for o, a in PATCHED)
    pipeline(provider).invoke(INPUT)
    assert [s.name for s in exporter.get_finished_spans()].count("invoke_workflow pipeline") == 1
    assert len([s for s in exporter.get_finished_spans() if s.name.startswith("chat")]) == 1

    instrumentor.uninstrument()
    instrumentor.uninstrument()
    for owner, attribute in PATCHED:  # exactly what was patched is restored
        current = owner.__dict__[attribute] if isinstance(owner, type) else getattr(owner, attribute)
        assert current is originals[(id(owner), attribute)]
    exporter.clear()
    pipeline(provider).invoke(INPUT)
    assert [s.name for s in exporter.get_finished_spans()] == [USER_SPAN]  # only the node's own span

    exporter.clear()
    instrumentor.instrument(tracer_provider=provider)
    try:
        pipeline(provider).invoke(INPUT)
        assert len(exporter.get_finished_spans()) == 6  # workflow, a, b, c, chat, the node's own span
    finally:
        instrumentor.uninstrument()


def test_uninstrument_removes_ours_from_under_a_foreign_wrapper() -> None:
    from opentelemetry.instrumentation.utils import unwrap
    from wrapt import wrap_function_wrapper

    original = Pregel.__dict__["stream"]

    def foreign(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        return wrapped(*args, **kwargs)

    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument()
    wrap_function_wrapper(Pregel, "stream", foreign)  # another instrumentor wraps on top and stays there
    instrumentor.uninstrument()
    try:
        top = Pregel.__dict__["stream"]
        assert top._self_wrapper is foreign
        assert top.__wrapped__ is original  # ours was spliced out from under it
    finally:
        unwrap(Pregel, "stream")
    assert Pregel.__dict__["stream"] is original


APP = """
from langgraph.graph import START, StateGraph
from typing import TypedDict

class State(TypedDict):
    n: int

def first(state: State) -> dict:
    return {"n": state["n"] + 1}

def second(state: State) -> dict:
    return {"n": state["n"] * 10}

g = StateGraph(State)
g.add_node("first", first)
g.add_node("second", second)
g.add_edge(START, "first")
g.add_edge("first", "second")
print("result", g.compile(name="zero_code_app").invoke({"n": 1}))
"""


def test_opentelemetry_instrument_zero_code(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(APP))
    # Ours alone: the other instrumentors installed here (OpenInference's, OpenLLMetry's, the OpenAI Agents
    # one) loaded beside it are test_coexistence's zero-code test (and importing them all takes seconds).
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "zero-code",
           "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "langchain,openai_agents"}
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run([str(bin_dir / "opentelemetry-instrument"), sys.executable, str(app)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "result {'n': 20}" in proc.stdout
    for name in ('"name": "invoke_workflow zero_code_app"', '"name": "first"', '"name": "second"'):
        assert name in proc.stdout, proc.stdout[-3000:]
    assert '"orchestrace.operation": "node"' in proc.stdout
