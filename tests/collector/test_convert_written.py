"""The converter's records are written (orjson) exactly as pydantic writes the models made from them.

An episode is written from its records unless something asked for its models (a reward hook, an annotation,
``convert_spans``); both ways must give the same bytes, for every kind of value a span can carry, and a value
orjson refuses must go the models' way (written, or refused, by pydantic as before).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from convert_support import Spans, event
from orchestrace import semconv as sc
from orchestrace_collector.convert import Episode, convert_episode
from orchestrace_collector.output import TraceDirWriter, episode_lines
from orchestrace_collector.output_limit import DEFAULT_MAX_BYTES as MAX_BYTES
from orchestrace_collector.output_limit import ID_CHARS, may_cut
from orchestrace_collector.spans import Span
from pydantic_core import PydanticSerializationError
from test_convert_fuzz import mutated_runs

_TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Find it.",
                                             "parameters": {"type": "object", "required": [None, 1.5]}}}]


def rich_episode(**chat_attrs: Any) -> list[Span]:
    """Two agents, tools (one untrusted, with content), a message, a stop, rewards, and a model call with
    captured content, tool calls, offered tools, sampling parameters, token ids and a cut prompt."""
    s = Spans()
    root = s.workflow("team", 0, 10, **{sc.ORCH_TASK_ID: "task-é"})
    lead = s.agent("lead", 0.5, 9, root, role="orchestrator",
                   events=[event(sc.EVENT_MESSAGE, 1.0, **{sc.ORCH_TO: "worker", sc.ORCH_CONTENT: "go"}),
                           event(sc.EVENT_STOP, 8.5, **{sc.ORCH_REASON: "done"})])
    worker = s.agent("worker", 2, 7, lead)
    messages_in = [{"role": "user", "parts": [{"type": "text", "content": "Où? \u2603 \"quoted\" \\"}]}]
    messages_out = [{"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "reasoning", "content": "think"},
        {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": "x", "n": [1, 2.5, None]}}]}]
    s.chat(2.1, 2.9, worker, **{
        sc.GEN_AI_INPUT_MESSAGES: json.dumps(messages_in),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(messages_out),
        sc.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": "be brief"}]),
        sc.GEN_AI_TOOL_DEFINITIONS: json.dumps(_TOOLS),
        sc.GEN_AI_PROVIDER_NAME: "vllm",
        "gen_ai.request.temperature": 0.7,
        "gen_ai.request.stop_sequences": ("a", "b"),
        "orchestrace.request.seed": 3,
        sc.GEN_AI_RESPONSE_ID: "r1",
        sc.ORCH_PROMPT_TOKEN_IDS: (1, 2, 3),
        sc.ORCH_COMPLETION_LOGPROBS: (-0.25, -1e-7),
        sc.ORCH_INPUT_CUT_BYTES: 12,
        **chat_attrs,
    })
    s.tool("lookup", 3, 4, worker, **{sc.GEN_AI_TOOL_CALL_ID: "c1", sc.GEN_AI_TOOL_CALL_RESULT: "found",
                                      sc.GEN_AI_TOOL_CALL_ARGUMENTS: '{"q":"x"}'})
    s.chat(4.5, 5, worker, tokens=(7, 0))
    worker.events = (event(sc.EVENT_EVALUATION_RESULT, 6.5, **{sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.25,
                                                               sc.ORCH_REWARD_UNIT: "agent"}),)
    root.events = (event(sc.EVENT_EVALUATION_RESULT, 9.5, **{sc.GEN_AI_EVALUATION_SCORE_VALUE: 1,
                                                             sc.GEN_AI_EVALUATION_NAME: "tests"}),)
    return s.spans


def both_ways(spans: list[Span]) -> tuple[Episode, Episode]:
    """The episode twice: written from its records, and from its models."""
    from_models = convert_episode(spans)
    assert from_models.trace is not None and from_models.turns is not None  # made now
    return convert_episode(spans), from_models


def test_records_are_written_as_pydantic_writes_the_models() -> None:
    fast, slow = both_ways(rich_episode())
    lines = episode_lines(fast, 2, MAX_BYTES)
    assert lines == episode_lines(slow, 2, MAX_BYTES)
    trace_line, turn_lines = lines
    trace = json.loads(trace_line)
    assert trace["metrics"]["revision"] == 2 and trace["task_id"] == "task-é"
    assert any("from" in e for e in trace["events"])  # the alias
    first = json.loads(turn_lines[0])
    assert list(first["completion"][0]) == ["role", "content", "tool_calls", "reasoning_content"]
    arguments = {"q": "x", "n": [1, 2.5, None]}
    assert first["completion"][0]["tool_calls"][0] == {
        "id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    assert first["tools"] == _TOOLS and first["request"] == {"temperature": 0.7, "stop_sequences": ["a", "b"],
                                                              "seed": 3}
    assert first["truncated"] == {"prompt": 12} and first["revision"] == 2


@pytest.mark.parametrize("value", [b"\x00bytes", 2**70, {1: "int key"}])
def test_a_value_orjson_refuses_is_written_by_pydantic(value: object) -> None:
    fast, slow = both_ways(rich_episode(**{"orchestrace.request.odd": value}))
    assert episode_lines(fast, 0, MAX_BYTES) == episode_lines(slow, 0, MAX_BYTES)
    assert "odd" in json.loads(episode_lines(fast, 0, MAX_BYTES)[1][0])["request"]


def test_a_value_neither_can_write_fails_the_same_way() -> None:
    fast, slow = both_ways(rich_episode(**{"orchestrace.request.text": "lone \ud800 surrogate"}))
    for episode in (fast, slow):
        with pytest.raises(PydanticSerializationError):
            episode_lines(episode, 0, MAX_BYTES)


def long_agent_name() -> list[Span]:
    spans = rich_episode()
    spans[1].attributes = {**spans[1].attributes, sc.GEN_AI_AGENT_NAME: "lead-" + "x" * ID_CHARS}
    return spans


def long_model_name() -> list[Span]:  # an identifier only turns have
    return rich_episode(**{sc.GEN_AI_RESPONSE_MODEL: "m" * (ID_CHARS + 1)})


def long_reward_name() -> list[Span]:  # in the trace's rewards and the turns' credit
    spans = rich_episode()
    spans[0].events = (event(sc.EVENT_EVALUATION_RESULT, 9.5, **{sc.GEN_AI_EVALUATION_SCORE_VALUE: 1,
                                                                 sc.GEN_AI_EVALUATION_NAME: "n" * 300}),)
    return spans


def long_system_name() -> list[Span]:  # an identifier only the trace has
    spans = rich_episode()
    spans[0].attributes = {**spans[0].attributes, sc.ORCH_SYSTEM: "x" * 300}
    return spans


@pytest.mark.parametrize("budget", [MAX_BYTES, 4000])
@pytest.mark.parametrize("build", [long_agent_name, long_model_name, long_reward_name, long_system_name])
def test_what_the_amplification_limit_cuts_is_cut_alike(build: Callable[[], list[Span]], budget: int) -> None:
    """A name over the identifier limit, or a budget the episode does not fit: the limit applies (on the
    models), the same whichever way the episode came."""
    fast, slow = both_ways(build())
    trace_line, turn_lines = episode_lines(fast, 0, budget)
    assert (trace_line, turn_lines) == episode_lines(slow, 0, budget)
    trace = json.loads(trace_line)
    assert trace["metrics"]["truncated"] >= 1
    written = [trace_line, *turn_lines]
    assert not any(("x" * ID_CHARS).encode() in line or ("m" * ID_CHARS).encode() in line for line in written)
    assert all(len(part) <= ID_CHARS for key in trace["rewards"] for part in key.split(":"))  # cut by part
    first_turn = json.loads(turn_lines[0])
    if budget < MAX_BYTES:  # the messages were cut too (the span's own cut of the prompt, 12 bytes, counts)
        assert first_turn["truncated"]["prompt"] > 12 and "completion" in first_turn["truncated"]
    else:
        assert first_turn["truncated"] == {"prompt": 12}


_EVENT_IDENTIFIERS = ("agent", "role", "from", "to", "tool", "agent_id", "label", "error_type")
_TURN_IDENTIFIERS = ("trace_id", "task_id", "agent", "agent_id", "model", "provider", "response_model",
                     "finish_reason", "error_type")


def written_records() -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The trace and turns of the rich episode as its lines hold them, and their size in bytes."""
    trace_line, turn_lines = episode_lines(convert_episode(rich_episode()), 0, MAX_BYTES)
    size = len(trace_line) + sum(map(len, turn_lines))
    return json.loads(trace_line), [json.loads(t) for t in turn_lines], size


@pytest.mark.parametrize("where", [
    *(f"event.{name}" for name in _EVENT_IDENTIFIERS), "event.options",
    *(f"turn.{name}" for name in _TURN_IDENTIFIERS), "turn.credit",
])
def test_a_long_identifier_anywhere_sends_the_episode_to_the_limit(where: str) -> None:
    """``may_cut`` says an episode may be cut when any identifier a record holds is over the limit (each
    event's and turn's fields, a decision's options, a turn's credit keys), and not for long texts that are
    no identifier (a reason, a message's content)."""
    trace, turns, size = written_records()
    assert not may_cut(trace, turns, size)
    trace["events"][-1]["reason"] = "r" * 1000
    turns[0]["prompt"][0]["content"] = "c" * 1000
    assert not may_cut(trace, turns, size)
    record, name = where.split(".")
    fields = trace["events"][0] if record == "event" else turns[-1]
    long = "x" * (ID_CHARS + 1)
    fields[name] = [long] if name == "options" else {long: 1.0} if name == "credit" else long
    assert may_cut(trace, turns, size)


def test_what_a_hook_changes_on_the_models_is_what_is_written(tmp_path: Path) -> None:
    episode = convert_episode(rich_episode())
    episode.metrics["spans"] = 12.0  # before the models exist: kept when they are made
    episode.trace.rewards["late"] = 0.5
    episode.trace_id = "renamed"
    episode.turns = episode.turns[:1]
    writer = TraceDirWriter(tmp_path)
    writer.write_episode(episode, revision=1)
    writer.close()
    (trace_line,) = (tmp_path / "traces-00000.jsonl").read_text().splitlines()
    trace = json.loads(trace_line)
    assert trace["trace_id"] == "renamed" and trace["rewards"]["late"] == 0.5
    assert trace["metrics"]["spans"] == 12 and trace["metrics"]["revision"] == 1
    assert len((tmp_path / "turns-00000.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("seed", range(2))
def test_mutated_runs_are_written_alike_both_ways(seed: int) -> None:
    compared = 0
    for traces in mutated_runs(random.Random(1000 + seed), 40):
        for group in traces or ():
            try:
                fast, slow = both_ways(group)
            except ValueError:
                continue  # no event: nothing to write
            assert outcome(fast) == outcome(slow)
            compared += 1
    assert compared > 20


def outcome(episode: Episode) -> object:
    """The episode's lines, or the error writing it raised (bytes that are not UTF-8 fail either way)."""
    try:
        return episode_lines(episode, 0, MAX_BYTES)
    except PydanticSerializationError as error:
        return str(error)
