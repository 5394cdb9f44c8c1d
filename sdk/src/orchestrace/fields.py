"""Reading a field of a model-call result, whichever way the client library delivers it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def field_of(value: Any, key: str, default: Any = None) -> Any:
    """``value[key]`` for mappings, ``value.key`` for objects: results come as dicts or as SDK objects."""
    if isinstance(value, Mapping):
        return value.get(key, default)
    return getattr(value, key, default)


def int_list(value: Any) -> list[int] | None:
    """``value`` as a list of ints (token ids), or ``None`` when it is not one."""
    if not isinstance(value, list | tuple) or not all(type(v) is int for v in value):
        return None
    return list(value)
