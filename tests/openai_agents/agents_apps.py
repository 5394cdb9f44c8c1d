"""Small Agents SDK apps whose orchestration and token counts are known by construction."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, ModelSettings, Runner, function_tool

from examples.agents_fakes import ScriptedResponsesModel, Step, call, say


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def math_agent(steps: list[Step] | None = None) -> Agent[Any]:
    """Calls ``add`` once (12 in / 6 out), then answers (20 in / 4 out)."""
    model = ScriptedResponsesModel(steps if steps is not None else [
        call(("add", {"a": 2, "b": 3}), input_tokens=12, output_tokens=6),
        say("2 + 3 = 5", input_tokens=20, output_tokens=4),
    ])
    return Agent(name="math", instructions="Compute with the add tool.", model=model, tools=[add])


def triage_app() -> Agent[Any]:
    """triage hands off to math (7 in / 3 out): 3 turns, 49 tokens, 1 tool call, 1 handoff."""
    triage_model = ScriptedResponsesModel([call(("transfer_to_math", {}), input_tokens=7, output_tokens=3)])
    return Agent(name="triage", instructions="Route the question.", model=triage_model,
                 handoffs=[math_agent()])


#: triage_app's truth.
TRIAGE_TOKENS = 7 + 3 + 12 + 6 + 20 + 4
TRIAGE_TURNS = [("triage", 7, 3), ("math", 12, 6), ("math", 20, 4)]


def worker(name: str, answer: str, delay: float, tokens: tuple[int, int]) -> Agent[Any]:
    return Agent(name=name, instructions=f"You are {name}.",
                 model=ScriptedResponsesModel([say(answer, *tokens, delay=delay)]))


def parallel_tools_app(width: int = 3, delay: float = 0.2) -> Agent[Any]:
    """An orchestrator calling ``width`` agents as tools in one turn (parallel tool calls), each answering
    after ``delay`` s, then answering itself. Tokens: orchestrator 30/10 and 50/8; worker k: 10+k / 2+k."""
    workers = [worker(f"researcher{k}", f"finding {k}", delay, (10 + k, 2 + k)) for k in range(width)]
    tools = [w.as_tool(f"ask_researcher{k}", f"Ask researcher {k}.") for k, w in enumerate(workers)]
    model = ScriptedResponsesModel([
        call(*[(f"ask_researcher{k}", {"input": f"topic {k}"}) for k in range(width)],
             input_tokens=30, output_tokens=10),
        say("summary", input_tokens=50, output_tokens=8),
    ])
    return Agent(name="orchestrator", instructions="Delegate, then summarize.", model=model, tools=tools,
                 model_settings=ModelSettings(parallel_tool_calls=True))


def parallel_tokens(width: int) -> int:
    return 30 + 10 + 50 + 8 + sum(10 + k + 2 + k for k in range(width))


def gather_app(width: int = 3, delay: float = 0.2) -> Agent[Any]:
    """One function tool that runs ``width`` agents with ``asyncio.gather`` (a fan-out inside a tool)."""
    workers = [worker(f"analyst{k}", f"view {k}", delay, (10 + k, 2 + k)) for k in range(width)]

    @function_tool
    async def consult_all(question: str) -> str:
        """Ask every analyst at once."""
        results = await asyncio.gather(*(Runner.run(w, question) for w in workers))
        return "; ".join(str(r.final_output) for r in results)

    model = ScriptedResponsesModel([
        call(("consult_all", {"question": "q"}), input_tokens=30, output_tokens=10),
        say("summary", input_tokens=50, output_tokens=8),
    ])
    return Agent(name="lead", model=model, tools=[consult_all])
