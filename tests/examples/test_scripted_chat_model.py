"""The examples' fake chat model acts like a provider's: tool calls, usage, streaming, bound tools."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool

from examples.fakes import Reply, ScriptedChatModel, call, parallel


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_script_is_answered_in_order_with_tool_calls_and_usage() -> None:
    model = ScriptedChatModel(model_name="m", script=[call("add", a=1, b=2), "three"]).bind_tools([add])
    first = model.invoke([HumanMessage("one plus two")])
    expected = {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_m_0_0", "type": "tool_call"}
    assert first.tool_calls == [expected]
    assert first.usage_metadata is not None
    assert first.usage_metadata["input_tokens"] == 3
    second = model.invoke([HumanMessage("one plus two")])
    assert second.content == "three"
    assert second.response_metadata["finish_reason"] == "stop"
    with pytest.raises(RuntimeError, match="script has 2 replies"):
        model.invoke("again")


def test_streaming_rebuilds_the_same_message() -> None:
    script: list[Reply] = [parallel(call("add", a=1, b=2), call("add", a=3, b=4)), "the sum is 10"]
    model = ScriptedChatModel(model_name="m", script=script).bind_tools([add])
    chunks = [chunk for chunk in model.stream("add them") if isinstance(chunk, AIMessageChunk)]
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert [tc["args"] for tc in merged.tool_calls] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert merged.usage_metadata is not None and merged.usage_metadata["output_tokens"] > 0
    text = list(model.stream("and?"))
    assert len(text) > 2  # word by word
    assert "".join(str(c.content) for c in text) == "the sum is 10"


def test_a_call_to_a_tool_that_is_not_bound_fails_loudly() -> None:
    model = ScriptedChatModel(model_name="m", script=[call("multiply", a=1, b=2)]).bind_tools([add])
    with pytest.raises(ValueError, match="multiply"):
        model.invoke("times")


def test_a_function_script_answers_from_the_conversation() -> None:
    model = ScriptedChatModel(model_name="m", script=lambda messages: str(messages[-1].content).upper())
    assert [model.invoke(w).content for w in ("a", "b", "c")] == ["A", "B", "C"]
