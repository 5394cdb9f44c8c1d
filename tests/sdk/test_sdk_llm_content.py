"""Model calls (usage, messages) and content: refs, capture, truncation, redaction."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import orchestrace as ot
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from opentelemetry.trace import SpanKind
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config
from pydantic import BaseModel
from sdk_spans import Spans, configure_memory


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"usage": {"prompt_tokens": 11, "completion_tokens": 7}}, (11, 7)),
        ({"usage": {"input_tokens": 5, "output_tokens": 2}}, (5, 2)),
        (SimpleNamespace(usage=SimpleNamespace(prompt_tokens=3, completion_tokens=1)), (3, 1)),
        (AIMessage("hi", usage_metadata={"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}), (9, 4)),
        (AIMessage("hi", response_metadata={"token_usage": {"prompt_tokens": 2, "completion_tokens": 8}}),
         (2, 8)),
    ],
    ids=["openai-dict", "input-output-dict", "object-usage", "langchain-usage-metadata",
         "langchain-metadata"],
)
def test_usage_read_from_return_shapes(spans: Spans, result: Any, expected: tuple[int, int]) -> None:
    @ot.llm("gpt-test", provider="openai")
    def call(prompt: str) -> Any:
        return result

    assert call("hello") is result
    span = spans.one("chat gpt-test")
    assert span.kind == SpanKind.CLIENT
    assert span.attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert span.attributes[sc.GEN_AI_REQUEST_MODEL] == "gpt-test"
    assert span.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
    usage = (span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS])
    assert usage == expected


def test_explicit_usage_wins_and_model_from_kwargs(spans: Spans) -> None:
    @ot.llm
    def call(prompt: str, model: str) -> dict[str, Any]:
        ot.set_usage(input_tokens=100, output_tokens=50)
        return {"model": "served-model", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}

    call("q", model="requested-model")
    span = spans.one("chat requested-model")
    assert span.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 100
    assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 50
    assert span.attributes[sc.GEN_AI_RESPONSE_MODEL] == "served-model"


def test_no_usage_when_result_has_none(spans: Spans) -> None:
    @ot.llm("m")
    def call() -> str:
        return "plain text"

    call()
    assert sc.GEN_AI_USAGE_INPUT_TOKENS not in spans.one("chat m").attributes


def test_messages_captured_in_genai_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    handle = configure_memory(capture_content=True, max_content_bytes=4096)
    try:
        @ot.llm("fake")
        def chat(messages: list[Any]) -> AIMessage:
            return AIMessage("4", tool_calls=[{"name": "calc", "args": {"x": 2}, "id": "c1"}],
                             response_metadata={"finish_reason": "tool_calls"})

        chat([SystemMessage("be brief"), HumanMessage("2+2?"), {"role": "assistant", "content": "thinking"}])
        span = next(s for s in handle.get_finished_spans() if s.name == "chat fake")
        inputs = json.loads(str(span.attributes[sc.GEN_AI_INPUT_MESSAGES]))
        assert inputs == [
            {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
            {"role": "user", "parts": [{"type": "text", "content": "2+2?"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "thinking"}]},
        ]
        outputs = json.loads(str(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))
        assert outputs == [{"role": "assistant", "finish_reason": "tool_calls", "parts": [
            {"type": "text", "content": "4"},
            {"type": "tool_call", "id": "c1", "name": "calc", "arguments": {"x": 2}}]}]
    finally:
        handle.shutdown()
        set_config(None)


def test_openai_completion_output_and_env_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    handle = configure_memory()
    try:
        @ot.llm("gpt")
        def chat(prompt: str) -> dict[str, Any]:
            choice = {"message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}
            return {"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}

        chat("Capital of France?")
        span = handle.get_finished_spans()[0]
        assert json.loads(str(span.attributes[sc.GEN_AI_INPUT_MESSAGES])) == [
            {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]}]
        assert json.loads(str(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES])) == [
            {"role": "assistant", "parts": [{"type": "text", "content": "Paris"}], "finish_reason": "stop"}]
    finally:
        handle.shutdown()
        set_config(None)


def test_capture_is_truncated_and_ref_is_of_full_content(captured: Spans) -> None:
    long_text = "é" * 1000  # 2 bytes each: the 64-byte cut must fall on a character boundary

    @ot.agent
    def reader(text: str) -> str:
        return text

    reader(long_text)
    span = captured.one("invoke_agent reader")
    kept = json.loads(str(span.attributes[sc.GEN_AI_INPUT_MESSAGES]))[0]["parts"][0]["content"]
    assert kept == "é" * 32
    assert span.attributes[sc.ORCH_CONTENT_TRUNCATED] is True
    assert span.attributes[sc.ORCH_INPUT_REF] == "sha256:" + hashlib.sha256(long_text.encode()).hexdigest()


def test_redaction_hook_runs_before_content_leaves() -> None:
    handle = configure_memory(capture_content=True, redact=lambda text: text.replace("s3cret", "[REDACTED]"))
    try:
        @ot.tool
        def login(password: str) -> str:
            return f"logged in with {password}"

        login("s3cret")
        ot.configure(capture_content=True)  # a later call keeps the hook
        login("s3cret")
        for span in handle.get_finished_spans():
            attributes = json.dumps(dict(span.attributes))
            assert "s3cret" not in attributes
            assert span.attributes[sc.GEN_AI_TOOL_CALL_RESULT] == "logged in with [REDACTED]"
    finally:
        handle.shutdown()
        set_config(None)


def test_broken_redaction_hook_captures_nothing_and_does_not_raise() -> None:
    def broken(text: str) -> str:
        raise RuntimeError("hook bug")

    handle = configure_memory(capture_content=True, redact=broken)
    try:
        @ot.tool
        def echo(x: str) -> str:
            return x

        assert echo("secret") == "secret"
        span = handle.get_finished_spans()[0]
        assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in span.attributes
        assert span.attributes[sc.ORCH_INPUT_REF] == ot.content_ref({"x": "secret"})
    finally:
        handle.shutdown()
        set_config(None)


class Note(BaseModel):
    title: str
    tags: list[str]


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_content_ref_is_canonical() -> None:
    assert ot.content_ref("abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert ot.content_ref(b"abc") == ot.content_ref("abc")
    assert ot.content_ref({"a": 1, "b": [1, 2]}) == ot.content_ref({"b": [1, 2], "a": 1})
    assert ot.content_ref({"a": 1}) == "sha256:" + hashlib.sha256(b'{"a":1}').hexdigest()
    assert ot.content_ref(Note(title="t", tags=["x"])) == ot.content_ref({"tags": ["x"], "title": "t"})
    assert ot.content_ref(Point(1, 2)) == ot.content_ref({"x": 1, "y": 2})
    assert ot.content_ref({1: "a", "b": 2}) == ot.content_ref({1: "a", "b": 2})  # unsortable keys
    circular: list[Any] = []
    circular.append(circular)
    assert ot.content_ref(circular).startswith("sha256:")
    assert ot.content_ref("a") != ot.content_ref("b")


def test_capture_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("ORCHESTRACE_MAX_CONTENT_BYTES", "128")
    config = CaptureConfig.from_env()
    assert config.capture_content is True and config.max_content_bytes == 128
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    monkeypatch.setenv("ORCHESTRACE_MAX_CONTENT_BYTES", "lots")
    config = CaptureConfig.from_env()
    assert config.capture_content is False and config.max_content_bytes == 1 << 20  # fits real agent prompts
    assert CaptureConfig.from_env(capture_content=True).capture_content is True


def test_a_size_limit_that_is_not_a_size_is_ignored_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """OTel's rule for a value out of range: logged and treated as not set, never a meaning of its own (a
    negative limit cut every text by one byte). Arguments and the environment alike; the type refuses it."""
    monkeypatch.setenv("ORCHESTRACE_MAX_CONTENT_BYTES", "-5")
    assert CaptureConfig.from_env().max_content_bytes == 1 << 20
    monkeypatch.setenv("ORCHESTRACE_MAX_CONTENT_BYTES", "32")
    assert CaptureConfig.from_env(max_content_bytes=-1).max_content_bytes == 32  # the environment's, then
    with pytest.raises(ValueError, match="non-negative"):
        CaptureConfig(max_content_bytes=-1)
    monkeypatch.delenv("ORCHESTRACE_MAX_CONTENT_BYTES")
    handle = configure_memory(capture_content=True, max_content_bytes=-1)
    try:
        @ot.tool
        def echo(text: str) -> str:
            return text

        echo("hello")
        ot.configure(max_content_bytes=4)
        ot.configure(max_content_bytes=-1)  # keeps 4
        echo("hello")
        first, second = handle.get_finished_spans()
        assert first.attributes[sc.GEN_AI_TOOL_CALL_RESULT] == "hello"
        assert sc.ORCH_CONTENT_TRUNCATED not in first.attributes
        assert second.attributes[sc.GEN_AI_TOOL_CALL_RESULT] == "hell"
    finally:
        handle.shutdown()
        set_config(None)
    ignored = [r.getMessage().removeprefix("orchestrace: ignoring ") for r in caplog.records
               if "not a non-negative integer" in r.getMessage()]
    assert ignored == ["ORCHESTRACE_MAX_CONTENT_BYTES='-5' (not a non-negative integer)",
                       *["max_content_bytes=-1 (not a non-negative integer)"] * 3]


def test_streamed_reply_is_hashed_and_captured_as_one_text(captured: Spans) -> None:
    @ot.llm("streamer")
    def stream(prompt: str) -> Iterator[Any]:
        yield "Hel"
        yield {"choices": [{"delta": {"content": "lo "}}]}
        yield AIMessageChunk(content="world")
        yield {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3}}

    assert len(list(stream("hi"))) == 4
    span = captured.one("chat streamer")
    assert span.attributes[sc.ORCH_OUTPUT_REF] == ot.content_ref("Hello world")
    assert json.loads(str(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello world"}], "finish_reason": "stop"}]
    assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert sc.ORCH_CONTENT_TRUNCATED not in span.attributes


def test_long_stream_keeps_only_the_limit(captured: Spans) -> None:
    @ot.llm("streamer")
    def stream() -> Iterator[str]:
        for _ in range(100):
            yield "abcdefghij"

    list(stream())
    span = captured.one("chat streamer")
    assert span.attributes[sc.ORCH_OUTPUT_REF] == ot.content_ref("abcdefghij" * 100)
    text = json.loads(str(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))[0]["parts"][0]["content"]
    assert text == ("abcdefghij" * 7)[:64]
    assert span.attributes[sc.ORCH_CONTENT_TRUNCATED] is True
