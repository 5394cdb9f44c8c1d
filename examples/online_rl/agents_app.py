"""An OpenAI Agents SDK app whose model calls go through ``orchestrace proxy``: ``OpenAIChatCompletionsModel``
on an ``AsyncOpenAI`` client pointed at the proxy, with no orchestrace code in its model calls. The client's
HTTP hook sends the W3C headers of the calling agent (``ot.inject()``), so each call the proxy records is a
turn of that agent in the rollout's episode. A solver agent answers, a reviewer agent gives the answer again;
each rollout is an ``ot.task`` of its task, rewarded by the same checker as the LangGraph app."""

from __future__ import annotations

from typing import Any

import orchestrace as ot
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from examples.online_rl.app import reward


async def _headers(request: Any) -> None:  # the httpx request of openai's own httpx
    request.headers.update(ot.inject())  # the current agent (or model call) and episode


def build(proxy_url: str) -> tuple[Agent, Agent]:
    client = AsyncOpenAI(base_url=proxy_url, api_key="unused",
                         http_client=DefaultAsyncHttpxClient(event_hooks={"request": [_headers]}))
    model = OpenAIChatCompletionsModel(model="policy", openai_client=client)
    return (Agent(name="solver", instructions="Answer the question.", model=model),
            Agent(name="reviewer", instructions="Check the answer and give it again.", model=model))


def rollout(agents: tuple[Agent, Agent], task_id: str, question: str, attempt: int, *,
            traced: bool = False) -> float:
    """One rollout of ``task_id``: the solver's answer, reviewed, rewarded. ``traced``: the Agents SDK's own
    tracing on (for ``OpenAIAgentsInstrumentor``); off, nothing is sent to its exporter."""
    first, second = agents
    config = RunConfig(tracing_disabled=not traced)
    with ot.task(task_id):
        answer = solve(first, f"{question} (attempt {attempt})", config)
        answer = review(second, answer, config)
        value = reward(answer)
        ot.reward(value, family="verifier")
    return value


@ot.agent("solver", role="solver")
def solve(agent: Agent, prompt: str, config: RunConfig) -> str:
    return str(Runner.run_sync(agent, prompt, run_config=config).final_output)


@ot.agent("reviewer", role="reviewer")
def review(agent: Agent, prompt: str, config: RunConfig) -> str:
    return str(Runner.run_sync(agent, prompt, run_config=config).final_output)
