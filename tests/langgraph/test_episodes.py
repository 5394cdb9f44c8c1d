"""Which episode a graph run belongs to: one per invocation with new input, even on a reused thread; a resume
joins the episode it continues (also when another process resumes it from the checkpoint); inside
``ot.task`` the task's episode."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import orchestrace as ot
import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from opentelemetry.sdk.trace import ReadableSpan
from orchestrace import semconv as sc
from orchestrace.config import set_config
from orchestrace_collector import convert_spans
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_langgraph import LangGraphInstrumentor
from span_checks import Spans


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def two_step_graph(*, ask: bool = False, checkpointer: bool = True) -> Any:
    def first(state: State) -> dict[str, Any]:
        return {"steps": ["first"]}

    def second(state: State) -> dict[str, Any]:
        answer = interrupt("go on?") if ask else "auto"
        return {"steps": [f"second:{answer}"]}

    g = StateGraph(State)
    g.add_node("first", first)
    g.add_node("second", second)
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    return g.compile(checkpointer=InMemorySaver() if checkpointer else None, name="pair")


def episodes_of(runs: list[ReadableSpan]) -> list[str]:
    return [str(run.attributes[sc.ORCH_EPISODE_ID]) for run in runs]  # type: ignore[index]


def traces_of(spans: Spans) -> list[Any]:
    return convert_spans(span_from_readable(s) for s in spans.all)


def test_new_input_on_a_reused_thread_is_a_new_episode(spans: Spans) -> None:
    graph = two_step_graph()
    config = {"configurable": {"thread_id": "shared-thread"}}
    graph.invoke({"steps": []}, config)
    graph.invoke({"steps": ["more"]}, config)  # a second rollout in the same conversation
    runs = spans.named("invoke_workflow pair")
    first, second = episodes_of(runs)
    assert first != second and "shared-thread" not in (first, second)
    assert [run.attributes[sc.GEN_AI_CONVERSATION_ID] for run in runs] == [first, second]
    assert sorted(t.trace_id for t in traces_of(spans)) == sorted([first, second])


def test_a_resume_joins_its_episode_even_from_a_fresh_instrumentor(spans: Spans) -> None:
    graph = two_step_graph(ask=True)
    config = {"configurable": {"thread_id": "asked-thread"}}
    graph.invoke({"steps": []}, config)
    # Another process resuming from the same checkpointer knows nothing in memory: the episode id is read
    # back from the checkpoint's metadata.
    LangGraphInstrumentor().uninstrument()
    LangGraphInstrumentor().instrument(tracer_provider=spans.provider)
    result = graph.invoke(Command(resume="yes"), config)
    assert result["steps"] == ["first", "second:yes"]
    asked, resumed = episodes_of(spans.named("invoke_workflow pair"))
    assert asked == resumed
    (trace,) = traces_of(spans)
    assert trace.trace_id == asked
    assert len({e.otel_trace_id for e in trace.events}) == 2  # two OTel traces, one episode
    graph.invoke({"steps": []}, config)  # new input after the resume: a new rollout again
    assert len(set(episodes_of(spans.named("invoke_workflow pair")))) == 2


@pytest.fixture
def task_spans(spans: Spans) -> Iterator[Spans]:
    """``ot.task`` on the instrumentor's provider, so both record into the same spans."""
    handle = ot.configure(tracer_provider=spans.provider)
    yield spans
    handle.shutdown()
    set_config(None)


def test_runs_inside_tasks_are_the_tasks_episodes(task_spans: Spans) -> None:
    graph = two_step_graph()
    config = {"configurable": {"thread_id": "one-thread"}}
    ids = []
    for _ in range(2):
        with ot.task("shared-task") as run:
            graph.invoke({"steps": []}, config)
        ids.append(run.episode_id)
    runs = task_spans.named("invoke_workflow pair")
    assert episodes_of(runs) == ids and ids[0] != ids[1]
    traces = traces_of(task_spans)
    assert sorted(t.trace_id for t in traces) == sorted(ids)
    assert {t.task_id for t in traces} == {"shared-task"}


def test_an_app_can_still_choose_the_episode(spans: Spans) -> None:
    LangGraphInstrumentor().uninstrument()
    LangGraphInstrumentor().instrument(tracer_provider=spans.provider,
                                       episode_id=lambda config: config["configurable"]["thread_id"])
    graph = two_step_graph()
    for _ in range(2):
        graph.invoke({"steps": []}, {"configurable": {"thread_id": "chosen"}})
    assert episodes_of(spans.named("invoke_workflow pair")) == ["chosen", "chosen"]
    (trace,) = traces_of(spans)
    assert trace.trace_id == "chosen"


def test_a_run_given_no_config_shows_the_chooser_langchains_default_config(spans: Spans) -> None:
    """A top-level run given no config is read without LangChain's merging (most runs: a shortcut); the app's
    chooser still sees what ``ensure_config`` makes, a fresh copy every run."""
    seen: list[dict[str, Any]] = []
    LangGraphInstrumentor().uninstrument()
    LangGraphInstrumentor().instrument(tracer_provider=spans.provider,
                                       episode_id=lambda config: seen.append(config) or None)
    graph = two_step_graph(checkpointer=False)
    for _ in range(2):
        graph.invoke({"steps": []})
    assert seen == [dict(ensure_config(None))] * 2
    assert seen[0] is not seen[1] and seen[0]["metadata"] is not seen[1]["metadata"]
    assert len(set(episodes_of(spans.named("invoke_workflow pair")))) == 2


def test_a_run_without_a_thread_is_an_episode_too(spans: Spans) -> None:
    graph = two_step_graph(checkpointer=False)
    graph.invoke({"steps": []})
    graph.invoke({"steps": []})
    assert len(set(episodes_of(spans.named("invoke_workflow pair")))) == 2
    assert len(traces_of(spans)) == 2


def test_the_episode_id_never_reaches_a_run_without_tracing() -> None:
    graph = two_step_graph()
    out = graph.invoke({"steps": []}, {"configurable": {"thread_id": "t"}})
    assert out["steps"] == ["first", "second:auto"]
    saved = graph.checkpointer.get_tuple({"configurable": {"thread_id": "t"}})
    assert "orchestrace_episode_id" not in saved.metadata



def test_the_episode_id_is_in_checkpoints_only(spans: Spans) -> None:
    """Kept in the checkpoint's metadata when the run writes checkpoints (its own saver, or one lent through
    the config as LangGraph's server does); left out of the config of a run that writes none (LangChain
    would merge it into every task's metadata for nothing)."""
    seen: list[dict[str, Any]] = []

    def look(state: State, config: RunnableConfig) -> dict[str, Any]:
        seen.append(dict(config.get("metadata") or {}))
        return {"steps": ["look"]}

    builder = StateGraph(State)
    builder.add_node("look", look)
    builder.add_edge(START, "look")
    graph = builder.compile(name="look")
    graph.invoke({"steps": []})
    saver = InMemorySaver()
    lent = {"configurable": {"thread_id": "lent", CONFIG_KEY_CHECKPOINTER: saver}}
    graph.invoke({"steps": []}, lent)
    no_checkpoint, lent_checkpoint = episodes_of(spans.named("invoke_workflow look"))
    assert "orchestrace_episode_id" not in seen[0]
    assert seen[1]["orchestrace_episode_id"] == lent_checkpoint != no_checkpoint
    saved = saver.get_tuple({"configurable": {"thread_id": "lent"}})
    assert saved is not None and saved.metadata["orchestrace_episode_id"] == lent_checkpoint
