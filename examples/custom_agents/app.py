"""A framework-free research team, traced with orchestrace's decorators and orchestration calls only.

An orchestrator (``@ot.agent``) runs inside ``with ot.task(...)``: it decides to spawn three researchers
and runs them in parallel with asyncio. Each researcher looks its topic up with a tool (``@ot.tool``),
asks a deterministic fake model (``@ot.llm``, which reports token usage like an OpenAI response) to
summarize, and messages its finding back. An aggregator merges the findings under ``ot.aggregate`` (its
span links to the three researchers' spans), the orchestrator decides to stop, and a team reward is
recorded. No network, no API key, the same run every time.

Run it from the repository root:

    .venv/bin/python -m examples.custom_agents.app --exporter console
    .venv/bin/python -m examples.custom_agents.app --exporter none --trace-dir out/custom_agents

or see it in Jaeger (http://localhost:16686, service "custom-agents-example"):

    docker run -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/all-in-one
    .venv/bin/python -m examples.custom_agents.app --exporter jaeger
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orchestrace as ot

from examples.cli import configure_tracing

QUESTION = "What made the transistor possible, and what did it change?"
TOPICS = ("physics", "engineering", "economics")
NOTES = {
    "physics": ["band theory explains semiconductors", "doping controls carrier density"],
    "engineering": ["point-contact device at Bell Labs in 1947", "junction transistor followed in 1948"],
    "economics": ["transistors made electronics cheap", "integrated circuits scaled production"],
}
MODEL = "fake-research-model"


@ot.tool(description="Looks up research notes on a topic.")
def search_notes(topic: str) -> list[str]:
    return NOTES.get(topic, [])


@ot.llm(MODEL, provider="orchestrace-fake")
async def fake_model(messages: list[dict[str, str]]) -> dict[str, Any]:
    """A deterministic stand-in for a chat completion API: summarizes the notes in the last message."""
    await asyncio.sleep(0.01)  # a network round trip, so the researchers overlap
    prompt = messages[-1]["content"]
    topic, _, notes = prompt.partition(": ")
    answer = f"{topic.capitalize()}: {notes.replace('; ', ', and ')}."
    return {
        "model": MODEL,
        "choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in messages),
                  "completion_tokens": len(answer.split())},
    }


@ot.agent(role="researcher")
async def researcher(topic: str) -> str:
    notes = search_notes(topic)
    reply = await fake_model([
        {"role": "system", "content": "Summarize the notes in one sentence."},
        {"role": "user", "content": f"{topic}: {'; '.join(notes)}"},
    ])
    finding = str(reply["choices"][0]["message"]["content"])
    ot.message("orchestrator", finding)
    return finding


@ot.agent(role="aggregator")
def aggregator(findings: Sequence[str]) -> str:
    with ot.aggregate(findings, reason="merge the researchers' findings") as merge:
        report = "\n".join(f"- {finding}" for finding in findings)
        merge.set_result(report)
    return report


@ot.agent(role="orchestrator")
async def orchestrator(question: str) -> str:
    ot.decide("spawn", reason="one researcher per topic", options=list(TOPICS))
    for topic in TOPICS:
        ot.spawn(researcher, reason=f"research {topic}")
    findings = await asyncio.gather(*(researcher(topic) for topic in TOPICS))
    ot.delegate(aggregator, reason="merge the findings")
    report = aggregator(findings)
    covered = all(finding.split(":")[0].lower() in TOPICS for finding in findings)
    ot.stop("every topic is covered" if covered else "gave up")
    ot.reward(1.0 if covered else 0.0, family="team", unit="team", explanation="all topics covered")
    return f"{question}\n{report}"


async def run_team(question: str = QUESTION) -> str:
    """One episode: the orchestration trace of this run."""
    with ot.task(name="research-team", topology="centralized", system="custom-agents") as run:
        answer = await orchestrator(question)
        run.set_success(True)
    return answer


def main(argv: Sequence[str] | None = None) -> None:
    tracing = configure_tracing("custom-agents-example", __doc__, argv)
    answer = asyncio.run(run_team())
    tracing.force_flush()
    print(answer)
    for span in tracing.get_finished_spans():  # --exporter memory: list what was recorded
        print(f"span: {span.name}")


if __name__ == "__main__":
    main()
