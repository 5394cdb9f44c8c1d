"""Triage: an OpenAI Agents SDK agent that hands each customer question off to a specialist.

``triage`` has two handoffs, ``billing`` and ``tech_support``; each specialist has a function tool. Two
questions, two runs: the first goes to billing (which looks up an invoice), the second to tech support
(which checks the service status). An input guardrail screens every question on the triage agent.
orchestrace's ``OpenAIAgentsInstrumentor`` records each run as one episode: triage's handoff decision (a
delegation with ``handoff``, from triage to the specialist), the specialist's tool call and every model call
with its tokens.

The models are scripted (examples/agents_fakes.py): no network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.agents_triage.app --exporter console
    .venv/bin/python -m examples.agents_triage.app --exporter none --trace-dir out/agents_triage
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agents import Agent, GuardrailFunctionOutput, RunContextWrapper, Runner, function_tool, input_guardrail
from orchestrace_openai_agents import OpenAIAgentsInstrumentor

from examples.agents_fakes import ScriptedResponsesModel, call, say
from examples.cli import configure_tracing

QUESTIONS = ("Why was I charged twice on invoice 1042?", "The dashboard will not load, is something down?")


@function_tool
def lookup_invoice(invoice: int) -> str:
    """The charges on an invoice."""
    return f"invoice {invoice}: 2 charges of 30 EUR, the second one a duplicate"


@function_tool
def service_status(service: str) -> str:
    """Whether a service is up."""
    return f"{service}: degraded since 09:12, fix in progress"


@input_guardrail
async def on_topic(ctx: RunContextWrapper[Any], agent: Agent[Any], question: Any) -> GuardrailFunctionOutput:
    """Lets through questions about the product (a real guardrail would ask a model)."""
    return GuardrailFunctionOutput(output_info="on topic", tripwire_triggered="password" in str(question))


def build_triage() -> Agent[Any]:
    """A fresh team per question: the scripted models answer each question once."""
    billing = Agent(
        name="billing", instructions="Resolve billing questions; look invoices up.", tools=[lookup_invoice],
        model=ScriptedResponsesModel([
            call(("lookup_invoice", {"invoice": 1042}), input_tokens=120, output_tokens=18),
            say("You were charged twice; the duplicate 30 EUR is refunded.", input_tokens=160,
                output_tokens=14),
        ], model="billing-model"))
    tech = Agent(
        name="tech_support", instructions="Diagnose outages; check service status.", tools=[service_status],
        model=ScriptedResponsesModel([
            call(("service_status", {"service": "dashboard"}), input_tokens=110, output_tokens=16),
            say("The dashboard is degraded; a fix is in progress.", input_tokens=150, output_tokens=12),
        ], model="support-model"))
    return Agent(
        name="triage", instructions="Hand the customer to the right specialist.",
        handoffs=[billing, tech], input_guardrails=[on_topic],
        model=ScriptedResponsesModel([
            call(("transfer_to_billing", {}), input_tokens=90, output_tokens=8),
            call(("transfer_to_tech_support", {}), input_tokens=95, output_tokens=9),
        ], model="triage-model"))


async def answer(questions: Sequence[str] = QUESTIONS) -> list[str]:
    triage = build_triage()  # one team: its triage model routes the first question to billing, then to tech
    return [str((await Runner.run(triage, question)).final_output) for question in questions]


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("agents-triage-example", __doc__, argv)
    OpenAIAgentsInstrumentor().instrument()
    for reply in asyncio.run(answer()):
        print(reply)
    tracing.force_flush()


if __name__ == "__main__":
    main()
