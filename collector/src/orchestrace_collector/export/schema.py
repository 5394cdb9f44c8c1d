"""The fixed Arrow schemas of the export formats, and the writer of rows in them (JSON lines or Parquet).

A schema is fixed by us, never inferred from the data, so files of any runs load together in any order: a run
without tool calls, or whose tools' arguments have other types, writes the same column types. Free-form values
(tool-call arguments, tool definitions, sampling parameters) are JSON text. Parquet files carry the schema;
JSON lines files carry every field in every row, and a loader that infers types from the first file it reads
(``datasets``' ``json`` builder) gets them from :func:`features` (a first file whose column is all null would
otherwise fix that column's type as null).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

TOOL_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(TOOL_CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
MESSAGES = pa.list_(MESSAGE)
KEY_VALUES = pa.list_(pa.struct([("key", pa.string()), ("value", pa.float64())]))
STRINGS = pa.list_(pa.string())
INTS = pa.list_(pa.int64())
FLOATS = pa.list_(pa.float64())

#: The columns the filters read, in every format (see ``filters.py``).
_FILTERED = [
    ("task_id", pa.string()),
    ("trace_id", pa.string()),
    ("agent", pa.string()),
    ("role", pa.string()),
    ("reward", pa.float64()),
    ("episode_reward", pa.float64()),
    ("flags", STRINGS),
]

TURNS = pa.schema(
    [
        *_FILTERED,
        ("turn_id", pa.string()),
        ("revision", pa.int64()),
        ("activation", pa.int64()),
        ("agent_id", pa.string()),
        ("credit", pa.list_(pa.struct([("channel", pa.string()), ("share", pa.float64())]))),
        ("episode_rewards", KEY_VALUES),
        ("t", pa.float64()),
        ("t_end", pa.float64()),
        ("model", pa.string()),
        ("provider", pa.string()),
        ("response_model", pa.string()),
        ("policy_version", pa.string()),
        ("response_id", pa.string()),
        ("finish_reason", pa.string()),
        ("request", pa.string()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cache_read_input_tokens", pa.int64()),
        ("cache_creation_input_tokens", pa.int64()),
        ("prompt", MESSAGES),
        ("completion", MESSAGES),
        ("tools", pa.string()),
        ("prompt_token_ids", INTS),
        ("completion_token_ids", INTS),
        ("completion_logprobs", FLOATS),
        ("input_ref", pa.string()),
        ("output_ref", pa.string()),
        ("event_ids", STRINGS),
        ("truncated", pa.list_(pa.struct([("field", pa.string()), ("bytes", pa.int64())]))),
        ("prompt_incomplete", pa.bool_()),
        ("completion_incomplete", pa.bool_()),
        ("error", pa.bool_()),
        ("error_type", pa.string()),
    ]
)

#: The policy that generated a turn (the served model or adapter, the weights' version): on every row, so an
#: asynchronous trainer can weigh stale rollouts and train one adapter per agent.
_POLICY = [("response_model", pa.string()), ("policy_version", pa.string())]
_TRL_IDS = [*_FILTERED, ("turn_id", pa.string()), ("activation", pa.int64()), *_POLICY]
TRL = pa.schema([("prompt", MESSAGES), ("completion", MESSAGES), ("tools", pa.string()), *_TRL_IDS])
TRL_DPO = pa.schema(
    [
        ("prompt", MESSAGES),
        ("chosen", MESSAGES),
        ("rejected", MESSAGES),
        ("tools", pa.string()),
        ("task_id", pa.string()),
        ("agent", pa.string()),
        ("role", pa.string()),
        ("chosen_reward", pa.float64()),
        ("rejected_reward", pa.float64()),
        ("chosen_trace_id", pa.string()),
        ("rejected_trace_id", pa.string()),
        ("chosen_turn_id", pa.string()),
        ("rejected_turn_id", pa.string()),
        ("matched_by", pa.string()),
        ("chosen_response_model", pa.string()),
        ("rejected_response_model", pa.string()),
        ("chosen_policy_version", pa.string()),
        ("rejected_policy_version", pa.string()),
    ]
)
TRL_KTO = pa.schema(
    [
        ("prompt", MESSAGES),
        ("completion", MESSAGES),
        ("label", pa.bool_()),
        ("tools", pa.string()),
        ("group_mean_reward", pa.float64()),
        *_TRL_IDS,
    ]
)

TOKENS = pa.schema(
    [
        ("uid", pa.string()),
        *_FILTERED,
        ("activation", pa.int64()),
        ("segment", pa.int64()),
        ("turn_ids", STRINGS),
        ("input_ids", INTS),
        ("attention_mask", INTS),
        ("response_mask", INTS),
        ("token_rewards", FLOATS),
        ("rollout_logprobs", FLOATS),
        ("prompt_length", pa.int64()),
        ("turn_ends", INTS),
        ("turn_rewards", FLOATS),
        ("token_source", pa.string()),
        ("turn_response_models", STRINGS),
        ("turn_policy_versions", STRINGS),
    ]
)

DECISIONS = pa.schema(
    [
        *_FILTERED,
        ("decision_id", pa.string()),
        ("t", pa.float64()),
        ("decision", pa.string()),
        ("label", pa.string()),
        ("activation", pa.int64()),
        ("agent_id", pa.string()),
        ("options", STRINGS),
        ("choice", pa.string()),
        ("choice_activation", pa.int64()),
        ("fixed", pa.bool_()),
        ("reason", pa.string()),
        ("handoff", pa.bool_()),
        ("turn_id", pa.string()),
        *_POLICY,
        ("context", MESSAGES),
        ("context_ref", pa.string()),
        ("context_event_ids", STRINGS),
        ("context_refs", STRINGS),
        ("recorded_reward", pa.float64()),
        ("episode_rewards", KEY_VALUES),
        ("task_success", pa.float64()),
    ]
)


def features(schema: pa.Schema) -> Any:
    """The ``datasets.Features`` of a schema: ``load_dataset("json", ..., features=features(TURNS))``."""
    from datasets import Features

    return Features.from_arrow_schema(schema)


def schema_rows(rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> list[dict[str, Any]]:
    """``rows`` as a JSON-lines export holds them (through Arrow: exactly the schema's types)."""
    return pa.Table.from_pylist(list(rows), schema=schema).to_pylist()


def write_rows(rows: Iterable[Mapping[str, Any]], schema: pa.Schema, path: Path, fmt: str) -> int:
    """Write ``rows`` (dicts with exactly the schema's fields) as ``fmt`` (``jsonl`` or ``parquet``);
    returns the number of rows. The rows go through Arrow either way, so a JSON line holds exactly the
    schema's types."""
    table = pa.Table.from_pylist(list(rows), schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if fmt == "parquet":
        pq.write_table(table, tmp)
    else:
        with tmp.open("w", encoding="utf-8") as handle:
            for row in table.to_pylist():
                handle.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    tmp.replace(path)  # a reader never sees half an export
    return table.num_rows
