"""The output schema is written once, by the models (``model.py``): the converter's fast writer (its records
written with orjson, ``convert/written.py``) writes exactly what the models declare.

For every line the fast path writes (each OTel trace of every golden span dump, and episodes made to carry
every field), pydantic must write the same bytes after validating the line with the model: every field is
one the model declares, of a type it accepts, in its declaration order and its number format. And over all
of them, every field the models declare is written at least once. So a field added to the models and not to
the records, or to the records and not to the models, fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from convert_support import GOLDEN, Spans, event, traces_of
from orchestrace import semconv as sc
from orchestrace_collector.convert import Episode, convert_episode
from orchestrace_collector.decode import decode_file
from orchestrace_collector.model import (
    REVISION,
    Costs,
    Edge,
    Event,
    Message,
    ToolCall,
    ToolCallFunction,
    ToolDefinition,
    Trace,
    Turn,
)
from orchestrace_collector.output_limit import DEFAULT_MAX_BYTES
from orchestrace_collector.spans import STATUS_ERROR, Span
from pydantic import BaseModel
from test_convert_written import rich_episode

#: The models of the written records (a trace line's and a turn line's, and the records inside them).
RECORDS: tuple[type[BaseModel], ...] = (
    Trace, Costs, Event, Edge, Turn, Message, ToolCall, ToolCallFunction, ToolDefinition,
)


def every_field() -> list[Span]:
    """An episode whose records carry the fields no golden dump has: a decision with options and a label,
    a safety finding's severity and source, failed tools and model calls, an orphan (incomplete), tool
    answers with names, a cut stream, completion token ids, a policy version, a prompt whose stored prefix is
    missing (prompt_incomplete), a lead that handed work out (waits), a model call and a tool that ran
    beside it (concurrent)."""
    s = Spans("cd" * 16)
    root = s.workflow("team", 0, 10, **{sc.ORCH_TASK_ID: "task"})
    lead = s.agent("lead", 0.5, 9, root, role="orchestrator", **{sc.GEN_AI_AGENT_ID: "lead-1",
                                                                   sc.ORCH_WAITS: ()}, events=[
        event(sc.EVENT_DECISION, 1.0, **{sc.ORCH_DECISION_KIND: "route",
                                         sc.ORCH_DECISION_OPTIONS: ("a", "b")}),
        event(sc.EVENT_SAFETY, 1.5, **{sc.ORCH_SAFETY_SEVERITY: "high", sc.ORCH_SAFETY_SOURCE: "c1"}),
    ])
    answers = [{"type": "tool_call_response", "id": f"c{i}", "response": "ok", "name": "lookup"}
               for i in (1, 2)]
    reply = [{"role": "assistant", "parts": [{"type": "text", "content": "x"}], "finish_reason": "stop"}]
    s.chat(2, 3, lead, **{
        sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "parts": answers}]),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(reply),
        sc.ORCH_COMPLETION_TOKEN_IDS: (4, 5), sc.ORCH_POLICY_VERSION: "v3",
        sc.ORCH_COMPLETION_INCOMPLETE: True,
        sc.ORCH_PREFIX_SPAN_ID: "f" * 16, sc.ORCH_PREFIX_LENGTH: 2, sc.ORCH_CONCURRENT: True,
    })
    s.chat(3.5, 4, lead, **{sc.ERROR_TYPE: "Timeout"}).status_code = STATUS_ERROR
    s.tool("lookup", 4.5, 5, lead,
           **{sc.ERROR_TYPE: "ValueError", sc.ORCH_CONCURRENT: True}).status_code = STATUS_ERROR
    s.tool("lost", 6, 7, root).parent_span_id = "e" * 16
    return s.spans


def episodes() -> Iterator[tuple[str, Episode]]:
    for path in sorted(GOLDEN.glob("*.jsonl")):
        for number, spans in enumerate(traces_of(decode_file(path))):
            try:
                yield f"{path.stem}#{number}", convert_episode(spans)
            except ValueError:
                continue  # a trace of no event (a fragment another trace of the dump belongs to)
    yield "rich_episode", convert_episode(rich_episode())
    yield "every_field", convert_episode(every_field())


@pytest.fixture(scope="module")
def written() -> dict[str, tuple[bytes, list[bytes]]]:
    """Each episode's lines, as the fast path writes them (revision 3)."""
    lines: dict[str, tuple[bytes, list[bytes]]] = {}
    for name, episode in episodes():
        fast = episode.record_lines(3, DEFAULT_MAX_BYTES)
        assert fast is not None, f"{name} is not written by the fast path: nothing compared"
        lines[name] = fast
    assert len(lines) > 20
    return lines


def test_each_line_is_what_the_model_writes_after_validating_it(
        written: dict[str, tuple[bytes, list[bytes]]]) -> None:
    suffix = b',"%s":3}\n' % REVISION.encode()
    for name, (trace_line, turn_lines) in written.items():
        trace = Trace.model_validate_json(trace_line)  # extra="forbid": no field the model lacks
        assert trace.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n" == trace_line, name
        for line in turn_lines:
            assert line.endswith(suffix), name
            turn = Turn.model_validate_json(line)
            assert turn.model_dump_json(exclude_none=True).encode()[:-1] + suffix == line, name


def test_the_records_hold_the_models_fields_in_their_order_and_every_one_of_them(
        written: dict[str, tuple[bytes, list[bytes]]]) -> None:
    """The structural half, which also sees what validation ignores (an extra event or turn field: their
    models allow them) and what no line shows (a model field no record ever writes)."""
    seen: dict[type[BaseModel], set[str]] = {model: set() for model in RECORDS}

    def record(model: type[BaseModel], fields: dict[str, Any], where: str) -> None:
        declared = [field.alias or name for name, field in model.model_fields.items()]
        keys = list(fields)
        assert set(keys) <= set(declared), f"{where}: {model.__name__} lacks {set(keys) - set(declared)}"
        assert keys == [key for key in declared if key in fields], f"{where}: not in {model.__name__}'s order"
        seen[model].update(keys)

    for name, (trace_line, turn_lines) in written.items():
        trace = json.loads(trace_line)
        record(Trace, trace, name)
        record(Costs, trace["costs"], name)
        for item in trace["events"]:
            record(Event, item, name)
        for item in trace["edges"]:
            record(Edge, item, name)
        for line in turn_lines:
            turn = json.loads(line)
            assert list(turn)[-1] == REVISION and turn.pop(REVISION) == 3  # the writer's, after the model's
            record(Turn, turn, name)
            for message in (*turn.get("prompt", ()), *turn.get("completion", ())):
                record(Message, message, name)
                for call in message.get("tool_calls", ()):
                    record(ToolCall, call, name)
                    record(ToolCallFunction, call["function"], name)
            for tool in turn.get("tools", ()):
                record(ToolDefinition, tool, name)
    never = {model.__name__: sorted({f.alias or n for n, f in model.model_fields.items()} - seen[model])
             for model in RECORDS}
    assert never == {model.__name__: [] for model in RECORDS}, f"declared, never written: {never}"
