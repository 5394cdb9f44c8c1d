"""Golden conversions of real runs: spans produced by the OTel SDK (hand-written GenAI spans, as another
library would write them), by OpenInference's and by OpenLLMetry's LangChain instrumentors on a small
LangGraph agent (run in a subprocess by ``foreign_spans.py``), and by frameworks that emit GenAI spans
themselves (``native_genai_spans.py``): PydanticAI, run here, and AutoGen, whose dump is committed
(``golden/autogen_spans.jsonl``: AutoGen cannot join the workspace's lock).

Run-dependent values (ids, times, hashes of content holding run ids) are replaced by stable placeholders
before comparison. Regenerate with ``ORCHESTRACE_UPDATE_GOLDEN=1 pytest
tests/collector/test_convert_golden.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orchestrace as ot
import pytest
from convert_support import GOLDEN, traces_of
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from orchestrace import semconv as sc
from orchestrace_collector import convert_spans
from orchestrace_collector.convert import Episode, convert_episode
from orchestrace_collector.decode import decode_file
from orchestrace_collector.inprocess import span_from_readable
from written_traces import checked, edges_of, of_type

_PLACEHOLDERS = {
    "span_id": "span",
    "turn_id": "span",
    "otel_trace_id": "trace",
    "trace_id": "trace",
    "task_id": "trace",
    "agent_id": "id",
    "content_ref": "ref",
    "input_ref": "ref",
    "output_ref": "ref",
}
_TIMING = {"t", "t_end", "t_start", "wall_clock_s", "parallelism_efficiency"}


class _Normalizer:
    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], str] = {}

    def name(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = f"<{kind}{sum(1 for k, _ in self.seen if k == kind) + 1}>"
        return self.seen[key]

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k in _TIMING:
                    continue
                if k.startswith("turn:"):
                    k = "turn:" + self.name("span", k[5:])
                out[k] = self(v, k)
            return out
        if isinstance(value, list):
            return [self(v, key) for v in value]
        if isinstance(value, float):
            return round(value, 6)
        if key in _PLACEHOLDERS and isinstance(value, str):
            return self.name(_PLACEHOLDERS[key], value)
        return value


def normalized(episode: Episode) -> dict[str, Any]:
    norm = _Normalizer()
    trace = norm(checked(episode))
    turns = [norm(t.model_dump(exclude_none=True)) for t in episode.turns]
    return {"trace": trace, "turns": turns}


def assert_golden(name: str, episode: Episode) -> dict[str, Any]:
    got = normalized(episode)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("ORCHESTRACE_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert path.exists(), f"no golden {path.name}: run with ORCHESTRACE_UPDATE_GOLDEN=1 to write it"
    assert got == json.loads(path.read_text())
    written: dict[str, Any] = checked(episode)
    return written


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp, exporter
    tp.shutdown()


def convert(exporter: InMemorySpanExporter) -> Episode:
    return convert_episode([span_from_readable(s) for s in exporter.get_finished_spans()])


# --- 1. hand-written OTel GenAI spans, the way a non-orchestrace library writes them
# ---------------------------


def test_plain_otel_genai_spans(provider: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    tp, exporter = provider
    tracer = tp.get_tracer("some.other.genai.library")

    def chat(prompt: str, answer: dict[str, Any], tokens: tuple[int, int]) -> None:
        with tracer.start_as_current_span(
            "chat gpt-test",
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
                sc.GEN_AI_PROVIDER_NAME: "openai",
                sc.GEN_AI_REQUEST_MODEL: "gpt-test",
                sc.GEN_AI_USAGE_INPUT_TOKENS: tokens[0],
                sc.GEN_AI_USAGE_OUTPUT_TOKENS: tokens[1],
                sc.GEN_AI_INPUT_MESSAGES: json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
                ),
                sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "parts": [answer]}]),
            },
        ):
            pass

    with tracer.start_as_current_span(
        "invoke_agent trip_planner",
        attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: "trip_planner",
            sc.GEN_AI_AGENT_ID: "agent-planner-1",
        },
    ) as root:
        chat(
            "Plan a day in Lyon",
            {"type": "tool_call", "name": "weather", "arguments": {"city": "Lyon"}},
            (12, 6),
        )
        with tracer.start_as_current_span(
            "execute_tool weather",
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.GEN_AI_TOOL_NAME: "weather",
                sc.GEN_AI_TOOL_CALL_ID: "call_1",
                sc.GEN_AI_TOOL_CALL_ARGUMENTS: '{"city": "Lyon"}',
                sc.GEN_AI_TOOL_CALL_RESULT: "sunny, 24C",
            },
        ):
            pass
        with tracer.start_as_current_span(
            "invoke_agent booking",
            attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                sc.GEN_AI_AGENT_NAME: "booking",
                sc.GEN_AI_AGENT_ID: "agent-booking-1",
            },
        ):
            chat("Book a table for lunch", {"type": "text", "content": "Booked at noon."}, (20, 4))
        chat("Summarize", {"type": "text", "content": "Sunny day, lunch at noon."}, (30, 8))
        root.add_event(
            sc.EVENT_EVALUATION_RESULT,
            {sc.GEN_AI_EVALUATION_NAME: "judge", sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.8},
        )

    episode = convert(exporter)
    w = assert_golden("plain_otel_genai", episode)
    assert [e["type"] for e in w["events"]] == [
        "tool_call",
        "tool_result",
        "orchestrator_decision",
        "spawn",
        "return",
        "return",
    ]
    assert w["topology"] == "centralized" and w["rewards"]["team:judge"] == 0.8  # its name is kept
    assert w["costs"]["tokens"] == 80 and len(episode.turns) == 3
    assert episode.turns[0].completion is not None and episode.turns[1].agent == "booking"
    assert episode.contents[of_type(w, "tool_result")[0]["content_ref"]] == "sunny, 24C"


# --- 2 and 3. LangChain instrumentors from the registry on a small LangGraph agent (``foreign_spans.py``)
# ---------------------------


def run_script(script: str, *args: str) -> None:
    """Run ``script`` (beside this file) in a subprocess: no instrumentor patch leaks here."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(script)), *args],
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 0, done.stderr


def script_episode(script: str, out: Path, *args: str) -> Episode:
    """Convert the spans ``script`` writes to ``out``."""
    run_script(script, args[0], str(out), *args[1:])
    return convert_episode(list(decode_file(out)))


ForeignEpisode = Callable[[str, str], Episode]


@pytest.fixture(scope="module")
def foreign_episode(tmp_path_factory: pytest.TempPathFactory) -> ForeignEpisode:
    """``foreign_episode(which, shape)``: the spans ``foreign_spans.py`` writes, one run per instrumentor for
    both graph shapes, converted."""
    runs: dict[str, Path] = {}

    def get(which: str, shape: str) -> Episode:
        if which not in runs:
            runs[which] = tmp_path_factory.mktemp(which)
            run_script("foreign_spans.py", which, str(runs[which]))
        return convert_episode(list(decode_file(runs[which] / f"{shape}.jsonl")))

    return get


@pytest.mark.parametrize("which", ["openinference", "openllmetry"])
def test_other_libraries_langchain_instrumentor(which: str, foreign_episode: ForeignEpisode) -> None:
    episode = foreign_episode(which, "agent")
    w = assert_golden(f"{which}_langgraph", episode)
    # The graph run is a workflow (OpenInference: a CHAIN root; OpenLLMetry: its workflow span, which it also
    # calls an agent), so its nodes are actors; the tools node is only known as a node here.
    _check_agent_graph(w, episode)
    assert [(e["agent"], e["activation"]) for e in of_type(w, "return")] == [
        ("agent", 1), ("tools", 1), ("agent", 2), ("calculator", 1),
    ]
    assert [(e["agent"], e["to"], e["to_activation"]) for e in of_type(w, "spawn")] == [
        ("calculator", "agent", 1),
        ("calculator", "tools", 1),
        ("calculator", "agent", 2),
    ]
    assert of_type(w, "tool_call")[0]["agent"] == "tools"
    assert [(t.agent, t.activation) for t in episode.turns] == [("agent", 1), ("agent", 2)]
    assert w["topology"] == "centralized"


def _check_agent_graph(w: dict[str, Any], episode: Episode) -> None:
    """What both instrumentations must give for the agent -> tools -> agent run."""
    call, result = of_type(w, "tool_call")[0], of_type(w, "tool_result")[0]
    assert (call["tool"], result["agent"], result["trusted"]) == ("add", "add", False)
    assert (call["id"], result["id"]) in edges_of(w, "return")
    assert [(t.input_tokens, t.output_tokens) for t in episode.turns] == [(11, 7), (25, 6)]
    assert w["costs"]["tokens"] == 49 and w["costs"]["tool_calls"] == 1
    assert episode.turns[0].prompt is not None and episode.turns[0].prompt[0].content == "What is 2 + 3?"
    # The tool-call request and the tool's answer survive into the next turn's prompt.
    request = {
        "id": "call_add", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}},
    }
    assert [m.model_dump(exclude_none=True) for m in episode.turns[0].completion or []] == [
        {"role": "assistant", "content": "", "tool_calls": [request]}
    ]
    second = [m.model_dump(exclude_none=True) for m in episode.turns[1].prompt or []]
    assert second[1:] == [
        {"role": "assistant", "content": "", "tool_calls": [request]},
        {**second[2], "role": "tool", "content": "5", "tool_call_id": "call_add"},
    ]
    assert episode.turns[1].completion is not None and episode.turns[1].completion[0].content == "2 + 3 = 5"


@pytest.mark.parametrize("which", ["openinference", "openllmetry"])
def test_other_libraries_send_fan_out_and_its_reducer_is_an_aggregate(
    which: str, foreign_episode: ForeignEpisode
) -> None:
    """plan -> Send("work") x3 -> gather, recorded by another library alone: gather aggregates the three."""
    w = checked(foreign_episode(which, "fanout"))
    returns = {(e["from"], e["from_activation"]): e for e in of_type(w, "return")}
    assert {("plan", 1), ("work", 1), ("work", 2), ("work", 3), ("gather", 1), ("fan", 1)} == set(returns)
    (aggregate,) = of_type(w, "aggregate")
    assert (aggregate["agent"], aggregate["activation"]) == ("gather", 1)
    into = {src for src, dst in edges_of(w, "aggregate") if dst == aggregate["id"]}
    assert into == {returns["work", k]["id"] for k in (1, 2, 3)}
    assert w["topology"] == "centralized"


@pytest.mark.parametrize("which", ["openinference", "openllmetry"])
def test_other_libraries_send_fan_out_to_differently_named_nodes_is_aggregated_by_the_next_node(
    which: str, foreign_episode: ForeignEpisode
) -> None:
    """lead -> one Send to each of 8 nodes named apart -> tally, recorded by another library alone: tally
    aggregates the 8 (their tasks were started by Send packets), with one aggregate edge from each."""
    episode = foreign_episode(which, "experts")
    w = checked(episode)
    experts = {f"desk {i}" for i in range(8)}
    returns = {e["agent"]: e for e in of_type(w, "return")}
    assert set(returns) == experts | {"lead", "tally", "panel"}
    (aggregate,) = of_type(w, "aggregate")
    assert (aggregate["agent"], aggregate["activation"]) == ("tally", 1)
    into = {src for src, dst in edges_of(w, "aggregate") if dst == aggregate["id"]}
    assert into == {returns[name]["id"] for name in experts}
    assert sorted(t.agent for t in episode.turns) == sorted(experts)


# --- 4. frameworks whose own spans are GenAI spans (``native_genai_spans.py``)
# ---------------------------


def test_pydantic_ai_native_spans(tmp_path: Path) -> None:
    """PydanticAI's instrumentation: ``invoke_agent``, ``chat`` with GenAI messages and tool definitions,
    ``execute_tool``; lead's tool runs the comedian agent (PydanticAI's agent delegation)."""
    episode = script_episode("native_genai_spans.py", tmp_path / "pydantic_ai.jsonl", "pydantic_ai")
    w = assert_golden("pydantic_ai_delegation", episode)
    assert [(e["agent"], e["to"]) for e in of_type(w, "spawn")] == [("lead", "comedian")]
    assert [(e["agent"], e.get("to")) for e in of_type(w, "return")] == [("comedian", "lead"), ("lead", None)]
    (call,) = of_type(w, "tool_call")
    assert (call["agent"], call["tool"]) == ("lead", "ask_comedian")
    # FunctionModel counts tokens from the texts: these are its counts for these messages.
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("lead", 54, 5), ("comedian", 54, 7), ("lead", 61, 15)]
    assert w["costs"]["tokens"] == 196
    first, _, last = episode.turns
    assert [t.function["name"] for t in first.tools or []] == ["ask_comedian"]
    # PydanticAI sends a tool's answer as a ``user`` message of ``tool_call_response`` parts: a tool message
    assert [m.model_dump(exclude_none=True) for m in last.prompt or []][2] == {
        "role": "tool", "content": "Why did the chicken cross the road?", "tool_call_id": "call_1",
        "name": "ask_comedian"}
    assert last.completion is not None and last.completion[0].content.endswith("cross the road?")


def test_autogen_native_spans() -> None:
    """AutoGen's agents: ``create_agent`` (a spawn), ``invoke_agent``, ``execute_tool``; its runtime's
    messaging spans (``autogen publish/process/...``) are no actors. AutoGen records no model-call spans: no
    turns."""
    episode = convert_episode(list(decode_file(GOLDEN / "autogen_spans.jsonl")))
    w = assert_golden("autogen_team", episode)
    # ot.task("slogan") names its run after the task: it is the service's root agent
    decisions = [(e["agent"], e["decision"], e["to"]) for e in of_type(w, "orchestrator_decision")]
    assert decisions == [("autogen-app", "spawn", "writer"), ("autogen-app", "spawn", "reviewer")]
    assert [(e["agent"], e.get("to")) for e in of_type(w, "return")] == [
        ("writer", "autogen-app"), ("reviewer", "autogen-app"), ("autogen-app", None)]
    (call,) = of_type(w, "tool_call")
    assert (call["agent"], call["tool"]) == ("writer", "count_words")
    assert {e["agent"] for e in w["events"]} == {"autogen-app", "writer", "reviewer", "count_words"}
    assert episode.turns == [] and w["costs"]["tokens"] == 0


def test_autogen_with_no_span_around_the_run() -> None:
    """The same team with nothing around ``team.run``: AutoGen's runtime starts a trace per message (14 for
    the run), each root a messaging span linking to the span that sent its message. They are one run: one
    episode, in which the writer uses its tool and hands the reviewer the turn; the two agents' creations,
    before the run and in traces of their own, stay apart."""
    spans = decode_file(GOLDEN / "autogen_spans_unwrapped.jsonl")
    traces = convert_spans(spans)
    sizes = sorted(int(t.metrics["spans"]) for t in traces)
    assert sizes == [1, 1, len(spans) - 2]
    run = max(traces, key=lambda t: t.metrics["spans"])
    w = checked(run)
    assert len({e["otel_trace_id"] for e in w["events"] if "otel_trace_id" in e}) > 1
    (call,) = of_type(w, "tool_call")
    assert (call["agent"], call["tool"]) == ("writer", "count_words")
    # The runtime's messaging spans are no actors: the service's stand-in starts the team.
    service = spans[0].resource["service.name"]
    spawns = [(e["agent"], e["to"]) for e in of_type(w, "spawn")]
    assert spawns == [(service, "writer"), ("writer", "reviewer")]
    assert {e["agent"] for e in w["events"]} == {service, "writer", "reviewer", "count_words"}
    assert [e["agent"] for e in of_type(w, "return")][-1] == "reviewer"


def test_adk_sub_agents_are_their_root_agents() -> None:
    """Google ADK's own spans (``golden/adk_spans.jsonl``): ADK names its run (``invoke_workflow``) after its
    root agent and runs the root agent and the sub-agent it transfers to side by side in it. The run is the
    root agent's: ``coordinator`` asks its model (10 + 2), which calls ``transfer_to_agent``: a handoff to
    ``researcher``, whose two calls (20 + 3 each) use ``search``; no second ``coordinator``."""
    episode = convert_episode(list(decode_file(GOLDEN / "adk_spans.jsonl")))
    w = checked(episode)
    assert [(e["agent"], e["to"]) for e in of_type(w, "spawn")] == [("coordinator", "researcher")]
    # The transfer is the coordinator's handoff, as the Agents SDK's is: a decision, no tool call.
    (decision,) = of_type(w, "orchestrator_decision")
    assert (decision["agent"], decision["to"], decision.get("handoff")) == ("coordinator", "researcher", True)
    assert [(e["agent"], e["tool"]) for e in of_type(w, "tool_call")] == [("researcher", "search")]
    assert [(e["agent"], e.get("to")) for e in of_type(w, "return")] == [
        ("researcher", "coordinator"), ("coordinator", None)]
    tokens: dict[str, int] = {}
    for turn in episode.turns:
        tokens[turn.agent] = tokens.get(turn.agent, 0) + (turn.input_tokens or 0) + (turn.output_tokens or 0)
    assert tokens == {"coordinator": 12, "researcher": 46}
    first = min(episode.turns, key=lambda t: t.t)
    assert first.completion is not None and first.completion[0].tool_calls is not None
    assert first.completion[0].tool_calls[0].function.name == "transfer_to_agent"


@pytest.mark.parametrize("which", ["openinference", "openllmetry"])
def test_agents_sdk_runs_recorded_by_other_instrumentors(which: str) -> None:
    """The OpenAI Agents SDK under OpenInference's or OpenLLMetry's instrumentor (``golden/agents_*.jsonl``):
    ``triage`` (7 + 3) hands off to ``math`` (12 + 6, ``add``, 20 + 4), a handoff decision of triage's whose
    spawn is math's, whether the span names the target (OpenInference's ``handoff to math``) or not
    (OpenLLMetry's ``triage → unknown``); then ``orchestrator`` (30 + 10, 50 + 8) asks two agents as tools
    (10 + 2, 11 + 3), which are its spawns though OpenLLMetry records them beside it."""
    runs = traces_of(decode_file(GOLDEN / f"agents_{which}.jsonl"))
    traces = {min(t.turns, key=lambda u: u.t).agent: t for t in map(convert_episode, runs)}
    handoff, tools = traces["triage"], traces["orchestrator"]
    w = checked(handoff)
    (decision,) = [e for e in of_type(w, "orchestrator_decision") if e["agent"] == "triage"]
    assert (decision["decision"], decision["to"], decision.get("handoff")) == ("delegate", "math", True)
    (spawn,) = [e for e in of_type(w, "spawn") if e["to"] == "math"]
    assert spawn["agent"] == "triage"
    assert [(e["agent"], e["tool"]) for e in of_type(w, "tool_call")] == [("math", "add")]
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in handoff.turns] == [
        ("triage", 7, 3), ("math", 12, 6), ("math", 20, 4)]
    w = checked(tools)
    assert sorted(e["tool"] for e in of_type(w, "tool_call")) == ["ask_researcher0", "ask_researcher1"]
    # The agents called as tools are the orchestrator's (OpenLLMetry puts their spans beside it in the run).
    assert sorted((e["agent"], e["to"]) for e in of_type(w, "spawn")) == [
        ("Agent workflow" if which == "openinference" else "Agent Workflow", "orchestrator"),
        ("orchestrator", "researcher0"), ("orchestrator", "researcher1")]
    assert sorted((t.agent, t.input_tokens, t.output_tokens) for t in tools.turns) == [
        ("orchestrator", 30, 10), ("orchestrator", 50, 8), ("researcher0", 10, 2), ("researcher1", 11, 3)]
    assert w["costs"]["tokens"] == 124


def test_strands_swarm_handoff_and_content_blocks() -> None:
    """A Strands swarm (``golden/strands_swarm.jsonl``): ``researcher`` (20 + 3 per call) uses ``search``,
    then calls ``handoff_to_agent``: a handoff to ``writer`` (8 + 4), not the swarm starting it. Strands
    records messages as span events whose content is a JSON list of Bedrock content blocks: they are chat
    messages with tool calls and tool answers, and the tool's arguments and result are its content."""
    episode = convert_episode(list(decode_file(GOLDEN / "strands_swarm.jsonl")))
    w = checked(episode)
    handoffs = [(e["agent"], e["to"]) for e in of_type(w, "orchestrator_decision") if e.get("handoff")]
    assert handoffs == [("researcher", "writer")]
    assert [(e["agent"], e["to"]) for e in of_type(w, "spawn")] == [("invoke_swarm", "researcher"),
                                                                   ("researcher", "writer")]
    (call,) = of_type(w, "tool_call")
    assert (call["agent"], call["tool"], call["content_ref"]) == (
        "researcher", "search", ot.content_ref('{"query": "sky"}'))
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("researcher", 20, 3), ("researcher", 20, 3), ("researcher", 20, 3), ("writer", 8, 4)]
    second = episode.turns[1]
    assert [m.model_dump(exclude_none=True) for m in second.prompt or []][2:] == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "t-search", "type": "function",
             "function": {"name": "search", "arguments": {"query": "sky"}}}]},
        {"role": "tool", "content": "notes on sky", "tool_call_id": "t-search"}]
    assert second.completion is not None and second.completion[0].tool_calls is not None
    assert second.completion[0].tool_calls[0].function.name == "handoff_to_agent"
    assert [m.model_dump(exclude_none=True) for m in episode.turns[-1].completion or []] == [
        {"role": "assistant", "content": "Rayleigh scattering."}]


def test_smolagents_managed_agents_under_openinference() -> None:
    """smolagents under OpenInference (``golden/smolagents_managed.jsonl``): agent spans are named
    ``<name>.run`` and carry each agent's token totals. The agents are named as the manager calls them
    (``web_agent``, ``docs_agent``), their totals are not counted again, and each managed agent is the
    manager's spawn after the model call that asked for it."""
    episode = convert_episode(list(decode_file(GOLDEN / "smolagents_managed.jsonl")))
    w = checked(episode)
    assert [(e["agent"], e["to"]) for e in of_type(w, "spawn")] == [("manager", "web_agent"),
                                                                   ("manager", "docs_agent")]
    assert [(e["agent"], e["tool"]) for e in of_type(w, "tool_call")] == [
        ("web_agent", "search"), ("web_agent", "final_answer"), ("docs_agent", "final_answer"),
        ("manager", "final_answer")]
    assert [(t.agent, t.input_tokens, t.output_tokens) for t in episode.turns] == [
        ("manager", 10, 2), ("web_agent", 20, 3), ("web_agent", 20, 3), ("manager", 10, 2),
        ("docs_agent", 5, 1), ("manager", 10, 2)]
    assert w["costs"]["tokens"] == 88
    first = episode.turns[0]
    assert first.completion is not None and first.completion[0].tool_calls is not None
    assert first.completion[0].tool_calls[0].function.name == "web_agent"
    assert first.completion[0].tool_calls[0].function.arguments == {"task": "why blue"}
