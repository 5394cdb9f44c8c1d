"""The GenAI semantic conventions' rules for ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (their
input- and output-message JSON schemas), as a JSON Schema the tests check captured messages against.

A message has a ``role`` and a list of ``parts``, each a typed object; an output message also has a
``finish_reason``. Parts of the known types carry their fields: ``text`` and ``reasoning`` a string
``content``, ``tool_call`` a string ``name`` (and an id that is a string or null), ``tool_call_response`` a
``response``. A backend that validates payloads against the conventions rejects a message missing any of them.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

_ID = {"type": ["string", "null"]}
_PART = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"type": "string"}},
    "allOf": [
        {
            "if": {"properties": {"type": {"const": kind}}},
            "then": {"required": ["content"], "properties": {"content": {"type": "string"}}},
        }
        for kind in ("text", "reasoning")
    ]
    + [
        {
            "if": {"properties": {"type": {"const": "tool_call"}}},
            "then": {"required": ["name"], "properties": {"name": {"type": "string"}, "id": _ID}},
        },
        {
            "if": {"properties": {"type": {"const": "tool_call_response"}}},
            "then": {"required": ["response"], "properties": {"id": _ID}},
        },
    ],
}
_MESSAGE = {
    "type": "object",
    "required": ["role", "parts"],
    "properties": {"role": {"type": "string"}, "parts": {"type": "array", "items": _PART}},
}
INPUT_MESSAGES = Draft202012Validator({"type": "array", "items": _MESSAGE})
OUTPUT_MESSAGES = Draft202012Validator(
    {
        "type": "array",
        "items": {
            **_MESSAGE,
            "required": ["role", "parts", "finish_reason"],
            "properties": {**_MESSAGE["properties"], "finish_reason": {"type": "string"}},
        },
    }
)


def problems(validator: Draft202012Validator, messages: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(messages)]
