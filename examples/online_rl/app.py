"""A LangGraph app whose model calls go through ``orchestrace proxy``: ``ChatOpenAI`` pointed at the proxy,
with no orchestrace code in its model calls. Its agents are ``@ot.agent`` nodes; the HTTP client sends the
W3C headers of the calling agent (``ot.inject()``), so each call the proxy records belongs to that agent's
turn in the rollout's episode. Each rollout is an ``ot.task`` of its task, rewarded by a checker."""

from __future__ import annotations

from typing import TypedDict

import httpx
import orchestrace as ot
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from pydantic import SecretStr


class State(TypedDict):
    question: str
    answer: str


def _headers(request: httpx.Request) -> None:
    request.headers.update(ot.inject())  # the current agent and episode, as traceparent and baggage


def build(proxy_url: str, *, streaming: bool = False) -> object:
    model = ChatOpenAI(model="policy", base_url=proxy_url, api_key=SecretStr("unused"), streaming=streaming,
                       temperature=1.0, http_client=httpx.Client(event_hooks={"request": [_headers]}))

    @ot.agent(role="solver")
    def solver(state: State) -> dict[str, str]:
        reply = model.invoke([("user", state["question"])])
        return {"answer": str(reply.content)}

    @ot.agent(role="reviewer")
    def reviewer(state: State) -> dict[str, str]:
        reply = model.invoke([("user", state["question"]), ("assistant", state["answer"]),
                              ("user", "Check the answer and give it again.")])
        return {"answer": str(reply.content)}

    graph = StateGraph(State)
    graph.add_node("solver", solver)
    graph.add_node("reviewer", reviewer)
    graph.add_edge(START, "solver")
    graph.add_edge("solver", "reviewer")
    graph.add_edge("reviewer", END)
    return graph.compile()


def reward(answer: str) -> float:
    """The verifier: an answer whose digit is even is right."""
    digits = [int(c) for c in answer if c.isdigit()]
    return 1.0 if digits and digits[0] % 2 == 0 else 0.0


def rollout(graph: object, task_id: str, question: str, attempt: int) -> float:
    """One rollout of ``task_id``: the graph's run, rewarded."""
    with ot.task(task_id):
        state = graph.invoke({"question": f"{question} (attempt {attempt})", "answer": ""})  # type: ignore[attr-defined]
        value = reward(state["answer"])
        ot.reward(value, family="verifier")
    return value
