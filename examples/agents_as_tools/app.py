"""Agents as tools: an OpenAI Agents SDK orchestrator that consults three specialist agents at once.

``editor`` has each specialist as a tool (``Agent.as_tool``) and calls all three in one turn (parallel tool
calls), then writes the answer from what they returned. orchestrace's ``OpenAIAgentsInstrumentor`` records
a spawn of each specialist inside its tool call, their concurrent runs, their returns, and every model call
with its tokens; ``parallelism_efficiency`` shows the overlap.

The models are scripted (examples/agents_fakes.py): no network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.agents_as_tools.app --exporter console
    .venv/bin/python -m examples.agents_as_tools.app --exporter none --trace-dir out/agents_as_tools
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agents import Agent, ModelSettings, Runner, Tool
from orchestrace_openai_agents import OpenAIAgentsInstrumentor

from examples.agents_fakes import ScriptedResponsesModel, call, say
from examples.cli import configure_tracing

QUESTION = "Should we open a cafe on Rue Mercière in Lyon?"
#: Each specialist's finding, and how long it thinks (seconds): they run at the same time.
SPECIALISTS = {
    "market_analyst": ("Foot traffic is high: 12,000 people a day.", 0.3),
    "legal_advisor": ("A terrace needs a city permit, about 6 weeks.", 0.25),
    "finance_advisor": ("Rent is 4,200 EUR a month; break-even at 180 cups a day.", 0.2),
}


def build_editor() -> Agent[Any]:
    tools: list[Tool] = []
    for name, (finding, seconds) in SPECIALISTS.items():
        specialist = Agent(name=name, instructions=f"You are the {name.replace('_', ' ')}.",
                           model=ScriptedResponsesModel([say(finding, 60, 12, delay=seconds)],
                                                        model="specialist-model"))
        tools.append(specialist.as_tool(f"ask_{name}", f"Ask the {name.replace('_', ' ')}."))
    editor_model = ScriptedResponsesModel([
        call(*[(f"ask_{name}", {"input": QUESTION}) for name in SPECIALISTS], input_tokens=140,
             output_tokens=30),
        say("Yes: busy street, permit in 6 weeks, break-even at 180 cups a day.", input_tokens=260,
            output_tokens=20),
    ], model="editor-model")
    return Agent(name="editor", instructions="Consult every specialist, then decide.", tools=tools,
                 model=editor_model, model_settings=ModelSettings(parallel_tool_calls=True))


async def answer(question: str = QUESTION) -> str:
    return str((await Runner.run(build_editor(), question)).final_output)


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("agents-as-tools-example", __doc__, argv)
    OpenAIAgentsInstrumentor().instrument()
    print(asyncio.run(answer()))
    tracing.force_flush()


if __name__ == "__main__":
    main()
