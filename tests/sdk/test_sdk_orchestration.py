"""Orchestration calls: span events, aggregate spans and their links, no-ops outside tracing."""

from __future__ import annotations

import asyncio
import contextlib

import orchestrace as ot
import pytest
from opentelemetry.trace import SpanContext, StatusCode
from orchestrace import semconv as sc
from sdk_spans import Spans


def _events(span: object, name: str) -> list[dict[str, object]]:
    return [dict(event.attributes) for event in span.events if event.name == name]  # type: ignore[attr-defined]


def test_every_orchestration_event(spans: Spans) -> None:
    @ot.agent(role="worker")
    def worker() -> str:
        return "done"

    @ot.agent
    def boss() -> None:
        ot.spawn(worker, agent_id="worker-1", reason="needs help")
        ot.delegate("reviewer", role="critic", reason="check", handoff=True, options=["reviewer", "worker"])
        ot.message(worker, "please start")
        ot.message("boss", "note to self", sender="auditor")
        ot.decide("delegate", target=worker, reason="best fit", options=["worker", "reviewer"])
        ot.decide("retry-later")
        ot.human_intervention("approve", actor="alice", content="looks fine")
        ot.safety_event("prompt_injection", severity="high", action="blocked", source="call_1")
        ot.safety_event("pii", target=worker)
        ot.safety_event("pii", target=ot.current_agent())  # this instance
        ot.reward(0.75, family="team", unit="agent", target="worker-1", label="good", explanation="fast")
        ot.reward(1)
        ot.stop("goal reached")
        ot.stop(options=["answer", "worker"])

    boss()
    span = spans.one("invoke_agent boss")
    assert _events(span, sc.EVENT_SPAWN) == [{sc.ORCH_TARGET_AGENT: "worker", sc.ORCH_TARGET_ID: "worker-1",
                                              sc.ORCH_TARGET_ROLE: "worker", sc.ORCH_REASON: "needs help"}]
    assert _events(span, sc.EVENT_DELEGATE) == [{
        sc.ORCH_TARGET_AGENT: "reviewer", sc.ORCH_TARGET_ROLE: "critic", sc.ORCH_REASON: "check",
        sc.ORCH_HANDOFF: True, sc.ORCH_DECISION_OPTIONS: ("reviewer", "worker")}]
    first, second = _events(span, sc.EVENT_MESSAGE)
    assert first == {sc.ORCH_TO: "worker", sc.ORCH_CONTENT_REF: ot.content_ref("please start")}
    assert second[sc.ORCH_FROM] == "auditor" and sc.ORCH_CONTENT not in second  # capture is off
    decided, free = _events(span, sc.EVENT_DECISION)
    assert decided == {sc.ORCH_DECISION_KIND: "delegate", sc.ORCH_TARGET_AGENT: "worker",
                       sc.ORCH_REASON: "best fit", sc.ORCH_DECISION_OPTIONS: ("worker", "reviewer")}
    assert free == {sc.ORCH_DECISION_KIND: "retry-later"}
    assert _events(span, sc.EVENT_HUMAN_INTERVENTION) == [{
        sc.ORCH_HUMAN_KIND: "approve", sc.ORCH_HUMAN_ACTOR: "alice",
        sc.ORCH_CONTENT_REF: ot.content_ref("looks fine")}]
    assert _events(span, sc.EVENT_SAFETY) == [
        {sc.ORCH_SAFETY_CATEGORY: "prompt_injection", sc.ORCH_SAFETY_SEVERITY: "high",
         sc.ORCH_SAFETY_ACTION: "blocked", sc.ORCH_SAFETY_SOURCE: "call_1"},
        {sc.ORCH_SAFETY_CATEGORY: "pii", sc.ORCH_TARGET_AGENT: "worker"},
        {sc.ORCH_SAFETY_CATEGORY: "pii", sc.ORCH_TARGET_AGENT: "boss",
         sc.ORCH_TARGET_ID: span.attributes[sc.GEN_AI_AGENT_ID]}]
    rewarded, plain = _events(span, sc.EVENT_EVALUATION_RESULT)
    assert rewarded == {sc.GEN_AI_EVALUATION_NAME: "team", sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.75,
                        sc.GEN_AI_EVALUATION_SCORE_LABEL: "good", sc.GEN_AI_EVALUATION_EXPLANATION: "fast",
                        sc.ORCH_REWARD_FAMILY: "team", sc.ORCH_REWARD_UNIT: "agent",
                        sc.ORCH_REWARD_TARGET: "worker-1"}
    assert plain == {sc.GEN_AI_EVALUATION_NAME: "reward", sc.GEN_AI_EVALUATION_SCORE_VALUE: 1.0}
    assert _events(span, sc.EVENT_STOP) == [{sc.ORCH_REASON: "goal reached"},
                                            {sc.ORCH_DECISION_OPTIONS: ("answer", "worker")}]


def test_message_content_captured_when_on(captured: Spans) -> None:
    @ot.agent
    def talker() -> None:
        ot.message("listener", {"text": "hello"})

    talker()
    (event,) = _events(captured.one("invoke_agent talker"), sc.EVENT_MESSAGE)
    assert event[sc.ORCH_CONTENT] == '{"text":"hello"}'


def test_calls_outside_any_span_are_silent_no_ops(spans: Spans) -> None:
    ot.spawn("a")
    ot.delegate("a")
    ot.message("a", object())
    ot.decide("stop")
    ot.stop()
    ot.human_intervention()
    ot.safety_event("x")
    ot.reward(1.0)
    ot.reward("not a number")  # type: ignore[arg-type]
    ot.set_usage(input_tokens=1)
    with ot.aggregate(["a", "b"]) as merge:
        merge.set_result("ab")
    assert spans.all == []


def test_bad_reward_value_inside_agent_does_not_raise(spans: Spans) -> None:
    @ot.agent
    def judge() -> str:
        ot.reward("high")  # type: ignore[arg-type]
        return "still running"

    assert judge() == "still running"
    # Recorded as refused (the collector counts it), never as a score.
    (event,) = _events(spans.one("invoke_agent judge"), sc.EVENT_EVALUATION_RESULT)
    assert event[sc.ORCH_REWARD_REJECTED] == "not_a_number"
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in event


async def test_aggregate_links_to_the_producers_of_its_inputs(spans: Spans) -> None:
    @ot.agent
    async def researcher(topic: str) -> dict[str, str]:
        return {"topic": topic, "finding": topic[::-1]}

    @ot.tool
    def fetch() -> list[int]:
        return [1, 2, 3]

    @ot.agent
    async def lead() -> str:
        findings = await asyncio.gather(*(researcher(t) for t in ("ab", "cd", "ef")))
        data = fetch()
        with ot.aggregate([*findings, data, "unknown value"], reason="merge all") as merge:
            merge.set_result("summary")
        return "summary"

    await lead()
    aggregate_span = spans.one("aggregate lead")
    assert aggregate_span.attributes[sc.ORCH_OPERATION] == sc.OPERATION_AGGREGATE
    assert aggregate_span.attributes[sc.ORCH_REASON] == "merge all"
    assert aggregate_span.attributes[sc.ORCH_OUTPUT_REF] == ot.content_ref("summary")
    assert spans.parent_of(aggregate_span).name == "invoke_agent lead"  # type: ignore[union-attr]
    linked = {link.context.span_id for link in aggregate_span.links}
    producers = spans.named("invoke_agent researcher") + spans.named("execute_tool fetch")
    assert linked == {s.context.span_id for s in producers}
    link_attributes = {sc.ORCH_LINK_TYPE: sc.LINK_AGGREGATE_INPUT}
    assert all(link.attributes == link_attributes for link in aggregate_span.links)


def test_equal_results_link_each_producer_once(spans: Spans) -> None:
    @ot.agent
    def voter() -> str:
        return "yes"

    @ot.agent
    def judge() -> None:
        votes = [voter(), voter()]
        with ot.aggregate(votes):
            pass

    judge()
    links = spans.one("aggregate judge").links
    voters = spans.named("invoke_agent voter")
    assert {link.context.span_id for link in links} == {s.context.span_id for s in voters}


def test_aggregate_accepts_span_contexts_and_records_errors(spans: Spans) -> None:
    @ot.agent
    def combiner(contexts: list[SpanContext]) -> None:
        with ot.aggregate(contexts, agent="merger"):
            raise ValueError("merge failed")

    @ot.agent
    def source() -> None:
        return None

    @ot.agent
    def root() -> None:
        source()
        produced = spans.one("invoke_agent source").context
        with contextlib.suppress(ValueError):
            combiner([produced])

    root()
    aggregate_span = spans.one("aggregate merger")
    source_id = spans.one("invoke_agent source").context.span_id
    assert [link.context.span_id for link in aggregate_span.links] == [source_id]
    assert aggregate_span.status.status_code == StatusCode.ERROR


def test_no_links_when_nothing_resolves(spans: Spans) -> None:
    @ot.agent
    def alone() -> None:
        with ot.aggregate(["never returned by anyone 0x51"]):
            pass

    alone()
    assert spans.one("aggregate alone").links == ()


@pytest.mark.parametrize("latest", [False, True], ids=["default", "gen_ai_latest_experimental"])
def test_cache_counts_on_an_agent_span_follow_the_conventions(spans: Spans, latest: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``ot.set_usage`` in a model call writes its cache counts under the setting's names; outside one (on an
    agent's span) the latest conventions leave the cache counts out, the default keeps them."""
    if latest:
        monkeypatch.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, sc.GEN_AI_LATEST_EXPERIMENTAL)
    else:
        monkeypatch.delenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, raising=False)
    names = sc.GEN_AI_LATEST if latest else sc.GEN_AI_DEFAULT

    @ot.llm(model="m")
    def call() -> str:
        ot.set_usage(input_tokens=100, output_tokens=5, cache_read_input_tokens=60,
                     cache_creation_input_tokens=30)
        return "ok"

    @ot.agent
    def worker() -> str:
        call()
        ot.set_usage(input_tokens=100, output_tokens=5, cache_read_input_tokens=60,
                     cache_creation_input_tokens=30)
        return "done"

    worker()
    model_call = dict(spans.one("chat m").attributes or {})
    assert model_call[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 60
    assert model_call[names.cache_write_input_tokens] == 30
    other = sc.GEN_AI_DEFAULT if latest else sc.GEN_AI_LATEST
    assert other.cache_write_input_tokens not in model_call
    agent = dict(spans.one("invoke_agent worker").attributes or {})
    assert agent[sc.GEN_AI_USAGE_INPUT_TOKENS] == 100
    cache_keys = {sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, *sc.CACHE_WRITE_INPUT_TOKENS_NAMES}
    assert (cache_keys & set(agent)) == (set() if latest else {sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
                                                                  names.cache_write_input_tokens})
