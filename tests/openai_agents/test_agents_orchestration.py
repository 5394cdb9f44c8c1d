"""The orchestration the Agents SDK expresses, as orchestrace records it and the collector writes it: handoff
chains, agents used as tools (in parallel), agents run from inside a tool, guardrails, failing tools."""

from __future__ import annotations

from typing import Any

import orchestrace as ot
import pytest
from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    Runner,
    UserError,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from agents import (
    GuardrailFunctionOutput as GuardrailOutput,
)
from agents_apps import gather_app, parallel_tokens, parallel_tools_app
from agents_spans import Spans
from opentelemetry.trace import StatusCode
from orchestrace import semconv as sc
from written_traces import edges_of, of_type

from examples.agents_fakes import ScriptedResponsesModel, call, say


def chain_app() -> Agent[Any]:
    """front -> billing -> refunds: two handoffs; refunds answers."""
    refunds = Agent(name="refunds", model=ScriptedResponsesModel([say("Refund issued.", 40, 5)]))
    billing = Agent(name="billing", handoffs=[refunds],
                    model=ScriptedResponsesModel([call(("transfer_to_refunds", {}), input_tokens=30,
                                                       output_tokens=4)]))
    return Agent(name="front", handoffs=[billing],
                 model=ScriptedResponsesModel([call(("transfer_to_billing", {}), input_tokens=20,
                                                    output_tokens=3)]))


async def test_handoff_chain(spans: Spans) -> None:
    assert (await Runner.run(chain_app(), "I want my money back")).final_output == "Refund issued."
    workflow = spans.one("invoke_workflow Agent workflow")
    for name, target in (("front", "billing"), ("billing", "refunds")):
        agent = spans.one(f"invoke_agent {name}")
        assert spans.parent(agent) is workflow  # a handoff passes control on: no nesting
        assert spans.events(agent, sc.EVENT_DELEGATE) == [{
            sc.ORCH_TARGET_AGENT: target, sc.ORCH_HANDOFF: True, sc.ORCH_FROM: name, sc.ORCH_TO: target,
            sc.ORCH_REASON: "handoff"}]
    assert spans.events(spans.one("invoke_agent refunds"), sc.EVENT_DELEGATE) == []
    written, episode = spans.convert()
    decisions = [(e["agent"], e["decision"], e.get("to"), e.get("handoff"))
                 for e in of_type(written, "orchestrator_decision")]
    assert decisions == [("Agent workflow", "delegate", "front", None),
                         ("front", "delegate", "billing", True), ("billing", "delegate", "refunds", True)]
    spawns = [(e["agent"], e["to"]) for e in of_type(written, "spawn")]
    assert spawns == [("Agent workflow", "front"), ("front", "billing"), ("billing", "refunds")]
    # each spawn carries out its decision, and the new agent's first event follows from it
    decision_ids = [e["id"] for e in of_type(written, "orchestrator_decision")]
    spawn_ids = [e["id"] for e in of_type(written, "spawn")]
    assert set(zip(decision_ids, spawn_ids, strict=True)) <= edges_of(written, "spawn")
    assert written["costs"]["tokens"] == 20 + 3 + 30 + 4 + 40 + 5
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("front", 20, 3), ("billing", 30, 4), ("refunds", 40, 5)]
    assert written["topology"] == "swarm"  # handoffs from two distinct agents to peers


def check_fan_out(spans: Spans, caller: str, workers: list[str], tool_of: dict[str, str]) -> dict[str, Any]:
    """Each worker's agent span inside its tool call, after a spawn on that tool's span; the written trace:
    spawn, return and despawn per worker, all inside the caller's activation."""
    caller_span = spans.one(f"invoke_agent {caller}")
    for name in workers:
        agent = spans.one(f"invoke_agent {name}")
        tool = spans.parent(agent)
        assert tool is not None and tool.name == f"execute_tool {tool_of[name]}"
        assert spans.parent(tool) is caller_span
        spawned = [e[sc.ORCH_TARGET_AGENT] for e in spans.events(tool, sc.EVENT_SPAWN)]
        assert name in spawned
        assert agent.attributes[sc.ORCH_AGENT_PARENT_ID] == caller_span.attributes[sc.GEN_AI_AGENT_ID]
        assert [s.name for s in spans.all if spans.parent(s) is agent] == ["chat scripted-model"]
    written, _ = spans.convert()
    spawns = {e["to"]: e for e in of_type(written, "spawn") if e["agent"] == caller}
    assert sorted(spawns) == sorted(workers)
    returns = {e["from"]: e for e in of_type(written, "return")}
    despawns = sorted(e["to"] for e in of_type(written, "despawn"))
    assert despawns == sorted(workers)
    for name in workers:
        assert returns[name]["to"] == caller
        assert (spawns[name]["id"], returns[name]["id"]) != (None, None)
    return written


@pytest.mark.parametrize("width", [2, 4])
async def test_agents_as_tools_in_parallel(spans: Spans, width: int) -> None:
    result = await Runner.run(parallel_tools_app(width, delay=0.2), "research")
    assert result.final_output == "summary"
    workers = [f"researcher{k}" for k in range(width)]
    written = check_fan_out(spans, "orchestrator", workers,
                            {f"researcher{k}": f"ask_researcher{k}" for k in range(width)})
    # the workers really overlapped: their agent spans intersect in time
    agents = [spans.one(f"invoke_agent {name}") for name in workers]
    assert max(int(a.start_time or 0) for a in agents) < min(int(a.end_time or 0) for a in agents)
    assert written["costs"]["tokens"] == parallel_tokens(width)
    assert written["costs"]["tool_calls"] == width
    assert written["metrics"]["parallelism_efficiency"] > 1.3
    # the tool results feed the orchestrator's next model call
    results = of_type(written, "tool_result")
    assert sorted(e["agent"] for e in results) == sorted(f"ask_researcher{k}" for k in range(width))


async def test_agents_run_with_asyncio_gather_inside_a_tool(spans: Spans) -> None:
    assert (await Runner.run(gather_app(3, delay=0.2), "question")).final_output == "summary"
    written = check_fan_out(spans, "lead", [f"analyst{k}" for k in range(3)],
                            {f"analyst{k}": "consult_all" for k in range(3)})
    assert written["costs"]["tokens"] == parallel_tokens(3)
    assert written["costs"]["tool_calls"] == 1


def guarded(tripped_in: bool, tripped_out: bool) -> Agent[Any]:
    @input_guardrail
    async def no_injection(ctx: RunContextWrapper[Any], agent: Agent[Any], text: Any) -> GuardrailOutput:
        return GuardrailOutput(output_info="checked", tripwire_triggered=tripped_in)

    @output_guardrail
    async def no_secrets(ctx: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> GuardrailOutput:
        return GuardrailOutput(output_info="checked", tripwire_triggered=tripped_out)

    model = ScriptedResponsesModel([say("the password is 1234", 8, 6, delay=0.05)])
    return Agent(name="assistant", model=model, input_guardrails=[no_injection],
                 output_guardrails=[no_secrets])


@pytest.mark.parametrize(("which", "error"), [("input", InputGuardrailTripwireTriggered),
                                              ("output", OutputGuardrailTripwireTriggered)])
async def test_tripped_guardrail_is_a_safety_event(spans: Spans, which: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        await Runner.run(guarded(which == "input", which == "output"), "hi")
    agent = spans.one("invoke_agent assistant")
    name = "no_injection" if which == "input" else "no_secrets"
    assert spans.events(agent, sc.EVENT_SAFETY) == [{sc.ORCH_SAFETY_CATEGORY: name,
                                                     sc.ORCH_SAFETY_ACTION: "tripwire_triggered"}]
    assert agent.status.status_code == StatusCode.ERROR
    assert agent.attributes[sc.ERROR_TYPE] == error.__qualname__
    written, _ = spans.convert()
    (safety,) = of_type(written, "safety_event")
    assert (safety["agent"], safety["label"]) == ("assistant", name)
    (returned,) = [e for e in of_type(written, "return") if e["agent"] == "assistant"]
    assert returned["error"] is True and returned["error_type"] == error.__qualname__


async def test_guardrails_that_pass_record_nothing(spans: Spans) -> None:
    assert (await Runner.run(guarded(False, False), "hi")).final_output == "the password is 1234"
    assert spans.events(spans.one("invoke_agent assistant"), sc.EVENT_SAFETY) == []
    written, _ = spans.convert()
    assert of_type(written, "safety_event") == []


class Broken(RuntimeError):
    pass


def failing_app(raise_to_caller: bool) -> Agent[Any]:
    def explode(a: int) -> int:
        """Always fails."""
        raise Broken(f"no luck with {a}")

    tool = function_tool(explode, failure_error_function=None) if raise_to_caller else function_tool(explode)
    steps = [call(("explode", {"a": 1}), input_tokens=5, output_tokens=2)]
    if not raise_to_caller:  # the model reads the error and answers
        steps.append(say("It failed.", 9, 3))
    return Agent(name="unlucky", model=ScriptedResponsesModel(steps), tools=[tool])


async def test_failing_tool_raises_as_without_instrumentation(spans: Spans) -> None:
    with pytest.raises(UserError) as instrumented:
        await Runner.run(failing_app(raise_to_caller=True), "go")
    recorded = spans.all
    from orchestrace_openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().uninstrument()
    with pytest.raises(UserError) as plain:
        await Runner.run(failing_app(raise_to_caller=True), "go")
    assert len(spans.all) == len(recorded)  # nothing recorded without instrumentation
    # The user's exception reaches the caller as the Agents SDK raises it, instrumented or not.
    assert str(instrumented.value) == str(plain.value)
    assert type(instrumented.value.__cause__) is Broken and type(plain.value.__cause__) is Broken
    tool = spans.one("execute_tool explode")
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.attributes[sc.ERROR_TYPE] == "Broken"
    (exception,) = [e for e in tool.events if e.name == sc.EVENT_EXCEPTION]
    assert (exception.attributes or {})[sc.EXCEPTION_TYPE].endswith("Broken")
    written, _ = spans.convert()
    (result,) = of_type(written, "tool_result")
    assert result["error"] is True and result["error_type"] == "Broken"


async def test_failing_tool_whose_error_goes_to_the_model(spans: Spans) -> None:
    assert (await Runner.run(failing_app(raise_to_caller=False), "go")).final_output == "It failed."
    tool = spans.one("execute_tool explode")
    assert tool.status.status_code == StatusCode.ERROR
    assert spans.one("invoke_agent unlucky").status.status_code == StatusCode.OK
    written, episode = spans.convert()
    (result,) = of_type(written, "tool_result")
    assert result["error"] is True
    assert len(episode.turns) == 2 and written["costs"]["tokens"] == 19


async def test_user_code_in_a_tool_nests_under_its_span(task_spans: Spans) -> None:
    spans = task_spans

    @ot.tool
    def lookup(city: str) -> str:
        return f"sunny in {city}"

    @function_tool
    def weather(city: str) -> str:
        """The weather."""
        frame = ot.current_agent()
        assert frame is not None and frame.name == "forecaster"
        ot.reward(1.0, unit="agent", target=frame)
        return lookup(city)

    agent = Agent(name="forecaster", tools=[weather], model=ScriptedResponsesModel(
        [call(("weather", {"city": "Lyon"})), say("Sunny.")]))
    await Runner.run(agent, "weather?")
    assert spans.parent_name(spans.one("execute_tool lookup")) == "execute_tool weather"
    written, _ = spans.convert()
    (label,) = {e["agent"] for e in of_type(written, "return") if e["agent"] == "forecaster"}
    assert written["rewards"]["agent:forecaster"] == 1.0 and label == "forecaster"
