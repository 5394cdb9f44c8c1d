"""Spans of small multi-agent runs by frameworks that emit OTel GenAI spans themselves, written as OTLP-JSON.

Run as a script, in its own process (``python native_genai_spans.py pydantic_ai|autogen|autogen_unwrapped
OUT``):

* ``pydantic_ai``: PydanticAI (``pydantic-ai-slim``, in the workspace's dev group) with its own
  instrumentation (``Agent.instrument_all``); a lead agent whose tool runs a second agent (agent delegation),
  on ``FunctionModel``s (scripted replies, no network).
* ``autogen``: AutoGen (``autogen-agentchat``/``autogen-core``/``autogen-ext``), whose agents record
  ``invoke_agent``/``execute_tool`` spans; a round-robin team of two ``AssistantAgent``s on
  ``ReplayChatCompletionClient``s, one calling a tool. AutoGen pins ``protobuf<5.30`` and the collector
  needs ``protobuf>=6.33``: it cannot join the workspace lock, so its dump was made in an environment of its
  own and is committed (``golden/autogen_spans.jsonl``); regenerate it with

      uv run --isolated --no-project --with ./sdk --with autogen-agentchat==0.7.5 \\
          --with autogen-ext==0.7.5 python tests/collector/native_genai_spans.py autogen \\
          tests/collector/golden/autogen_spans.jsonl

* ``autogen_unwrapped``: the same team with no span around the run, so AutoGen's runtime starts a trace per
  message, each linked to the span that sent it (``golden/autogen_spans_unwrapped.jsonl``, made the same way).
"""

# No ``from __future__ import annotations``: PydanticAI reads the tool's type hints at run time.
import asyncio
import contextlib
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from orchestrace.exporters import OtlpJsonFileExporter


def provider(out: str, service: str) -> TracerProvider:
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    tp.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(out)))
    return tp


def run_pydantic_ai(tp: TracerProvider) -> None:
    """lead calls its tool ``ask_comedian``, which runs the comedian agent; then lead answers."""
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    Agent.instrument_all(InstrumentationSettings(tracer_provider=tp, include_content=True))

    def comedian_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Why did the chicken cross the road?")])

    def lead_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("ask_comedian", {"topic": "chickens"},
                                                     tool_call_id="call_1")])
        return ModelResponse(parts=[TextPart("Here is one: Why did the chicken cross the road?")])

    comedian = Agent(FunctionModel(comedian_model), name="comedian")
    lead = Agent(FunctionModel(lead_model), name="lead")

    @lead.tool
    async def ask_comedian(ctx: RunContext[None], topic: str) -> str:
        """Ask the comedian for a joke."""
        result = await comedian.run(f"a joke about {topic}", usage=ctx.usage)
        return result.output

    assert lead.run_sync("Tell me a joke").output.endswith("cross the road?")


def run_autogen(tp: TracerProvider, wrapped: bool = True) -> None:
    """Inside ``ot.task``: writer asks its tool for a word count and answers; reviewer approves, which ends
    the round-robin team. (With no span around the run, AutoGen's runtime starts a trace per message.)"""
    import orchestrace as ot
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    trace.set_tracer_provider(tp)  # AutoGen's agents record on the global provider
    ot.configure(tracer_provider=tp, exporter="none")

    def count_words(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    def reply(content: Any, prompt: int, completion: int) -> CreateResult:
        reason = "function_calls" if isinstance(content, list) else "stop"
        return CreateResult(finish_reason=reason, content=content, usage=RequestUsage(prompt, completion),
                            cached=False)

    async def run_team() -> Any:
        # Agents made inside the task: their creation is part of the run.
        with ot.task("slogan") if wrapped else contextlib.nullcontext():
            return await team(writer_model(), ReplayChatCompletionClient([reply("APPROVE", 60, 2)])).run(
                task="Write a three-word slogan.")

    def writer_model() -> ReplayChatCompletionClient:
        return ReplayChatCompletionClient([
            reply([FunctionCall(id="call_1", name="count_words",
                                arguments='{"text": "orchestrace traces teams"}')], 30, 9),
            reply("Draft: orchestrace traces teams (3 words).", 45, 10),
        ], model_info={"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
                       "structured_output": False})

    def team(writer_client: Any, reviewer_client: Any) -> RoundRobinGroupChat:
        writer = AssistantAgent("writer", model_client=writer_client, tools=[count_words],
                                reflect_on_tool_use=True)
        reviewer = AssistantAgent("reviewer", model_client=reviewer_client)
        approved = TextMentionTermination("APPROVE")
        return RoundRobinGroupChat([writer, reviewer], termination_condition=approved)

    result = asyncio.run(run_team())
    assert result.messages[-1].to_text() == "APPROVE", result


def main(which: str, out: str) -> None:
    tp = provider(out, f"{which}-app")
    if which == "pydantic_ai":
        run_pydantic_ai(tp)
    elif which in ("autogen", "autogen_unwrapped"):
        run_autogen(tp, wrapped=which == "autogen")
    else:
        raise SystemExit(f"unknown framework {which!r}")
    tp.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:3])
