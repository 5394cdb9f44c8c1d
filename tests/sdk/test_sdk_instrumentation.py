"""The public API integrations use (``orchestrace.instrumentation``): each invocation's whole attribute set,
the telemetry that decides where spans go and what they carry, suspend / resume, events, errors, failures."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import orchestrace as ot
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from orchestrace import instrumentation as inst
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config

CAPTURE = CaptureConfig(capture_content=True)
NO_CAPTURE = CaptureConfig(capture_content=False)


class Recorder:
    """A tracer provider of one test with an in-memory exporter."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(shutdown_on_exit=False)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans if s.name == name]
        assert len(found) == 1, (name, [s.name for s in self.spans])
        return found[0]

    def telemetry(self, capture: CaptureConfig | None = NO_CAPTURE) -> inst.Telemetry:
        return inst.Telemetry(self.provider, capture)


@pytest.fixture
def rec(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    set_config(None)
    yield Recorder()
    set_config(None)


def test_agent_invocation_records_its_whole_attribute_set(rec: Recorder) -> None:
    telemetry = rec.telemetry(CAPTURE)
    invocation = inst.start_agent(telemetry, "triage", agent_id="triage-1", role="router", input="help me",
                                  attributes={"framework.step": 3})
    token = invocation.resume()
    assert ot.current_agent() == ot.AgentFrame("triage", "triage-1", "router")
    invocation.stop("routed to billing", token)
    assert ot.current_agent() is None
    span = rec.one("invoke_agent triage")
    prompt = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "help me"}]}])
    reply = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "routed to billing"}],
                         "finish_reason": "stop"}])
    assert dict(span.attributes or {}) == {
        sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "triage",
        sc.GEN_AI_AGENT_ID: "triage-1", sc.ORCH_AGENT_ROLE: "router", "framework.step": 3,
        sc.ORCH_INPUT_REF: ot.content_ref("help me"), sc.ORCH_OUTPUT_REF: ot.content_ref("routed to billing"),
        sc.GEN_AI_INPUT_MESSAGES: prompt, sc.GEN_AI_OUTPUT_MESSAGES: reply,
        # what Phoenix shows in its Input and Output panes
        sc.INPUT_VALUE: prompt, sc.INPUT_MIME_TYPE: sc.MIME_JSON,
        sc.OUTPUT_VALUE: reply, sc.OUTPUT_MIME_TYPE: sc.MIME_JSON,
    }
    assert span.status.status_code == StatusCode.OK
    assert span.instrumentation_scope is not None and span.instrumentation_scope.name == "orchestrace"


def test_content_for_phoenix_panes_on_workflows_and_agents_never_twice_on_model_calls(rec: Recorder) -> None:
    """With capture on, a workflow and an agent carry their messages as OpenInference's input / output
    values too (Phoenix shows those in its panes); a model call only as GenAI messages, whatever the path;
    a graph step (framework state) neither."""
    telemetry = rec.telemetry(CAPTURE)
    workflow = inst.start_workflow(telemetry, "support", input={"messages": [("user", "where is 42?")]})
    agent = inst.start_agent(telemetry, "triage", input="where is 42?", context=workflow.context)
    step = inst.start_step(telemetry, "router", context=agent.context)
    call = inst.start_model_call(telemetry, "gpt-test", input=[{"role": "user", "content": "where is 42?"}],
                                 context=agent.context)
    call.stop({"choices": [{"message": {"role": "assistant", "content": "shipped"},
                            "finish_reason": "stop"}]})
    chat = inst.start_chat(telemetry, [{"role": "user", "content": "and 43?"}], model="gpt-test",
                           context=agent.context)
    chat.stop("pending")
    step.stop({"state": 1})
    agent.stop("shipped")
    workflow.set_output({"messages": [("assistant", "shipped")]}, ref=False)
    workflow.stop()
    for name in ("invoke_workflow support", "invoke_agent triage"):
        attributes = dict(rec.one(name).attributes or {})
        assert attributes[sc.INPUT_VALUE] == attributes[sc.GEN_AI_INPUT_MESSAGES], name
        assert attributes[sc.OUTPUT_VALUE] == attributes[sc.GEN_AI_OUTPUT_MESSAGES], name
        assert attributes[sc.INPUT_MIME_TYPE] == attributes[sc.OUTPUT_MIME_TYPE] == sc.MIME_JSON
        assert "where is 42?" in str(attributes[sc.INPUT_VALUE])
        assert "shipped" in str(attributes[sc.OUTPUT_VALUE])
    model_calls = [s for s in rec.spans if s.name == "chat gpt-test"]
    assert len(model_calls) == 2
    for span in [*model_calls, rec.one("router")]:
        attributes = dict(span.attributes or {})
        panes = {sc.INPUT_VALUE, sc.OUTPUT_VALUE, sc.INPUT_MIME_TYPE, sc.OUTPUT_MIME_TYPE}
        assert not panes & set(attributes), span.name
    assert all(sc.GEN_AI_OUTPUT_MESSAGES in (s.attributes or {}) for s in model_calls)


def test_tool_model_call_workflow_and_step_attribute_sets(rec: Recorder) -> None:
    telemetry = rec.telemetry()  # no content: refs only
    workflow = inst.start_workflow(telemetry, "support", episode_id="ep-1", input={"question": "q"})
    token = workflow.resume()
    step = inst.start_step(telemetry, "router", operation=sc.OPERATION_NODE)
    tool = inst.start_tool(telemetry, "lookup", call_id="call_7", description="Find an order",
                           arguments={"order": 42})
    call = inst.start_model_call(telemetry, "gpt-test", provider="openai", input=[{"role": "user",
                                                                                    "content": "hi"}],
                                 request={"temperature": 0.2, "api_key": "secret", "tools": []})
    tool.stop({"status": "shipped"})
    call.stop({"choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1}, "model": "gpt-test-1", "id": "r1"})
    step.stop("state")
    workflow.stop(None, token)
    assert dict(rec.one("invoke_workflow support").attributes or {}) == {
        sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW, sc.GEN_AI_WORKFLOW_NAME: "support",
        sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_CHAIN, sc.ORCH_EPISODE_ID: "ep-1",
        sc.GEN_AI_CONVERSATION_ID: "ep-1",
        sc.ORCH_INPUT_REF: ot.content_ref({"question": "q"})}
    assert dict(rec.one("router").attributes or {}) == {sc.ORCH_OPERATION: sc.OPERATION_NODE,
                                                        sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_CHAIN,
                                                        sc.ORCH_OUTPUT_REF: ot.content_ref("state")}
    assert dict(rec.one("execute_tool lookup").attributes or {}) == {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "lookup",
        sc.GEN_AI_TOOL_TYPE: "function", sc.GEN_AI_TOOL_CALL_ID: "call_7",
        sc.GEN_AI_TOOL_DESCRIPTION: "Find an order", sc.ORCH_INPUT_REF: ot.content_ref({"order": 42}),
        sc.ORCH_OUTPUT_REF: ot.content_ref({"status": "shipped"})}
    chat = rec.one("chat gpt-test")
    assert chat.kind == SpanKind.CLIENT
    attributes = dict(chat.attributes or {})
    assert attributes.pop(sc.ORCH_OUTPUT_REF).startswith("sha256:")
    assert attributes == {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_REQUEST_MODEL: "gpt-test",
        sc.GEN_AI_PROVIDER_NAME: "openai", sc.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        sc.ORCH_INPUT_REF: ot.content_ref([{"role": "user", "content": "hi"}]),
        sc.GEN_AI_USAGE_INPUT_TOKENS: 3, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 1,
        sc.GEN_AI_RESPONSE_MODEL: "gpt-test-1", sc.GEN_AI_RESPONSE_ID: "r1",
        sc.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",)}
    # The tree: everything under the workflow, in the order they were started.
    parents = {s.name: s.parent.span_id if s.parent else None for s in rec.spans}
    workflow_id = rec.one("invoke_workflow support").context.span_id
    assert parents["router"] == parents["execute_tool lookup"] == parents["chat gpt-test"] == workflow_id


def test_each_telemetry_decides_its_own_content(rec: Recorder) -> None:
    """Two telemetries at once: one captures, one does not; the process settings change neither."""
    set_config(CaptureConfig(capture_content=True))  # the configured settings say capture...
    quiet, loud = rec.telemetry(NO_CAPTURE), rec.telemetry(CAPTURE)
    for telemetry, name in ((quiet, "quiet"), (loud, "loud")):
        tool = inst.start_tool(telemetry, name, arguments="the secret")
        tool.stop("the secret result")
    assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in (rec.one("execute_tool quiet").attributes or {})
    loud_attributes = rec.one("execute_tool loud").attributes or {}
    assert loud_attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] == "the secret"
    assert loud_attributes[sc.GEN_AI_TOOL_CALL_RESULT] == "the secret result"
    # ...and a telemetry without its own settings follows them, when it is used.
    follows = inst.Telemetry(rec.provider)
    assert follows.capture.capture_content is True
    set_config(CaptureConfig(capture_content=False))
    assert follows.capture.capture_content is False


@pytest.mark.parametrize(("value", "captured"), [
    ("true", True), ("span_only", True), ("span_and_event", True), ("SPAN_ONLY", True),
    ("event_only", False), ("no_content", False), ("false", False), ("", False),
])
def test_the_environment_variable_keeps_its_genai_meaning(rec: Recorder, monkeypatch: pytest.MonkeyPatch,
                                                          value: str, captured: bool) -> None:
    """``event_only`` asks for content in GenAI events only: orchestrace emits none, so spans get none."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
    set_config(None)  # read the environment again
    tool = inst.start_tool(inst.Telemetry(rec.provider), "echo", arguments="text")
    tool.stop("text")
    attributes = rec.one("execute_tool echo").attributes or {}
    assert (sc.GEN_AI_TOOL_CALL_ARGUMENTS in attributes) is captured
    assert (sc.GEN_AI_TOOL_CALL_RESULT in attributes) is captured
    assert attributes[sc.ORCH_INPUT_REF] == ot.content_ref("text")  # refs always


def test_scoped_telemetry_and_decorated_functions_inside_an_invocation(rec: Recorder) -> None:
    """An integration's spans carry its own instrumentation scope; decorated functions called inside its
    invocation report to its provider, under the SDK's scope, with its capture settings."""
    other = Recorder()
    handle = ot.configure(exporter="memory", tracer_provider=other.provider, batch=False)  # elsewhere
    try:
        @ot.tool
        def lookup(order: int) -> str:
            return f"order {order}"

        telemetry = rec.telemetry(CAPTURE).scoped("my_framework", "1.2")
        agent = inst.start_agent(telemetry, "clerk")
        token = agent.resume()
        lookup(7)
        agent.stop("done", token)
        lookup(8)  # outside: the configured telemetry
    finally:
        handle.shutdown()
    clerk, inside = rec.one("invoke_agent clerk"), rec.one("execute_tool lookup")
    assert clerk.instrumentation_scope is not None and clerk.instrumentation_scope.name == "my_framework"
    assert inside.instrumentation_scope is not None and inside.instrumentation_scope.name == "orchestrace"
    assert inside.parent is not None and inside.parent.span_id == clerk.context.span_id
    assert (inside.attributes or {})[sc.GEN_AI_TOOL_CALL_RESULT] == "order 7"  # the agent's settings
    outside = other.one("execute_tool lookup")
    assert sc.GEN_AI_TOOL_CALL_RESULT not in (outside.attributes or {})


def test_suspend_and_resume_keep_the_span_current_only_while_the_work_runs(rec: Recorder) -> None:
    telemetry = rec.telemetry()
    invocation = inst.start_workflow(telemetry, "stream")
    seen: list[bool] = []
    for _ in range(3):  # a stream's steps: current while each runs, not between them
        token = invocation.resume()
        seen.append(trace.get_current_span() is invocation.span)
        invocation.suspend(token)
        seen.append(trace.get_current_span() is invocation.span)
    token = invocation.resume()
    invocation.close(token)  # its reader left: ended without a status
    assert seen == [True, False] * 3
    assert trace.get_current_span() is trace.INVALID_SPAN
    span = rec.one("invoke_workflow stream")
    assert span.end_time is not None and span.status.status_code == StatusCode.UNSET


def test_an_interrupted_run_ends_ok_and_its_resume_links_back(rec: Recorder) -> None:
    telemetry = rec.telemetry()
    first = inst.start_workflow(telemetry, "approval")
    first.events.human_intervention("interrupt", actor="reviewer", content="approve the refund?")
    first.stop()
    link = inst.resume_link(first.span.get_span_context())
    resumed = inst.start_workflow(telemetry, "approval", links=[link])
    resumed.events.human_intervention("resume", content="yes")
    resumed.stop()
    paused, again = (s for s in rec.spans if s.name == "invoke_workflow approval")
    assert paused.status.status_code == StatusCode.OK
    assert [(link.context.span_id, dict(link.attributes or {})) for link in again.links] == [
        (paused.context.span_id, {sc.ORCH_LINK_TYPE: sc.LINK_RESUME_OF})]
    assert [dict(e.attributes or {}) for e in paused.events] == [{
        sc.ORCH_HUMAN_KIND: "interrupt", sc.ORCH_HUMAN_ACTOR: "reviewer",
        sc.ORCH_CONTENT_REF: ot.content_ref("approve the refund?")}]


def test_events_on_an_invocation(rec: Recorder) -> None:
    invocation = inst.start_agent(rec.telemetry(CAPTURE), "triage")
    events = invocation.events
    events.decide(sc.DECISION_DELEGATE, target="billing", reason="refund", options=["billing", "shipping"])
    events.delegate("billing", reason="transfer", handoff=True, sender="triage")
    events.spawn("worker", content={"task": "sum"})
    events.stop("answered", sender="triage")
    events.safety_event("guardrail", severity="high", action="blocked", source="input")
    invocation.stop()
    span = rec.one("invoke_agent triage")
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        (sc.EVENT_DECISION, {sc.ORCH_DECISION_KIND: sc.DECISION_DELEGATE, sc.ORCH_TARGET_AGENT: "billing",
                             sc.ORCH_REASON: "refund", sc.ORCH_DECISION_OPTIONS: ("billing", "shipping")}),
        (sc.EVENT_DELEGATE, {sc.ORCH_TARGET_AGENT: "billing", sc.ORCH_REASON: "transfer",
                             sc.ORCH_HANDOFF: True, sc.ORCH_FROM: "triage", sc.ORCH_TO: "billing"}),
        (sc.EVENT_SPAWN, {sc.ORCH_TARGET_AGENT: "worker",
                          sc.ORCH_CONTENT_REF: ot.content_ref({"task": "sum"}),
                          sc.ORCH_CONTENT: '{"task":"sum"}'}),
        (sc.EVENT_STOP, {sc.ORCH_REASON: "answered", sc.ORCH_FROM: "triage"}),
        (sc.EVENT_SAFETY, {sc.ORCH_SAFETY_CATEGORY: "guardrail", sc.ORCH_SAFETY_SEVERITY: "high",
                           sc.ORCH_SAFETY_ACTION: "blocked", sc.ORCH_SAFETY_SOURCE: "input"}),
    ]


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize("exc", [ValueError("bad order"), BrokenStr()])
def test_fail_records_the_error_one_way(rec: Recorder, exc: Exception) -> None:
    invocation = inst.start_tool(rec.telemetry(), "charge")
    invocation.fail(exc)
    span = rec.one("execute_tool charge")
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})[sc.ERROR_TYPE] == type(exc).__qualname__
    assert span.end_time is not None
    if isinstance(exc, ValueError):
        assert span.status.description == "ValueError: bad order"
        assert [e.name for e in span.events] == [sc.EVENT_EXCEPTION]
    else:
        assert span.status.description == "BrokenStr"


def test_an_error_reported_as_data_fails_without_an_exception(rec: Recorder) -> None:
    invocation = inst.start_tool(rec.telemetry(), "charge")
    invocation.fail_with("Error running tool", "Error running tool: card declined")
    span = rec.one("execute_tool charge")
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "Error running tool: card declined"
    assert (span.attributes or {})[sc.ERROR_TYPE] == "Error running tool"
    assert span.events == () and span.end_time is not None


def test_a_model_call_filled_at_its_end(rec: Recorder) -> None:
    """Model, request and usage known only as the call ends; usage stated apart wins over the reply's."""
    call = inst.start_model_call(rec.telemetry())
    call.set_request("gpt-late", {"temperature": 0.5, "api_key": "secret"})
    call.set_input([{"role": "user", "content": "hi"}])
    call.set_usage(inst.Usage(11, None))
    call.stop({"choices": [{"message": {"role": "assistant", "content": "hello"}}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    attributes = dict(rec.one("chat gpt-late").attributes or {})
    assert attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-late"
    assert attributes[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert attributes[sc.ORCH_INPUT_REF] == ot.content_ref([{"role": "user", "content": "hi"}])
    assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in attributes
    assert "secret" not in json.dumps(attributes)


def test_already_traced_and_as_agent(rec: Recorder) -> None:
    """An integration whose own span traces a decorated function's call: one span, not two; code under a
    span that is not an agent's can still run as an agent."""
    @ot.agent(role="writer")
    def draft(topic: str) -> str:
        frame = ot.current_agent()
        assert frame is not None
        return f"{frame.name}:{frame.id}:{topic}"

    telemetry = rec.telemetry()
    declared = inst.declared_agent([None, draft])
    assert declared is not None and (declared.name, declared.role) == ("draft", "writer")
    node = inst.start_agent(telemetry, "draft", agent_id="node-1", values=inst.already_traced(declared))
    token = node.resume()
    assert draft("a") == "draft:node-1:a"  # traced by the node's span
    assert draft("b").startswith("draft:draft-")  # the next call is traced as usual
    node.stop(None, token)
    assert sorted(s.name for s in rec.spans) == ["invoke_agent draft", "invoke_agent draft"]
    step = inst.start_step(telemetry, "router", values=inst.as_agent("router", "router-1"))
    token = step.resume()
    assert ot.current_agent() == ot.AgentFrame("router", "router-1", None)
    step.stop(None, token)
    assert inst.declared_tool([draft]) is None


def test_a_model_call_seen_through_callbacks_exports_its_history_once(rec: Recorder) -> None:
    telemetry, history = rec.telemetry(CAPTURE), inst.PromptHistory()
    workflow = inst.start_workflow(telemetry, "loop")
    prompt: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    for reply in ("two", "four"):
        call = inst.start_chat(telemetry, list(prompt), model="m", provider="p", context=workflow.context,
                               request={"temperature": 0.0}, history=history)
        call.stop({"role": "assistant", "content": reply}, usage=inst.Usage(5, 1))
        prompt += [{"role": "assistant", "content": reply}, {"role": "user", "content": "more"}]
    workflow.stop()
    first, second = (s for s in rec.spans if s.name == "chat m")
    assert first.start_time is not None and first.end_time is not None and first.start_time < first.end_time
    assert (first.attributes or {})[sc.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert (second.attributes or {})[sc.ORCH_PREFIX_SPAN_ID] == format(first.context.span_id, "016x")
    assert (second.attributes or {})[sc.ORCH_PREFIX_LENGTH] == 2  # its prompt starts with call 1's + reply
    assert (second.attributes or {})[sc.ORCH_INPUT_MESSAGE_COUNT] == 3
    assert len(json.loads(str((second.attributes or {})[sc.GEN_AI_INPUT_MESSAGES]))) == 1  # only "more"
    loop = rec.one("invoke_workflow loop")
    assert first.parent is not None and first.parent.span_id == loop.context.span_id


def test_a_failed_callback_model_call(rec: Recorder) -> None:
    call = inst.start_chat(rec.telemetry(), [{"role": "user", "content": "hi"}], model="m")
    call.fail(TimeoutError("slow"))
    span = rec.one("chat m")
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})[sc.ERROR_TYPE] == "TimeoutError"


def test_suppressed_instrumentation_records_nothing(rec: Recorder) -> None:
    token = otel_context.attach(otel_context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        invocation = inst.start_agent(rec.telemetry(), "quiet")
        assert not invocation.span.is_recording()
        invocation.events.stop("nothing")
        invocation.stop("x")
    finally:
        otel_context.detach(token)
    assert rec.spans == []


def test_an_internal_failure_starts_nothing_and_is_logged_once(rec: Recorder, monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer exploded")

    monkeypatch.setattr(inst.Telemetry, "start_span", explode)
    with caplog.at_level(logging.ERROR, logger="orchestrace"):
        for name in ("a", "b"):  # the work runs as usual, in its parent's context, untraced
            invocation = inst.start_agent(rec.telemetry(), name)
            assert not invocation.span.is_recording()
            token = invocation.resume()
            invocation.events.stop("nothing")
            invocation.stop("done", token)
    assert len([r for r in caplog.records if "start_agent" in r.getMessage()]) == 1
    assert rec.spans == []


def test_a_callback_model_call_orchestrace_failed_to_start_runs_untraced(
        rec: Recorder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def explode(self: inst.Telemetry) -> Any:
        raise RuntimeError("settings exploded")

    telemetry = rec.telemetry()
    monkeypatch.setattr(inst.Telemetry, "capture", property(explode))
    with caplog.at_level(logging.ERROR, logger="orchestrace"):
        for reply in ("a", "b"):  # never None: the integration ends it as any other call
            call = inst.start_chat(telemetry, [{"role": "user", "content": "hi"}], model="m")
            call.stop({"role": "assistant", "content": reply})
        inst.start_chat(telemetry, [{"role": "user", "content": "hi"}], model="m").fail(TimeoutError("x"))
    assert len([r for r in caplog.records if "start_chat" in r.getMessage()]) == 1
    assert rec.spans == []


def test_configure_returns_the_configured_telemetry(rec: Recorder) -> None:
    handle = ot.configure(exporter="memory", tracer_provider=rec.provider, batch=False, capture_content=True)
    try:
        assert isinstance(handle, inst.Telemetry)
        assert inst.configured() is handle and handle.capture.capture_content is True
        invocation = inst.start_tool(inst.Telemetry(), "t", arguments="x")  # Telemetry(): the configured
        invocation.stop("y")
    finally:
        handle.shutdown()
    assert (rec.one("execute_tool t").attributes or {})[sc.GEN_AI_TOOL_CALL_RESULT] == "y"
    assert inst.configured() is not handle  # shut down: the global provider again


def test_trace_dir_without_a_registered_writer_is_a_clear_error(rec: Recorder, tmp_path: Any,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """The SDK finds the in-process trace writer by entry point only; without one it says so and goes on."""
    import orchestrace.tracing as tracing

    monkeypatch.setattr(tracing, "entry_points", lambda **kwargs: ())
    with caplog.at_level(logging.ERROR, logger="orchestrace"):
        handle = ot.configure(exporter="memory", tracer_provider=rec.provider, trace_dir=tmp_path,
                              batch=False)
    try:
        assert any("trace_dir needs the collector" in r.getMessage() for r in caplog.records)
        with ot.task("still-traced"):
            pass
        assert [s.name for s in handle.get_finished_spans()] == ["invoke_workflow still-traced"]
    finally:
        handle.shutdown()
