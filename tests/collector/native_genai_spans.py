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
* ``adk``: Google's ADK (``google-adk``) with its own GenAI spans, content captured: a ``coordinator`` agent
  whose model transfers to its sub-agent ``researcher`` (``transfer_to_agent``), which uses a tool and
  answers, on scripted ``BaseLlm`` models. ADK's dependencies are too many to join the workspace for one dump;
  it is committed (``golden/adk_spans.jsonl``), made with

      OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental \
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY uv run --isolated --no-project \
          --with ./semconv --with ./sdk --with google-adk==2.13.0 \
          python tests/collector/native_genai_spans.py adk tests/collector/golden/adk_spans.jsonl

* ``agents_openinference`` / ``agents_openllmetry``: the OpenAI Agents SDK (the workspace's version) under
  OpenInference's and OpenLLMetry's instrumentors instead of orchestrace's: ``triage`` hands off to ``math``,
  which uses ``add``; then an ``orchestrator`` calls two agents as tools in one turn (``agents_apps``'s
  ``triage_app`` and ``parallel_tools_app``). Committed (``golden/agents_<which>.jsonl``), made with

      uv run --isolated --no-project --with ./semconv --with ./sdk --with openai-agents==0.24.0 \\
          --with openinference-instrumentation-openai-agents==2.6.0 \\
          --with opentelemetry-instrumentation-openai-agents==0.62.4 \\
          python tests/collector/native_genai_spans.py agents_openinference \\
          tests/collector/golden/agents_openinference.jsonl

* ``strands``: a Strands Agents swarm with its own spans, content captured (Strands records messages as span
  events of Bedrock content blocks): ``researcher`` uses ``search``, hands off to ``writer``
  (``handoff_to_agent``) and stops; ``writer`` answers; scripted ``Model``s. Committed
  (``golden/strands_swarm.jsonl``), made with

      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true uv run --isolated --no-project \\
          --with ./semconv --with ./sdk --with strands-agents==1.62.0 \\
          python tests/collector/native_genai_spans.py strands tests/collector/golden/strands_swarm.jsonl

* ``smolagents``: a smolagents manager with two managed ``ToolCallingAgent``s, under OpenInference's
  smolagents instrumentor (which names an agent's span ``<name>.run`` and records each agent's token totals
  on it), on an ``OpenAIModel`` whose client is scripted. Committed (``golden/smolagents_managed.jsonl``),
  made with

      uv run --isolated --no-project --with ./semconv --with ./sdk --with smolagents==1.26.0 \\
          --with openinference-instrumentation-smolagents==0.1.43 \\
          python tests/collector/native_genai_spans.py smolagents \
          tests/collector/golden/smolagents_managed.jsonl
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


def run_adk(tp: TracerProvider) -> None:
    """coordinator (10 + 2 tokens) transfers to researcher, whose two calls (20 + 3 each) use ``search``."""
    from collections.abc import AsyncGenerator

    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    trace.set_tracer_provider(tp)  # ADK records on the global provider

    class Scripted(BaseLlm):
        script: list[Any]
        tokens: tuple[int, int]

        async def generate_content_async(self, llm_request: LlmRequest,
                                         stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
            step = self.script.pop(0)
            part = (types.Part(text=step) if isinstance(step, str)
                    else types.Part(function_call=types.FunctionCall(name=step[0], args=step[1])))
            prompt, completion = self.tokens
            yield LlmResponse(
                content=types.Content(role="model", parts=[part]),
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=prompt, candidates_token_count=completion,
                    total_token_count=prompt + completion))

    def search(query: str) -> dict[str, str]:
        """Search the notes."""
        return {"result": f"notes on {query}"}

    researcher = LlmAgent(
        name="researcher", description="Finds facts", instruction="Research.", tools=[search],
        model=Scripted(model="fake-r", script=[("search", {"query": "sky"}), "Rayleigh scattering."],
                       tokens=(20, 3)))
    coordinator = LlmAgent(
        name="coordinator", instruction="Route.", sub_agents=[researcher],
        model=Scripted(model="fake-c", script=[("transfer_to_agent", {"agent_name": "researcher"})],
                       tokens=(10, 2)))

    async def run() -> None:
        runner = InMemoryRunner(agent=coordinator, app_name="adk-app")
        await runner.session_service.create_session(app_name="adk-app", user_id="u", session_id="s")
        question = types.Content(role="user", parts=[types.Part(text="Why is the sky blue?")])
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=question):
            pass

    asyncio.run(run())


def run_agents(tp: TracerProvider, which: str) -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root), str(root / "tests" / "openai_agents")]
    from agents import Runner
    from agents_apps import parallel_tools_app, triage_app

    if which == "agents_openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    else:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    trace.set_tracer_provider(tp)
    OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)

    async def run() -> None:
        await Runner.run(triage_app(), "What is 2 + 3?")
        await Runner.run(parallel_tools_app(2, 0.01), "Research")

    asyncio.run(run())


def run_strands(tp: TracerProvider) -> None:
    """researcher (20 + 3 per call): search, handoff_to_agent writer, done; writer (8 + 4) answers."""
    import json
    from collections.abc import AsyncIterator

    from strands import Agent, tool
    from strands.models.model import Model
    from strands.multiagent import Swarm

    trace.set_tracer_provider(tp)  # Strands records on the global provider

    class Scripted(Model):
        def __init__(self, script: list[Any], tokens: tuple[int, int]) -> None:
            self.script, self.tokens = list(script), tokens

        def update_config(self, **model_config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {"model_id": "scripted"}

        async def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError
            yield

        async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            step = self.script.pop(0)
            yield {"messageStart": {"role": "assistant"}}
            if isinstance(step, str):
                yield {"contentBlockDelta": {"delta": {"text": step}}}
                stop = "end_turn"
            else:
                call = {"toolUseId": f"t-{step[0]}", "name": step[0]}
                yield {"contentBlockStart": {"start": {"toolUse": call}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(step[1])}}}}
                stop = "tool_use"
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": stop}}
            prompt, completion = self.tokens
            usage = {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion}
            yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}

    @tool
    def search(query: str) -> str:
        """Search the notes."""
        return f"notes on {query}"

    handoff = ("handoff_to_agent", {"agent_name": "writer", "message": "write it up"})
    researcher = Agent(name="researcher", system_prompt="Research.", tools=[search], callback_handler=None,
                       model=Scripted([("search", {"query": "sky"}), handoff, "Handed off."], (20, 3)))
    writer = Agent(name="writer", system_prompt="Write.", callback_handler=None,
                   model=Scripted(["Rayleigh scattering."], (8, 4)))
    result = Swarm([researcher, writer])("Why is the sky blue?")
    assert [node.node_id for node in result.node_history] == ["researcher", "writer"], result


def run_smolagents(tp: TracerProvider) -> None:
    """manager (10 + 2 per call) calls web_agent (20 + 3 per call; search, then final_answer), then
    docs_agent (5 + 1; final_answer), then answers."""
    import json
    from types import SimpleNamespace as NS

    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import ToolCallingAgent, tool
    from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, OpenAIModel

    SmolagentsInstrumentor().instrument(tracer_provider=tp)

    class Scripted(OpenAIModel):
        """An OpenAI model (the instrumentor wraps smolagents' own model classes) whose client replies from a
        script of tool calls, arguments as JSON text as OpenAI sends them."""

        def __init__(self, script: list[tuple[str, dict[str, str]]], tokens: tuple[int, int]) -> None:
            self.script, self.tokens = list(script), tokens
            super().__init__(model_id="scripted")

        def create_client(self) -> Any:
            def create(**kwargs: Any) -> Any:
                name, args = self.script.pop(0)
                function = ChatMessageToolCallFunction(name=name, arguments=json.dumps(args))
                call = ChatMessageToolCall(function=function, id=f"call-{name}", type="function")
                message = NS(role="assistant", content=None, tool_calls=[call])
                usage = NS(prompt_tokens=self.tokens[0], completion_tokens=self.tokens[1])
                return NS(choices=[NS(message=message)], usage=usage)

            return NS(chat=NS(completions=NS(create=create)))

    @tool
    def search(query: str) -> str:
        """Search the notes.

        Args:
            query: what to look for
        """
        return f"notes on {query}"

    web = ToolCallingAgent(
        tools=[search], name="web_agent", description="Searches the web.", max_steps=3,
        model=Scripted([("search", {"query": "sky"}), ("final_answer", {"answer": "scattering"})], (20, 3)))
    docs = ToolCallingAgent(tools=[search], name="docs_agent", description="Reads docs.", max_steps=3,
                            model=Scripted([("final_answer", {"answer": "no docs"})], (5, 1)))
    script = [("web_agent", {"task": "why blue"}), ("docs_agent", {"task": "docs"}),
              ("final_answer", {"answer": "Rayleigh"})]
    manager = ToolCallingAgent(tools=[], managed_agents=[web, docs], name="manager", max_steps=5,
                               model=Scripted(script, (10, 2)))
    assert manager.run("Why is the sky blue?") == "Rayleigh"


def main(which: str, out: str) -> None:
    tp = provider(out, f"{which}-app")
    if which == "pydantic_ai":
        run_pydantic_ai(tp)
    elif which in ("autogen", "autogen_unwrapped"):
        run_autogen(tp, wrapped=which == "autogen")
    elif which == "adk":
        run_adk(tp)
    elif which in ("agents_openinference", "agents_openllmetry"):
        run_agents(tp, which)
    elif which == "strands":
        run_strands(tp)
    elif which == "smolagents":
        run_smolagents(tp)
    else:
        raise SystemExit(f"unknown framework {which!r}")
    tp.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:3])
