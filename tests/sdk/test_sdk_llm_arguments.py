"""``@ot.llm`` arguments bound by signature (messages, sampling parameters, tools), no silent truncation,
and generators' results: read back from the written turns and traces."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orchestrace as ot
from langchain_core.tools import tool as langchain_tool
from orchestrace.config import DEFAULT_MAX_CONTENT_BYTES
from orchestrace.content import content_ref
from orchestrace_collector.output import latest_traces, read_content
from written_turns import record_turns

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
REPLY = {"choices": [{"message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}]}
ANSWER = [{"role": "assistant", "content": "4"}]


def test_messages_found_by_name_position_or_decorator(tmp_path: Path) -> None:
    @ot.llm("m")
    def positional(messages: list[Any], temperature: float) -> Any:
        return REPLY

    @ot.llm("m")
    def named_prompt(model: str, prompt: list[Any], **options: Any) -> Any:
        return REPLY

    @ot.llm("m", messages="history")
    def chosen(system: str, history: list[Any]) -> Any:
        return REPLY

    @ot.llm("m")
    def anything(*args: Any, **kwargs: Any) -> Any:
        return REPLY

    class Client:
        @ot.llm("m")
        def chat(self, contents: list[Any], temperature: float = 0.0) -> Any:
            return REPLY

    def calls() -> None:
        positional(MESSAGES, 0.2)
        named_prompt("m", prompt=MESSAGES, top_p=0.5)
        chosen("ignored system text", MESSAGES)
        anything(MESSAGES, 0.9, temperature=0.3)
        Client().chat(MESSAGES, temperature=0.4)

    turns = record_turns(tmp_path, calls)
    assert [t["prompt"] for t in turns] == [MESSAGES] * 5
    assert [t["completion"] for t in turns] == [ANSWER] * 5
    assert [t.get("request") for t in turns] == [
        {"temperature": 0.2},
        {"top_p": 0.5},
        None,
        {"temperature": 0.3},
        {"temperature": 0.4},
    ]


def test_sampling_parameters_and_tools_reach_the_turn(tmp_path: Path) -> None:
    @langchain_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    openai_tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    anthropic_tool = {
        "name": "lookup",
        "description": "Look a word up",
        "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}},
    }

    @ot.llm("m")
    def chat(messages: list[Any], *, tools: list[Any], api_key: str, **sampling: Any) -> Any:
        return REPLY

    turns = record_turns(
        tmp_path,
        lambda: chat(
            MESSAGES,
            tools=[openai_tool, anthropic_tool, add],
            api_key="sk-not-recorded",
            temperature=0.2,
            max_tokens=64,
            seed=7,
            stop="END",
            extra_body={"top_k": 20, "repetition_penalty": 1.1},
        ),
    )
    (turn,) = turns
    assert turn["request"] == {
        "temperature": 0.2,
        "max_tokens": 64,
        "seed": 7,
        "stop_sequences": ["END"],
        "top_k": 20,
        "repetition_penalty": 1.1,
    }
    assert turn["tools"] == [
        openai_tool,
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look a word up",
                "parameters": anthropic_tool["input_schema"],
            },
        },
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two integers.",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
            },
        },
    ]
    # Every file, the collector's binary write-ahead log too: the key must be nowhere on disk.
    written = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not any(b"sk-not-recorded" in data for data in written)


def test_long_prompt_and_completion_are_kept_whole(tmp_path: Path) -> None:
    """A 7-message, 27 KB prompt and a 20,000-character completion: nothing cut under the default limit."""
    assert DEFAULT_MAX_CONTENT_BYTES >= 1 << 20
    prompt = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}" + "é" * 1900 + "x" * 100}
        for i in range(7)
    ]
    completion = "z" * 20_000

    @ot.llm("m")
    def chat(messages: list[Any]) -> str:
        return completion

    (turn,) = record_turns(tmp_path, lambda: chat(prompt))
    assert sum(len(m["content"].encode()) for m in prompt) > 27_000
    assert turn["prompt"] == prompt
    assert turn["completion"] == [{"role": "assistant", "content": completion}]
    assert "truncated" not in turn


def test_a_cut_above_the_limit_is_flagged_with_its_size(tmp_path: Path) -> None:
    limit = 4096
    prompt = [{"role": "user", "content": str(i) * 3000} for i in range(3)]  # 9000 bytes of text

    @ot.llm("m")
    def chat(messages: list[Any]) -> str:
        return "y" * 5000

    @ot.llm("m")
    def stream(messages: list[Any]) -> Iterator[str]:
        yield from ["w" * 3000, "w" * 3000]

    turns = record_turns(tmp_path, lambda: (chat(prompt), list(stream(prompt[:1]))), max_content_bytes=limit)
    assert turns[0]["truncated"] == {"prompt": 9000 - limit, "completion": 5000 - limit}
    assert "".join(m["content"] for m in turns[0]["prompt"]) == ("0" * 3000 + "1" * 3000)[:limit]
    assert turns[1]["truncated"] == {"completion": 6000 - limit}
    assert turns[1]["completion"][0]["content"] == "w" * limit
    # The refs are those of the whole content; the cut text is stored under its own hash, mapped from them.
    assert turns[1]["output_ref"] == content_ref("w" * 6000)
    stored = read_content(tmp_path, turns[1]["output_ref"])
    assert stored is not None and "w" * limit in stored and "w" * (limit + 1) not in stored


# --- generators --------------------------------------------------------------------------------------------


@ot.tool
def words(text: str) -> Iterator[str]:
    yield from text.split()


@ot.tool
async def rows(n: int) -> AsyncIterator[dict[str, int]]:
    for i in range(n):
        yield {"row": i}


@ot.agent
def reader(text: str) -> Iterator[str]:
    yield from (w.upper() for w in words(text))


def test_generators_record_what_they_yielded(tmp_path: Path) -> None:
    async def collect_rows() -> list[dict[str, int]]:
        return [r async for r in rows(2)]

    def run() -> None:
        assert list(reader("a b c")) == ["A", "B", "C"]
        assert asyncio.run(collect_rows()) == [{"row": 0}, {"row": 1}]
        partial = words("x y z")
        next(partial)
        partial.close()  # abandoned: what it yielded so far

    record_turns(tmp_path, run)
    (trace,) = latest_traces([tmp_path]).values()
    results = [e for e in trace["events"] if e["type"] == "tool_result"]
    refs = [e.get("content_ref") for e in results]
    # A tool's items stay items; an agent's streamed text is one text.
    assert refs == [content_ref(["a", "b", "c"]), content_ref([{"row": 0}, {"row": 1}]), content_ref(["x"])]
    assert [read_content(tmp_path, ref) for ref in refs] == ['["a","b","c"]', '[{"row":0},{"row":1}]',
                                                             '["x"]']
    returns = [e for e in trace["events"] if e["type"] == "return" and e["agent"] == "reader"]
    assert [e["content_ref"] for e in returns] == [content_ref("ABC")]
