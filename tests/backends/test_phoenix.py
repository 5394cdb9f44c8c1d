"""A real OTel backend: Arize Phoenix, started on loopback, fed an example's spans over OTLP/HTTP by the real
OTLP exporter, read back through its REST API.

Phoenix classifies spans from the GenAI attributes (and OpenInference's kind where GenAI has none): model
calls must be LLM spans with their token counts and messages, agents AGENT, tools TOOL with arguments and
result, workflow runs and graph nodes CHAIN (an aggregate too, never an LLM), every span OK, and one Phoenix
session per episode. Phoenix runs from its own locked environment (``tests/backends/phoenix``: its
dependencies are not ours), installed by ``uv`` on first use.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from collector_fixtures import free_port, validate_trace_dir
from orchestrace import semconv as sc
from orchestrace_collector.output import latest_traces, latest_turns

from examples.agents_triage import app as agents_triage_app
from examples.map_reduce import app as map_reduce_app
from examples.supervisor import app as supervisor_app

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).parent / "phoenix"
#: Installing Phoenix's environment on a fresh machine and its first start (database migrations).
START_TIMEOUT_S = 900.0


def _uv() -> str:
    """The uv running this test session (``uv run`` tells its children), else the one on PATH or the
    repository's bootstrap copy (``make``)."""
    for candidate in (os.environ.get("UV"), shutil.which("uv"), str(ROOT / ".tools" / "bin" / "uv")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail("uv not found: Phoenix runs from its own uv-locked environment (tests/backends/phoenix)")


@dataclass
class Phoenix:
    url: str
    log: Path

    def spans(self, project: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
            response = httpx.get(f"{self.url}/v1/projects/{project}/spans", params=params, timeout=30)
            if response.status_code == 404:  # no span of that project arrived yet
                return []
            response.raise_for_status()
            body = response.json()
            found += body["data"]
            cursor = body.get("next_cursor")
            if not cursor:
                return found

    def sessions(self, project: str) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/v1/projects/{project}/sessions", params={"limit": 100}, timeout=30)
        response.raise_for_status()
        return list(response.json()["data"])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End Phoenix and what uv started for it (its own process group), and wait for them."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    # uv's child may outlive uv itself for a moment: nothing of the group may stay behind.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "PHOENIX_")) and key != "VIRTUAL_ENV"}
    env.update({
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        # Phoenix binds its gRPC receiver to every interface whatever PHOENIX_HOST says: serve.py keeps it
        # off (nothing here sends gRPC); the port is set only so that no default port is claimed.
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    })
    log = work / "phoenix.log"
    command = [_uv(), "run", "--frozen", "--project", str(PROJECT), "python", str(PROJECT / "serve.py")]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    running = Phoenix(f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                tail = log.read_text(errors="replace")[-4000:]
                pytest.fail(f"Phoenix exited ({process.returncode}):\n{tail}")
            try:
                if httpx.get(f"{running.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not start:\n{log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.5)
        yield running
    finally:
        _stop(process)


@dataclass
class Sent:
    """One run of an example: what Phoenix stored of it, and what the collector wrote of the same run."""

    spans: list[dict[str, Any]]
    traces: list[dict[str, Any]]
    turns: list[dict[str, Any]]

    def kinds(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for span in self.spans:
            found.setdefault(span["name"], set()).add(span["span_kind"])
        return found

    def named(self, name: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["name"] == name]


def send(phoenix: Phoenix, example: str, project: str, out: Path, *, full_prompt: bool = False) -> Sent:
    """Run ``examples.<example>.app`` as users do, exporting over OTLP/HTTP to Phoenix (capture on) and
    writing its orchestration traces in-process; wait until Phoenix has stored every span."""
    before = {span["context"]["span_id"] for span in phoenix.spans(project)}
    env = {**os.environ, "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
           "ORCHESTRACE_FULL_PROMPT": "true" if full_prompt else "false"}
    trace_dir = out / "traces"
    done = subprocess.run(
        [sys.executable, "-m", f"examples.{example}.app", "--exporter", "otlp", "--endpoint", phoenix.url,
         "--capture-content", "--trace-dir", str(trace_dir)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    validate_trace_dir(trace_dir)
    traces = latest_traces([trace_dir])
    turns = [turn for per_trace in latest_turns(trace_dir, traces).values() for turn in per_trace]
    # Every model call of the run is a turn: wait for their spans, then until Phoenix's bulk insert settles.
    wanted = {turn["turn_id"] for turn in turns}
    deadline = time.monotonic() + 60
    stored: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        new = [span for span in phoenix.spans(project) if span["context"]["span_id"] not in before]
        if wanted <= {span["context"]["span_id"] for span in new} and len(new) == len(stored):
            break
        stored = new
        time.sleep(1.0)
    else:
        tail = phoenix.log.read_text(errors="replace")[-3000:]
        pytest.fail(f"Phoenix stored {len(stored)} spans, not every model call:\n{tail}")
    stored.sort(key=lambda span: span["start_time"])  # (Phoenix lists the newest first)
    return Sent(stored, list(traces.values()), turns)


def _messages(span: dict[str, Any], direction: str) -> list[dict[str, Any]]:
    """Phoenix's flattened ``llm.<direction>_messages.<i>.message.<field>`` as a list of dicts."""
    prefix = f"llm.{direction}_messages."
    found: dict[int, dict[str, Any]] = {}
    for key, value in span["attributes"].items():
        if key.startswith(prefix):
            index, _, field = key[len(prefix):].partition(".message.")
            found.setdefault(int(index), {})[field] = value
    return [found[i] for i in sorted(found)]


def _words(text: object) -> int:
    """The scripted models' token count (``examples.fakes``): whitespace-separated words."""
    return len(str(text).split()) if text else 0


@pytest.fixture(scope="module")
def supervisor(phoenix: Phoenix, tmp_path_factory: pytest.TempPathFactory) -> list[Sent]:
    """Two runs (two episodes) of the supervisor example, the second with ``full_prompt``."""
    out = tmp_path_factory.mktemp("supervisor")
    return [send(phoenix, "supervisor", "supervisor", out / "1"),
            send(phoenix, "supervisor", "supervisor", out / "2", full_prompt=True)]


def test_span_kinds_and_statuses(supervisor: list[Sent]) -> None:
    for run in supervisor:
        kinds = run.kinds()
        print("Phoenix span kinds:", Counter(span["span_kind"] for span in run.spans))
        for name, found in kinds.items():
            expected = ("LLM" if name.startswith("chat ") else "AGENT" if name.startswith("invoke_agent ")
                        else "TOOL" if name.startswith("execute_tool ") else "CHAIN")
            assert found == {expected}, (name, found)
        # the example's shape: the supervisor and its three workers, their tools, the graph's nodes
        for worker in ("supervisor", "researcher", "mathematician", "writer"):
            assert kinds[f"invoke_agent {worker}"] == {"AGENT"}
        assert kinds["invoke_workflow moon_team"] == kinds["invoke_workflow moons"] == {"CHAIN"}
        assert kinds["tools"] == {"CHAIN"}  # a graph node
        assert {span["status_code"] for span in run.spans} == {"OK"}
        (root,) = [span for span in run.spans if span["parent_id"] is None]
        assert root["name"] == "invoke_workflow moons"
        ids = {span["context"]["span_id"] for span in run.spans}
        assert all(span["parent_id"] in ids for span in run.spans if span is not root)  # nothing dangles


def test_token_counts_are_the_model_calls(supervisor: list[Sent]) -> None:
    for run in supervisor:
        turns = {turn["turn_id"]: turn for turn in run.turns}
        llm = [span for span in run.spans if span["span_kind"] == "LLM"]
        assert len(llm) == len(turns) == 10  # 4 supervisor calls, 2 for each of the 3 workers
        for span in llm:
            attributes, turn = span["attributes"], turns[span["context"]["span_id"]]
            assert attributes["llm.token_count.prompt"] == turn["input_tokens"] > 0
            assert attributes["llm.token_count.completion"] == turn["output_tokens"] > 0
            assert attributes["llm.token_count.total"] == turn["input_tokens"] + turn["output_tokens"]
        total = sum(span["attributes"]["llm.token_count.total"] for span in llm)
        (trace,) = run.traces
        assert total == trace["costs"]["tokens"]
        print("tokens of the run, Phoenix and collector:", total)


def test_inputs_and_outputs(supervisor: list[Sent]) -> None:
    for run in supervisor:
        question, answer = supervisor_app.QUESTION, supervisor_app.ANSWER
        for name in ("invoke_workflow moon_team", "invoke_agent researcher"):
            (span,) = run.named(name)
            assert _messages(span, "input")[0] == {"role": "user", "content": question}
        (graph_run,) = run.named("invoke_workflow moon_team")
        assert _messages(graph_run, "output") == [{"role": "assistant", "content": answer,
                                                   "finish_reason": "stop"}]
        last_supervisor = run.named("invoke_agent supervisor")[-1]
        assert _messages(last_supervisor, "output")[0]["content"] == answer
        # Phoenix keeps a tool's arguments as an object (flattened by its REST API) and its result as output
        looked_up = {span["attributes"]["tool.parameters.planet"]: span["attributes"]["output.value"]
                     for span in run.named("execute_tool lookup_moons")}
        assert looked_up == {"Mars": "2", "Jupiter": "95"}
        (added,) = run.named("execute_tool add")
        assert (added["attributes"]["tool.parameters.a"], added["attributes"]["tool.parameters.b"]) == (2, 95)
        assert added["attributes"]["output.value"] == "97"
        for span in run.spans:
            if span["span_kind"] == "LLM":
                assert _messages(span, "output"), span["name"]
                assert span["attributes"]["llm.model_name"].endswith("-model")


def pane_counts(run: Sent) -> tuple[int, int, int]:
    """Of a run's agent and workflow spans (also a runner's ``handle_conversation_turn``): how many there
    are, and how many fill Phoenix's Input and Output panes (``input.value`` / ``output.value``), each the
    JSON of the GenAI messages the span carries."""
    panes = [span for span in run.spans if span["span_kind"] == "AGENT"
             or span["name"].startswith((f"{sc.OP_INVOKE_WORKFLOW} ", f"{sc.OP_HANDLE_CONVERSATION_TURN} "))]
    shown: Counter[str] = Counter()
    for span in panes:
        attributes = span["attributes"]
        for value, messages, mime in ((sc.INPUT_VALUE, sc.GEN_AI_INPUT_MESSAGES, sc.INPUT_MIME_TYPE),
                                      (sc.OUTPUT_VALUE, sc.GEN_AI_OUTPUT_MESSAGES, sc.OUTPUT_MIME_TYPE)):
            assert (value in attributes) == (messages in attributes), (span["name"], value)
            if value in attributes:
                assert json.loads(attributes[value]) and attributes[mime] == sc.MIME_JSON
                shown[value] += 1
    print(f"agent and workflow spans: {len(panes)}, input pane filled {shown[sc.INPUT_VALUE]}, "
          f"output pane filled {shown[sc.OUTPUT_VALUE]}")
    return len(panes), shown[sc.INPUT_VALUE], shown[sc.OUTPUT_VALUE]


def _pane_text(span: dict[str, Any], key: str) -> str:
    """The texts a pane's messages hold, joined."""
    return " ".join(str(part.get("content") or part.get("response") or part.get("name"))
                    for message in json.loads(span["attributes"][key]) for part in message["parts"])


def test_agents_and_workflows_fill_the_input_and_output_panes(supervisor: list[Sent]) -> None:
    """Phoenix's Input and Output panes show ``input.value`` / ``output.value``: every agent and workflow
    span of the supervisor example fills both with the messages it captured (JSON, as its GenAI messages):
    a supervisor activation that hands off (a ``Command.PARENT``) and its graph run show what they hand over,
    the ``ot.task`` what the example gives it (``set_input`` / ``set_result``). A model call keeps its
    content in its messages alone, which Phoenix shows as such."""
    for run in supervisor:
        # 7 agent activations, each with its graph run; the team's graph run; the task
        assert pane_counts(run) == (16, 16, 16)
        (task,) = run.named("invoke_workflow moons")
        assert _pane_text(task, sc.INPUT_VALUE) == supervisor_app.QUESTION
        assert _pane_text(task, sc.OUTPUT_VALUE) == supervisor_app.ANSWER
        (graph_run,) = run.named("invoke_workflow moon_team")
        assert _pane_text(graph_run, sc.INPUT_VALUE) == supervisor_app.QUESTION
        assert _pane_text(graph_run, sc.OUTPUT_VALUE) == supervisor_app.ANSWER
        # the supervisor hands off three times (its handoff tool's answer), then answers
        for name in ("invoke_agent supervisor", "invoke_workflow supervisor"):
            shown = [_pane_text(span, sc.OUTPUT_VALUE) for span in run.named(name)]
            handoffs = [f"Successfully transferred to {worker}"
                        for worker in ("researcher", "mathematician", "writer")]
            assert shown == [*handoffs, supervisor_app.ANSWER]
        for span in run.spans:
            if span["span_kind"] == "LLM":
                assert _messages(span, "input") and _messages(span, "output"), span["name"]


def test_an_agents_sdk_app_fills_the_input_and_output_panes(phoenix: Phoenix, tmp_path: Path) -> None:
    """The OpenAI Agents SDK's spans hold no input or output: each agent shows its input items and its last
    reply (the triage agent its handoff), each run the question and the final answer."""
    run = send(phoenix, "agents_triage", "agents-triage", tmp_path)
    assert pane_counts(run) == (6, 6, 6)  # two questions: a run, triage and a specialist each
    runs = [span for span in run.spans if span["span_kind"] == "CHAIN" and span["parent_id"] is None]
    assert [_pane_text(span, sc.INPUT_VALUE) for span in runs] == list(agents_triage_app.QUESTIONS)
    assert [_pane_text(span, sc.OUTPUT_VALUE) for span in runs] == [
        "You were charged twice; the duplicate 30 EUR is refunded.",
        "The dashboard is degraded; a fix is in progress."]
    assert [_pane_text(span, sc.OUTPUT_VALUE) for span in run.named("invoke_agent triage")] == [
        "transfer_to_billing", "transfer_to_tech_support"]
    assert {span["status_code"] for span in run.spans} == {"OK"}


def test_full_prompt_shows_each_model_call_whole(supervisor: list[Sent]) -> None:
    """Without the option a chat span shows the messages no earlier call showed; with it, its whole prompt,
    whose words are the call's prompt tokens (the scripted models count words)."""
    default, full = supervisor
    shown = {False: 0, True: 0}
    for run, whole in ((default, False), (full, True)):
        for span in run.spans:
            if span["span_kind"] != "LLM":
                continue
            attributes, messages = span["attributes"], _messages(span, "input")
            shown[whole] += len(messages)
            if whole:
                assert len(messages) == attributes[sc.ORCH_INPUT_MESSAGE_COUNT]
                assert sum(_words(m.get("content")) for m in messages) == attributes["llm.token_count.prompt"]
                assert sc.ORCH_PREFIX_SPAN_ID not in attributes
    assert any(sc.ORCH_PREFIX_SPAN_ID in span["attributes"] for span in default.spans)
    print("input messages shown on chat spans, default vs full_prompt:", shown)
    assert shown[True] > shown[False]


def test_one_session_per_episode(phoenix: Phoenix, supervisor: list[Sent]) -> None:
    episodes = [run.traces[0]["trace_id"] for run in supervisor]
    for run, episode in zip(supervisor, episodes, strict=True):
        sessions = {span["attributes"].get("session.id") for span in run.spans} - {None}
        assert sessions == {episode}
    assert len(set(episodes)) == 2
    assert episodes[0] != supervisor[0].traces[0]["task_id"]  # a task's rollouts are not one conversation
    assert {session["session_id"] for session in phoenix.sessions("supervisor")} == set(episodes)


def test_an_aggregate_is_a_chain_not_an_llm(phoenix: Phoenix, tmp_path: Path) -> None:
    """The reducer step of a Send fan-out (map_reduce) and an ``ot.aggregate`` (custom_agents, the SDK)."""
    reduced = send(phoenix, "map_reduce", "map-reduce", tmp_path / "map_reduce")
    (summarize,) = reduced.named("summarize")
    assert summarize["span_kind"] == "CHAIN" and summarize["status_code"] == "OK"
    assert reduced.kinds()["research"] == {"CHAIN"} and len(reduced.named("research")) == 4
    assert [e for e in reduced.traces[0]["events"] if e["type"] == "aggregate"]  # the collector's view
    (summary,) = reduced.named("chat summarizer-model")
    assert _messages(summary, "output")[0]["content"] == (
        "Jupiter is the largest, with a mean radius of 69911 km.")
    prompt = _messages(summary, "input")[0]["content"]
    assert all(str(radius) in prompt for radius in map_reduce_app.RADIUS_KM.values())  # every finding

    merged = send(phoenix, "custom_agents", "custom-agents", tmp_path / "custom_agents")
    (aggregate,) = [span for span in merged.spans if span["name"].startswith("aggregate ")]
    assert aggregate["span_kind"] == "CHAIN" and aggregate["status_code"] == "OK"
    assert aggregate["attributes"]["output.value"]
    assert not any(key.startswith("llm.") for key in aggregate["attributes"])
    assert {span["status_code"] for span in merged.spans} == {"OK"}
