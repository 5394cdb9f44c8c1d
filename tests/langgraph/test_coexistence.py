"""Beside OpenInference's and OpenLLMetry's LangChain instrumentors: ours unchanged, theirs well parented."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
from fakes import ScriptedChatModel, tool_call
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from span_checks import Spans

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
    """OpenLLMetry's uninstrument misses its ``Pregel.stream``/``astream`` and ``Command.__init__`` patches
    (it unwraps ``"Pregel.stream"`` on the ``langgraph.pregel`` module); a later test must not run them."""
    import langgraph.pregel
    import langgraph.types
    from opentelemetry.instrumentation.utils import unwrap

    for owner, attribute in ((langgraph.pregel.Pregel, "stream"), (langgraph.pregel.Pregel, "astream"),
                             (langgraph.types.Command, "__init__")):
        current = owner.__dict__.get(attribute)
        wrapper = getattr(current, "_self_wrapper", None)
        if wrapper is not None and "opentelemetry.instrumentation.langchain" in wrapper.__module__:
            unwrap(owner, attribute)


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

