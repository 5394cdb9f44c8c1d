"""Beside OpenInference's and OpenLLMetry's LangChain instrumentors: ours unchanged, theirs well parented."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from collector_fixtures import start_collector, validate_trace_dir
from episodes import run_graph
from fakes import ScriptedChatModel, tool_call
from heldout_graphs import desk, handoff_team, moving_desk, tool_loop
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from orchestrace_collector.convert import Episode
from orchestrace_langgraph import LangGraphInstrumentor
from span_checks import Spans
from written_traces import convert

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@tool
def lookup(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def run_agent(stream: bool) -> None:
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[tool_call("lookup", {"city": "Oslo"}, "c1")]), AIMessage("It is sunny."),
    ])
    agent = create_react_agent(model, [lookup], name="weather")
    inputs = {"messages": [HumanMessage("weather?")]}
    if stream:
        list(agent.stream(inputs, stream_mode="messages"))
    else:
        agent.invoke(inputs)


def remove_openllmetry_leftovers() -> None:
    """The other instrumentors' uninstrument leaves patches behind (OpenLLMetry unwraps ``"Pregel.stream"``
    and ``"BaseCallbackManager.__init__"`` by dotted names its ``unwrap`` does not resolve; one library's
    unwrap may remove the other's wrapper instead of its own): splice every wrapper of theirs out of the
    chain, so that a later test does not run them."""
    import langgraph.pregel
    import langgraph.types
    from langchain_core.callbacks import BaseCallbackManager

    theirs = ("opentelemetry.instrumentation.langchain", "openinference.instrumentation.langchain")
    for owner, attribute in ((langgraph.pregel.Pregel, "stream"), (langgraph.pregel.Pregel, "astream"),
                             (langgraph.types.Command, "__init__"), (BaseCallbackManager, "__init__")):
        outer: Any = None
        current = owner.__dict__.get(attribute)
        while hasattr(current, "__wrapped__") and hasattr(current, "_self_wrapper"):
            wrapper = current._self_wrapper
            module = getattr(wrapper, "__module__", "") or type(wrapper).__module__
            inner = current.__wrapped__
            if module.startswith(theirs):
                if outer is None:
                    setattr(owner, attribute, inner)
                else:
                    outer.__wrapped__ = inner
            else:
                outer = current
            current = inner


@pytest.mark.parametrize("stream", [False, True])
def test_beside_openinference_and_openllmetry(spans: Spans, stream: bool) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor as OpenInference
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor as OpenLLMetry

    run_agent(stream)
    alone = Counter(s.name for s in spans.ours)
    assert alone["chat scripted-model"] == 2 and alone["execute_tool lookup"] == 1
    spans.clear()

    others = [OpenInference(), OpenLLMetry()]
    for other in others:
        other.instrument(tracer_provider=spans.provider)
    try:
        run_agent(stream)
    finally:
        for other in others:
            other.uninstrument()
        remove_openllmetry_leftovers()
    assert Counter(s.name for s in spans.ours) == alone  # no duplicates, nothing lost
    theirs = [s for s in spans.all if s not in spans.ours]
    scopes = {s.instrumentation_scope.name for s in theirs if s.instrumentation_scope is not None}
    assert any("openinference" in n for n in scopes) and any("langchain" in n and "openinference" not in n
                                                             for n in scopes), scopes
    trace_ids = {s.context.trace_id for s in spans.all}
    assert len(trace_ids) == 1  # one trace: their spans joined ours
    ids = {s.context.span_id for s in spans.all}
    for s in spans.all:  # every parent was exported: nothing dangles
        assert s.parent is None or s.parent.span_id in ids, s.name
    assert len([s for s in spans.all if s.parent is None]) == 1
    # our tree is intact: model calls and tools directly under our nodes, nodes under our run
    for chat in spans.named("chat scripted-model"):
        assert spans.parent_name(chat) == "agent"
    (tool_span,) = [s for s in spans.ours if s.name == "execute_tool lookup"]
    assert spans.parent_name(tool_span) == "tools"
    run = spans.one("invoke_workflow weather")
    assert all(spans.parent(s) is run for s in spans.ours if s.name in ("agent", "tools"))



def signature(written: dict[str, Any], episode: Episode) -> tuple[Counter[tuple[Any, ...]], list[Any], float]:
    """What must not change when other instrumentations run beside ours: events (by type, agent, activation,
    decision, target, tool, reason, label), turns with their tokens, the token cost."""
    events = Counter(
        (e["type"], e["agent"], e.get("activation"), e.get("decision"), e.get("to"), e.get("to_activation"),
         e.get("tool"), e.get("reason"), e.get("label"))
        for e in written["events"]
    )
    turns = sorted((t.agent, t.activation, t.input_tokens, t.output_tokens) for t in episode.turns)
    return events, turns, written["costs"]["tokens"]


APPS: dict[str, tuple[Callable[[], Any], Any]] = {
    "desk": (desk, {"n": 0}),
    "tool_loop": (tool_loop, {"messages": [HumanMessage("bolts?")]}),
    "handoff": (handoff_team, {"log": []}),
    "moving": (moving_desk, {"offers": []}),
}


@pytest.mark.parametrize("others", ["openinference", "openllmetry", "both", "theirs_first"])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream", "astream_events"])
@pytest.mark.parametrize("app", sorted(APPS))
async def test_traces_are_the_same_beside_other_instrumentations(
    spans: Spans, app: str, mode: str, others: str
) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor as OpenInference
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor as OpenLLMetry

    build, graph_input = APPS[app]
    await run_graph(build(), graph_input, None, mode)
    alone = signature(*convert(spans.all))
    assert alone[0]  # something was recorded
    spans.clear()

    chosen = {"openinference": [OpenInference()], "openllmetry": [OpenLLMetry()],
              "both": [OpenInference(), OpenLLMetry()],
              "theirs_first": [OpenLLMetry(), OpenInference()]}[others]
    ours = LangGraphInstrumentor()  # the fixture's (an instrumentor is a singleton)
    if others == "theirs_first":  # theirs patch LangChain and LangGraph before ours does
        ours.uninstrument()
    for other in chosen:
        other.instrument(tracer_provider=spans.provider)
    if others == "theirs_first":
        ours.instrument(tracer_provider=spans.provider)
    try:
        await run_graph(build(), graph_input, None, mode)
    finally:
        for other in reversed(chosen):  # last in, first out: each unwraps its own patch
            other.uninstrument()
        remove_openllmetry_leftovers()
    assert len(spans.all) > len(spans.ours)  # they did record
    assert signature(*convert(spans.all)) == alone
    # Ours (the integration's and the spans the nodes' code starts) stay one trace, whatever theirs did.
    mine = [s for s in spans.all
            if s.instrumentation_scope and s.instrumentation_scope.name.startswith("orchestrace")]
    assert len({s.context.trace_id for s in mine}) == 1


ZERO_CODE_APP = """
import sys
sys.path.insert(0, {tests!r})
from heldout_graphs import desk, moving_desk, tool_loop
from langchain_core.messages import HumanMessage
desk().invoke({{"n": 0}})
moving_desk().invoke({{"offers": []}})
tool_loop().invoke({{"messages": [HumanMessage("bolts?")]}})
from opentelemetry import trace
trace.get_tracer_provider().shutdown()
"""


def test_zero_code_with_every_instrumentor_installed_gives_the_same_traces(tmp_path: Path) -> None:
    """``opentelemetry-instrument`` loads ours, OpenInference's and OpenLLMetry's (all installed here): the
    collected traces are those of ours alone (the other two disabled by their entry-point name)."""
    app = tmp_path / "app.py"
    app.write_text(ZERO_CODE_APP.format(tests=str(Path(__file__).parent)))

    def run(disabled: str) -> tuple[list[list[tuple[Any, ...]]], list[tuple[Any, ...]]]:
        collector = start_collector(tmp_path / f"out-{disabled or 'all'}", "--quiet-period", "0.2")
        try:
            env = {**os.environ, "OTEL_TRACES_EXPORTER": "otlp",
                   "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                   "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.http_endpoint,
                   "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
                   "OTEL_SERVICE_NAME": "zero-code", "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled}
            instrument = str(Path(sys.executable).parent / "opentelemetry-instrument")
            command = [instrument, sys.executable, str(app)]
            proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180, check=False)
            assert proc.returncode == 0, proc.stderr[-3000:]
        finally:
            collector.stop()
        traces = validate_trace_dir(collector.out)
        turns = [json.loads(line) for f in sorted(collector.out.glob("turns*.jsonl"))
                 for line in f.read_text().splitlines() if line.strip()]
        return (
            sorted(
                sorted((e["type"], e["agent"], e.get("activation"), e.get("decision"), e.get("to"),
                        e.get("to_activation"), e.get("tool")) for e in t["events"])
                for t in traces.values()
            ),
            sorted((t["agent"], t.get("activation"), t.get("input_tokens"), t.get("output_tokens"))
                   for t in turns),
        )

    with ThreadPoolExecutor(2) as both:  # each run in its own processes: they can run at once
        alone, together = both.map(run, ("langchain", ""))
    assert len(alone[0]) == 3 and alone[1]
    assert together == alone
