"""The online loop of ``examples/online_rl`` end to end on loopback: a fake vLLM-like engine, the real
``orchestrace proxy`` and ``orchestrace collect`` processes, a LangGraph app on ``ChatOpenAI`` with no
orchestrace code in its model calls, and a trainer reading groups from the live feed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orchestrace as ot
import pytest
import uvicorn
from collector_fixtures import RunningCollector, validate_trace_dir
from opentelemetry.sdk.trace import TracerProvider
from orchestrace.proxy import POLICY_VERSION_HEADER, Gateway
from orchestrace_collector.export import export
from orchestrace_openai_agents import OpenAIAgentsInstrumentor
from starlette.testclient import TestClient

from examples.online_rl import agents_app, fake_engine, run


@dataclass
class Proxied:
    """A fake engine on loopback, and orchestrace writing finished traces (content captured) to ``out``."""

    engine_url: str
    out: Path
    handle: ot.TracingHandle

    def client(self, **options: Any) -> TestClient:
        """A client of a ``Gateway`` in front of the engine (``options``: the gateway's)."""
        return TestClient(Gateway(self.engine_url, **options).app())

    def written(self) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """Once the app is done: the traces written (each validated) and the turns, as exported."""
        self.handle.shutdown()
        traces = validate_trace_dir(self.out)
        turns = self.out.parent / "turns.jsonl"
        export([self.out], "jsonl", turns)
        return traces, [json.loads(line) for line in turns.read_text().splitlines()]


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Proxied]:
    engine = fake_engine.serve()
    out = tmp_path / "traces"
    handle = ot.configure("proxy-test", exporter="none", trace_dir=out, capture_content=True,
                          tracer_provider=TracerProvider(shutdown_on_exit=False))
    try:
        yield Proxied(f"http://127.0.0.1:{engine.server_port}/v1", out, handle)
    finally:
        handle.shutdown()
        engine.shutdown()


def _engine_ids(row: dict[str, Any]) -> tuple[list[int], list[int], list[float]]:
    """What the engine returned for the prompt this turn recorded."""
    prompt = [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]
    prompt_ids, sampled = fake_engine.sampled(prompt)
    return prompt_ids, [i for _, i, _ in sampled], [lp for _, _, lp in sampled]


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_groups_from_the_feed_hold_the_engines_token_ids(tmp_path: Path, streaming: bool) -> None:
    tasks, n = 2, 3
    loop = run.run(tmp_path, tasks=tasks, n=n, streaming=streaming)
    out = tmp_path / "traces"
    validate_trace_dir(out)
    groups = [step.group for step in loop.steps]
    # The LangGraph app's tasks and the Agents SDK app's, each group with its n rollouts.
    assert sorted(g.task_id for g in groups) == sorted(
        [f"task-{k}" for k in range(tasks)] + [f"agents-task-{k}" for k in range(tasks)])
    assert all(len(g.episodes) == n and not g.partial and not g.update for g in groups)
    assert sorted(e.outcome() for g in groups for e in g.episodes) == sorted(loop.rewards)
    for step in loop.steps:
        outcomes = [e.outcome() for e in step.group.episodes]
        mean = sum(o for o in outcomes if o is not None) / n
        assert step.advantages == pytest.approx([o - mean for o in outcomes if o is not None])
    rows = [row for g in groups for e in g.episodes for row in e.rows]
    # Two agents, one model call each, per rollout; each turn the calling agent's, with the engine's ids.
    assert sorted(r["agent"] for r in rows) == ["reviewer"] * 2 * tasks * n + ["solver"] * 2 * tasks * n
    for row in rows:
        assert (row["prompt_token_ids"], row["completion_token_ids"], row["completion_logprobs"]) == (
            _engine_ids(row))
        assert (row["response_model"], row["policy_version"]) == ("policy", run.POLICY_VERSION)
        assert row["completion"][0]["content"] == " ".join(fake_engine.reply_words(
            [{"role": m["role"], "content": m["content"]} for m in row["prompt"]]))
    export([out], "jsonl", tmp_path / "turns.jsonl")
    written = [json.loads(line) for line in (tmp_path / "turns.jsonl").read_text().splitlines()]
    assert sorted(rows, key=lambda r: r["turn_id"]) == sorted(written, key=lambda r: r["turn_id"])
    # The policy that served each turn is on the rows of every format, not only the turns'.
    export([out], "trl", tmp_path / "trl.jsonl")
    trl = [json.loads(line) for line in (tmp_path / "trl.jsonl").read_text().splitlines()]
    assert len(trl) == len(rows)
    assert {(r["response_model"], r["policy_version"]) for r in trl} == {("policy", run.POLICY_VERSION)}
    export([out], "tokens", tmp_path / "tokens.jsonl")
    tokens = [json.loads(line) for line in (tmp_path / "tokens.jsonl").read_text().splitlines()]
    assert sum(len(r["turn_ids"]) for r in tokens) == len(rows)
    for row in tokens:
        assert row["turn_policy_versions"] == [run.POLICY_VERSION] * len(row["turn_ids"])
        assert row["turn_response_models"] == ["policy"] * len(row["turn_ids"])


def test_the_caller_gets_the_engines_reply_in_the_shape_it_asked_for() -> None:
    engine = fake_engine.serve()
    handle = ot.configure("proxy-shape-test", exporter="memory")
    try:
        client = TestClient(Gateway(f"http://127.0.0.1:{engine.server_port}/v1").app())
        messages = [{"role": "user", "content": "hi"}]
        plain = client.post("/v1/chat/completions", json={"model": "m", "messages": messages}).json()
        direct = httpx.post(f"http://127.0.0.1:{engine.server_port}/v1/chat/completions",
                            json={"model": "m", "messages": messages}).json()
        assert plain == direct  # the ids and logprobs the proxy asked for are gone
        asked = client.post("/v1/chat/completions", json={"model": "m", "messages": messages,
                                                          "return_token_ids": True, "logprobs": True}).json()
        prompt_ids, sampled = fake_engine.sampled(messages)
        assert asked["prompt_token_ids"] == prompt_ids
        assert asked["choices"][0]["token_ids"] == [i for _, i, _ in sampled]
        streamed = client.post("/v1/chat/completions",
                               json={"model": "m", "messages": messages, "stream": True})
        chunks = [json.loads(line[5:]) for line in streamed.text.splitlines()
                  if line.startswith("data:") and "[DONE]" not in line]
        assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == plain["choices"][0]["message"][
            "content"]
        assert not any("token_ids" in c["choices"][0] or "prompt_token_ids" in c for c in chunks)
        assert all(c["choices"][0]["logprobs"] is None for c in chunks)
    finally:
        handle.shutdown()
        engine.shutdown()



def _events(text: str) -> list[Any]:
    """A stream's server-sent events' data, parsed (``[DONE]`` as it is)."""
    return [line[5:].strip() if "[DONE]" in line else json.loads(line[5:])
            for line in text.split("\n\n") if line.startswith("data:")]


def test_a_streamed_call_has_the_engines_usage_and_the_callers_stream_its_shape(proxied: Proxied) -> None:
    """A chat stream through the proxy: the proxy asks the engine for the usage (``include_usage``), the turn
    has it, and the caller, who did not ask, gets the engine's stream as it would have without it (no
    usage-only chunk); a caller who asked gets that chunk."""
    engine_url = proxied.engine_url
    client = proxied.client()
    body = {"model": "policy", "messages": [{"role": "user", "content": "stream it"}], "stream": True}
    asked = {**body, "stream_options": {"include_usage": True}}

    @ot.agent
    def streamer() -> tuple[str, str]:
        plain = client.post("/v1/chat/completions", headers=ot.inject(), json=body).text
        return plain, client.post("/v1/chat/completions", headers=ot.inject(), json=asked).text

    with ot.task("stream-usage"):
        plain, with_usage = streamer()
    assert plain == httpx.post(f"{engine_url}/chat/completions", json=body).text  # byte for byte
    assert _events(with_usage) == _events(httpx.post(f"{engine_url}/chat/completions", json=asked).text)
    assert _events(with_usage)[-2]["usage"] is not None
    _, rows = proxied.written()
    prompt_ids, sampled = fake_engine.sampled(body["messages"])
    assert [(r["input_tokens"], r["output_tokens"]) for r in rows] == [(len(prompt_ids), len(sampled))] * 2
    for row in rows:
        assert (row["prompt_token_ids"], row["completion_token_ids"]) == _engine_ids(row)[:2]


def test_a_call_the_app_records_too_is_one_turn_with_the_engines_token_ids(proxied: Proxied) -> None:
    """An ``@ot.llm`` function calling the engine through the proxy: the proxy's span is a child of the app's
    (``traceparent``); the collector keeps one turn, the app's, with the proxy's token ids and logprobs."""
    client = proxied.client(policy_version="v0")
    prompts = [[{"role": "user", "content": "question" + "?" * k}] for k in range(2)]

    @ot.llm("policy")
    def chat(messages: list[dict[str, str]]) -> dict[str, Any]:
        headers = {**ot.inject(), POLICY_VERSION_HEADER: f"v{len(messages[0]['content'])}"}
        reply: dict[str, Any] = client.post("/v1/chat/completions", headers=headers,
                                            json={"model": "policy", "messages": messages}).json()
        return reply

    @ot.agent
    def solver() -> None:
        for messages in prompts:
            chat(messages)

    with ot.task("merge"):
        solver()
    _, rows = proxied.written()
    assert [r["agent"] for r in rows] == ["solver", "solver"]
    assert [r["policy_version"] for r in rows] == ["v8", "v9"]  # each call's header won over the flag's v0
    for row, messages in zip(rows, prompts, strict=True):
        assert row["prompt"][0]["content"] == messages[0]["content"]
        assert (row["prompt_token_ids"], row["completion_token_ids"], row["completion_logprobs"]) == (
            _engine_ids(row))


def test_a_base_url_naming_the_episode_files_the_call_under_it(proxied: Proxied) -> None:
    """A client that sends no headers, with base URL ``/e/<episode>/v1``: the call is a turn of that episode,
    with the engine's token ids."""
    client = proxied.client()
    for task in ("a", "b"):
        with ot.task(task) as run:
            client.post(f"/e/{run.episode_id}/v1/chat/completions",
                        json={"model": "policy", "messages": [{"role": "user", "content": task}]})
    traces, rows = proxied.written()
    assert sorted((r["task_id"], r["prompt"][0]["content"]) for r in rows) == [("a", "a"), ("b", "b")]
    assert {r["trace_id"] for r in rows} == set(traces)
    for row in rows:
        assert (row["prompt_token_ids"], row["completion_token_ids"], row["completion_logprobs"]) == (
            _engine_ids(row))


def test_text_completions_and_responses_are_turns_too(proxied: Proxied) -> None:
    """``/v1/completions`` (vLLM's legacy logprobs) and ``/v1/responses`` through the proxy: turns of the
    calling agent, the completion's token ids the engine's, each reply the engine's as the caller asked."""
    engine_url = proxied.engine_url
    client = proxied.client()
    text_body = {"model": "policy", "prompt": "Once upon a time"}
    responses_body = {"model": "policy", "input": "Say hello"}

    @ot.agent
    def writer() -> tuple[dict[str, Any], dict[str, Any]]:
        text = client.post("/v1/completions", headers=ot.inject(), json=text_body).json()
        response = client.post("/v1/responses", headers=ot.inject(), json=responses_body).json()
        return text, response

    with ot.task("endpoints"):
        text, response = writer()
    _, rows = proxied.written()
    assert text == httpx.post(f"{engine_url}/completions", json=text_body).json()
    assert response == httpx.post(f"{engine_url}/responses", json=responses_body).json()
    assert [r["agent"] for r in rows] == ["writer", "writer"]
    prompt_ids, sampled = fake_engine.sampled([{"role": "user", "content": text_body["prompt"]}])
    assert (rows[0]["prompt_token_ids"], rows[0]["completion_token_ids"], rows[0]["completion_logprobs"]) == (
        prompt_ids, [i for _, i, _ in sampled], [lp for _, _, lp in sampled])
    assert rows[0]["completion"][0]["content"] == text["choices"][0]["text"]
    assert rows[1]["completion"][0]["content"] == response["output"][0]["content"][0]["text"]
    assert rows[1]["completion_token_ids"] is None  # the Responses API has no token ids to ask for


def test_configure_names_the_policy_version_of_the_apps_own_model_calls(tmp_path: Path) -> None:
    """Without the proxy: ``ot.configure(policy_version=...)`` is on each model call's turn, the version in
    force when the call started (configure again when the weights change); other spans carry none."""
    out = tmp_path / "traces"
    handle = ot.configure("policy-version-test", exporter="none", trace_dir=out, capture_content=True,
                          tracer_provider=TracerProvider(shutdown_on_exit=False), policy_version="step-1")

    @ot.llm("policy")
    def chat(question: str) -> dict[str, Any]:
        return {"choices": [{"message": {"role": "assistant", "content": question.upper()}}]}

    @ot.agent
    def solver() -> None:
        chat("first")
        ot.configure(policy_version="step-2")
        chat("second")

    try:
        with ot.task("versions"):
            solver()
    finally:
        handle.shutdown()
    traces = validate_trace_dir(out)
    export([out], "jsonl", tmp_path / "turns.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "turns.jsonl").read_text().splitlines()]
    assert [(r["completion"][0]["content"], r["policy_version"]) for r in rows] == [
        ("FIRST", "step-1"), ("SECOND", "step-2")]
    assert not any("policy_version" in e for t in traces.values() for e in t["events"])


def test_a_call_langgraphs_integration_records_too_is_one_turn_with_the_engines_ids(proxied: Proxied) -> None:
    """The LangGraph integration records a ``ChatOpenAI`` call from LangChain's callbacks (its span is not
    current while the request goes out): the proxy's span is its sibling, inside its time. One turn, the
    app's, with the proxy's token ids."""
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph
    from orchestrace_langgraph import LangGraphInstrumentor
    from pydantic import SecretStr
    from typing_extensions import TypedDict

    class State(TypedDict):
        question: str

    instrumentor = LangGraphInstrumentor()
    instrumentor.instrument()
    client = proxied.client()
    client.event_hooks["request"].append(lambda request: request.headers.update(ot.inject()))
    model = ChatOpenAI(model="policy", base_url="http://testserver/v1", api_key=SecretStr("x"),
                       http_client=client)

    def solver(state: State) -> State:
        first = model.invoke(state["question"])
        return {"question": str(model.invoke(f"{first.content}?").content)}

    graph = StateGraph(State)
    graph.add_node("solver", solver)
    graph.add_edge(START, "solver")
    graph.add_edge("solver", END)
    try:
        graph.compile().invoke({"question": "hi"})
    finally:
        instrumentor.uninstrument()
    _, rows = proxied.written()
    assert [r["agent"] for r in rows] == ["solver", "solver"]
    for row in rows:
        assert (row["prompt_token_ids"], row["completion_token_ids"], row["completion_logprobs"]) == (
            _engine_ids(row))



@pytest.mark.parametrize("instrumented", [False, True], ids=["plain", "instrumented"])
def test_an_agents_sdk_app_through_the_proxy_is_one_turn_per_call_with_the_engines_ids(
        proxied: Proxied, instrumented: bool) -> None:
    """The Agents SDK app (``OpenAIChatCompletionsModel`` on the proxy) with the proxy in this process: each
    call one turn of the calling agent with the engine's ids; also when ``OpenAIAgentsInstrumentor`` records
    the same call (the proxy's span is a child of its model-call span: one turn, the app's, with the proxy's
    ids, and its whole prompt: the proxy's history is its own, so the app's call never refers to the proxy's
    call the collector folds away)."""
    tasks, n = 2, 2
    port = run._free_port()
    server = uvicorn.Server(uvicorn.Config(Gateway(proxied.engine_url, policy_version="v1").app(),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    instrumentor = OpenAIAgentsInstrumentor()
    if instrumented:
        instrumentor.instrument()
    try:
        while not server.started:
            time.sleep(0.01)
        agents = agents_app.build(f"http://127.0.0.1:{port}/v1")
        for attempt in range(n):
            for task in range(tasks):
                agents_app.rollout(agents, f"task-{task}", run.QUESTIONS[task], attempt, traced=instrumented)
    finally:
        if instrumented:
            instrumentor.uninstrument()
        server.should_exit = True
        thread.join(30)
    traces, rows = proxied.written()
    assert len(traces) == tasks * n
    assert sorted(r["agent"] for r in rows) == ["reviewer"] * tasks * n + ["solver"] * tasks * n
    for row in rows:
        assert not row["prompt_incomplete"]
        instructions = agents[row["agent"] == "reviewer"].instructions
        assert (row["prompt"][0]["role"], row["prompt"][0]["content"]) == ("system", instructions)
        assert (row["prompt_token_ids"], row["completion_token_ids"], row["completion_logprobs"]) == (
            _engine_ids(row))
        assert row["policy_version"] == "v1"


ENGINE_KEY, PROXY_TOKEN = "engine-key-1", "proxy-token-2"


def _ask(client: httpx.Client, authorization: str | None) -> httpx.Response:
    headers = {"authorization": authorization} if authorization else {}
    # The other credential headers a client may send are the proxy's too: they never reach the engine.
    headers |= {"x-api-key": ENGINE_KEY, "api-key": ENGINE_KEY, "cookie": f"session={ENGINE_KEY}",
                "proxy-authorization": f"Basic {ENGINE_KEY}", "x-request-id": "r-1"}
    return client.post("/v1/chat/completions", headers=headers,
                       json={"model": "policy", "messages": [{"role": "user", "content": "hi"}]})


def _assert_served(reply: httpx.Response) -> None:
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == " ".join(
        fake_engine.reply_words([{"role": "user", "content": "hi"}]))


def test_the_callers_credentials_never_reach_the_engine() -> None:
    """An engine that asks for its key (``vllm serve --api-key``): the caller's ``Authorization`` is the
    proxy's business and is not passed on, even when it holds the engine's key; the engine gets the proxy's
    own key (``upstream_key``), or the caller's header only when told to (``forward_authorization``)."""
    engine = fake_engine.serve(api_key=ENGINE_KEY)
    engine_url = f"http://127.0.0.1:{engine.server_port}/v1"
    try:
        open_proxy = TestClient(Gateway(engine_url).app())
        assert _ask(open_proxy, f"Bearer {ENGINE_KEY}").status_code == 401  # the engine's refusal
        seen = engine.headers_seen[-1]
        assert seen["x-request-id"] == "r-1"  # other headers are passed on
        assert not {"authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"} & set(seen)

        keyed = TestClient(Gateway(engine_url, tokens=frozenset({PROXY_TOKEN}),
                                   upstream_key=ENGINE_KEY).app())
        _assert_served(_ask(keyed, f"Bearer {PROXY_TOKEN}"))
        assert PROXY_TOKEN not in str(engine.headers_seen[-1])
        assert _ask(keyed, f"Bearer {ENGINE_KEY}").status_code == 401  # not a proxy token
        assert _ask(keyed, None).status_code == 401

        forwarding = TestClient(Gateway(engine_url, forward_authorization=True).app())
        assert _ask(forwarding, f"Bearer {ENGINE_KEY}").status_code == 200
        assert _ask(forwarding, "Bearer wrong").status_code == 401
        assert engine.headers_seen[-1]["authorization"] == "Bearer wrong"  # as it is; nothing else
        assert not {"proxy-authorization", "cookie", "api-key", "x-api-key"} & set(engine.headers_seen[-1])
        with pytest.raises(ValueError, match="token file"):
            Gateway(engine_url, tokens=frozenset({PROXY_TOKEN}), forward_authorization=True)
    finally:
        engine.shutdown()


def test_the_proxy_command_sends_the_engine_its_key_file(tmp_path: Path, collector: RunningCollector) -> None:
    """``orchestrace proxy --token-file T --upstream-key-file K``, a process: a caller with a token of T is
    served by an engine that accepts only K's key; ``--forward-authorization`` with ``--token-file`` is
    refused at start."""
    engine = fake_engine.serve(api_key=ENGINE_KEY)
    (tmp_path / "tokens").write_text(f"trainer:{PROXY_TOKEN}\n")
    (tmp_path / "engine.key").write_text(ENGINE_KEY + "\n")
    command = [sys.executable, "-m", "orchestrace.proxy", "--upstream",
               f"http://127.0.0.1:{engine.server_port}/v1", "--token-file", str(tmp_path / "tokens")]
    port = run._free_port()
    try:
        keyed = [*command, "--upstream-key-file", str(tmp_path / "engine.key"), "--port", str(port),
                 "--collector", collector.base_url]
        with (run._process(keyed, f"http://127.0.0.1:{port}/v1/models", tmp_path / "proxy.log"),
              httpx.Client(base_url=f"http://127.0.0.1:{port}") as client):
            _assert_served(_ask(client, f"Bearer {PROXY_TOKEN}"))
        assert collector.stop() == 0
        assert len(validate_trace_dir(collector.out)) == 1  # the call, recorded
        refused = subprocess.run([*command, "--forward-authorization"], capture_output=True, text=True,
                                 timeout=60)
        assert refused.returncode == 2 and "token file" in refused.stderr, refused.stderr
    finally:
        engine.shutdown()
