"""Static breakpoints (``interrupt_before`` / ``interrupt_after`` at compile or call time): the run pauses
for a human, as with ``interrupt()``; it does not stop, and resuming it continues the same episode."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from orchestrace import semconv as sc
from span_checks import Spans


class Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def draft_review_publish(**compile_kwargs: Any) -> Any:
    g = StateGraph(Steps)
    for name in ("draft", "review", "publish"):
        g.add_node(name, lambda state, name=name: {"steps": [name]})
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_edge("review", "publish")
    return g.compile(checkpointer=InMemorySaver(), name="pipeline", **compile_kwargs)


def _events(spans: Spans, name: str) -> list[dict[str, Any]]:
    return [dict(e) for s in spans.all for e in spans.events(s, name)]


@pytest.mark.parametrize(
    ("where", "compile_kwargs", "call_kwargs", "ran_first"),
    [
        ("before", {"interrupt_before": ["review"]}, {}, ["draft"]),
        ("after", {"interrupt_after": ["review"]}, {}, ["draft", "review"]),
        ("before", {}, {"interrupt_before": ["publish"]}, ["draft", "review"]),
    ],
)
async def test_a_breakpoint_is_a_human_intervention_not_a_stop(
    spans: Spans,
    where: str,
    compile_kwargs: dict[str, Any],
    call_kwargs: dict[str, Any],
    ran_first: list[str],
) -> None:
    graph = draft_review_publish(**compile_kwargs)
    config = {"configurable": {"thread_id": f"bp-{where}"}}
    first = await graph.ainvoke({"steps": []}, config, **call_kwargs)
    assert first["steps"] == ran_first
    (paused,) = _events(spans, sc.EVENT_HUMAN_INTERVENTION)
    assert paused[sc.ORCH_HUMAN_KIND] == f"interrupt_{where}"
    assert paused[sc.ORCH_REASON] == f"interrupt_{where}: {'publish' if call_kwargs else 'review'}"
    assert _events(spans, sc.EVENT_STOP) == []  # paused, not stopped
    run = spans.one("invoke_workflow pipeline")

    spans.clear()
    second = await graph.ainvoke(None, config)
    assert second["steps"] == ["draft", "review", "publish"]
    resumed = spans.one("invoke_workflow pipeline")
    # The resume joins the paused run's episode (its own id, not the thread's: a thread holds many rollouts).
    assert resumed.attributes[sc.ORCH_EPISODE_ID] == run.attributes[sc.ORCH_EPISODE_ID] != f"bp-{where}"
    (resume,) = _events(spans, sc.EVENT_HUMAN_INTERVENTION)
    assert resume[sc.ORCH_HUMAN_KIND] == "resume"
    (link,) = resumed.links
    assert link.context.span_id == run.context.span_id
    assert link.attributes is not None and link.attributes[sc.ORCH_LINK_TYPE] == sc.LINK_RESUME_OF
    assert len(_events(spans, sc.EVENT_STOP)) == 1  # the resumed run finishes
