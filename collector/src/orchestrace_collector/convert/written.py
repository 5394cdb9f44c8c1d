"""The converted episode as it is written: plain records, and the pydantic models made from them on demand.

The conversion builds the trace and its turns as JSON-ready dicts (``TraceRecord``, ``TurnRecord``): the
fields of ``model.Trace`` / ``model.Turn`` in declaration order, ``None`` values left out, aliases applied
(``from``). Writing them with orjson gives the bytes ``model_dump_json(by_alias=True, exclude_none=True)``
gives for the models (orjson and pydantic's serializer format floats alike; tests check it), at a fraction of
the cost of building and serializing the models. The models (``Episode.trace``, ``Episode.turns``) are the
public face: they are made from the records the first time something asks for them (a reward hook, an
annotation, ``convert_spans``), and from then on they are the episode and are written with pydantic.

A value orjson does not take (an integer beyond 64 bits, bytes, a lone surrogate) sends that episode to the
models: pydantic writes it, or refuses it, exactly as it would have without this fast path. So does an
episode the amplification limit (``output_limit``) might cut: the limit works on the models, applied by the
writer (``output.episode_lines``) alone.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ..model import REVISION, Costs, Edge, Event, Message, ToolDefinition, Trace, Turn, json_metrics
from ..output_limit import may_cut, may_exceed
from .construct import Constructor

#: A written trace / turn / chat message, as the dict its JSON line holds.
TraceRecord = dict[str, Any]
TurnRecord = dict[str, Any]
MessageRecord = dict[str, Any]

_new_event = Constructor(Event)
_new_edge = Constructor(Edge)
_new_turn = Constructor(Turn)
_new_message = Constructor(Message)
_NEWLINE: Final = orjson.OPT_APPEND_NEWLINE


class Episode:
    """One episode's trace, its turns (one per model call, in start order) and captured contents (content
    ref -> captured text)."""

    __slots__ = ("_trace", "_trace_record", "_turn_records", "_turns", "contents")

    def __init__(self, trace: TraceRecord, turns: list[TurnRecord], contents: dict[str, str]) -> None:
        self._trace_record: TraceRecord | None = trace
        self._turn_records: list[TurnRecord] | None = turns
        self._trace: Trace | None = None
        self._turns: list[Turn] | None = None
        self.contents = contents

    @property
    def trace(self) -> Trace:
        if self._trace is None:
            assert self._trace_record is not None
            self._trace = _trace_model(self._trace_record)
            self._trace_record = None
        return self._trace

    @trace.setter
    def trace(self, trace: Trace) -> None:
        self._trace, self._trace_record = trace, None

    @property
    def turns(self) -> list[Turn]:
        if self._turns is None:
            assert self._turn_records is not None
            shared: dict[int, Message] = {}
            self._turns = [_turn_model(t, shared) for t in self._turn_records]
            self._turn_records = None
        return self._turns

    @turns.setter
    def turns(self, turns: list[Turn]) -> None:
        self._turns, self._turn_records = list(turns), None

    @property
    def trace_id(self) -> str:
        return self.trace.trace_id if self._trace_record is None else str(self._trace_record["trace_id"])

    @trace_id.setter
    def trace_id(self, trace_id: str) -> None:
        if self._trace_record is None:
            self.trace.trace_id = trace_id
        else:
            self._trace_record["trace_id"] = trace_id

    @property
    def task_id(self) -> str:
        return self.trace.task_id if self._trace_record is None else str(self._trace_record["task_id"])

    @task_id.setter
    def task_id(self, task_id: str) -> None:
        """The task of the trace and of its turns."""
        records = (self._trace_record, *(self._turn_records or ()))
        models = (self._trace, *(self._turns or ()))
        for record in records:
            if record is not None:
                record["task_id"] = task_id
        for model in models:
            if model is not None:
                model.task_id = task_id

    @property
    def metrics(self) -> dict[str, float]:
        """The trace's metrics (the same dict as ``trace.metrics``), without making the trace's model."""
        metrics: dict[str, float] = (
            self.trace.metrics if self._trace_record is None else self._trace_record["metrics"]
        )
        return metrics

    def record_lines(self, revision: int, max_trace_bytes: int) -> tuple[bytes, list[bytes]] | None:
        """The lines of the trace and of its turns as revision ``revision`` (set in the trace's metrics, and
        the last field of each turn), written from the records; ``None`` when the models were made, or when
        the records hold a value orjson does not take or something the amplification limit (``output_limit``,
        with ``max_trace_bytes``) might cut: the writer then writes the models (``output.episode_lines``)."""
        trace, turns = self._trace_record, self._turn_records
        if trace is None or turns is None:
            return None
        if may_exceed(turns, max_trace_bytes):
            return None  # not serialized whole first: a long conversation's turns may be gigabytes
        metrics = json_metrics({**trace["metrics"], REVISION: revision})
        suffix = b',"%s":%d}\n' % (REVISION.encode(), revision)
        try:
            trace_line = orjson.dumps({**trace, "metrics": metrics}, option=_NEWLINE)
            turn_lines = [orjson.dumps(t)[:-1] + suffix for t in turns]
        except TypeError:
            return None  # see the module docstring
        size = len(trace_line) + sum(map(len, turn_lines))
        if may_cut(trace, turns, size, max_trace_bytes):
            return None
        trace["metrics"][REVISION] = float(revision)
        return trace_line, turn_lines


# --- records -> models --------------------------------------------------------------------------------------


def _trace_model(record: TraceRecord) -> Trace:
    costs = record["costs"]
    return Trace.model_construct(
        trace_id=record["trace_id"],
        task_id=record["task_id"],
        system=record.get("system"),
        topology=record.get("topology"),
        events=[_event_model(e) for e in record["events"]],
        edges=[_new_edge.complete(dict(e)) for e in record["edges"]],
        rewards=record["rewards"],
        costs=Costs.model_construct(**costs),
        metrics=record["metrics"],
    )


def _event_model(record: dict[str, Any]) -> Event:
    fields = _new_event.defaults.copy()  # every field, in declaration order
    for key, value in record.items():
        fields["from_" if key == "from" else key] = value
    return _new_event.complete(fields)


def _turn_model(record: TurnRecord, shared: dict[int, Message]) -> Turn:
    """``shared``: the models of the message records seen so far, by identity. A history stored once is one
    record in every prompt that holds it, and stays one model (no cut changes a message in place): the
    turns of a long conversation hold references to their messages, not copies."""
    fields = dict(record)
    for key in ("prompt", "completion"):
        if key in fields:
            models = []
            for message in fields[key]:
                model = shared.get(id(message))
                if model is None:
                    model = shared[id(message)] = message_model(message)
                models.append(model)
            fields[key] = models
    if "tools" in fields:
        fields["tools"] = [ToolDefinition.model_validate(t) for t in fields["tools"]]
    return _new_turn(fields)


def message_record(message: dict[str, Any]) -> MessageRecord:
    """A chat message (``chat.ChatMessage``) as ``model.Message`` writes it: fields in declaration order."""
    if len(message) == 2:  # role and content: most messages
        return message
    out: MessageRecord = {"role": message["role"], "content": message["content"]}
    calls = message.get("tool_calls")
    if calls is not None:
        out["tool_calls"] = [_tool_call_record(call) for call in calls]
    for key in ("tool_call_id", "name", "reasoning_content"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _tool_call_record(call: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": call["id"]} if call.get("id") is not None else {}
    function = call["function"]
    out["type"] = "function"
    out["function"] = {"name": function["name"], "arguments": function["arguments"]}
    return out


def message_model(record: MessageRecord) -> Message:
    # Plain messages skip validation; tool calls are nested models, built by validating.
    return _new_message(record) if len(record) == 2 else Message.model_validate(record)
