"""Reading a field of a model-call result, whichever way the client library delivers it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Classes already found not to be mappings: ``field_of`` checks each class once (an ABC ``isinstance``
#: costs as much as the rest of it, and a model call's reply is read a field at a time).
_OBJECT_CLASSES: set[type] = set()


def field_of(value: Any, key: str, default: Any = None) -> Any:
    """``value[key]`` for mappings, ``value.key`` for objects: results come as dicts or as SDK objects."""
    kind = type(value)
    if kind is dict:
        return value.get(key, default)
    if kind not in _OBJECT_CLASSES:
        if isinstance(value, Mapping):
            return value.get(key, default)
        _OBJECT_CLASSES.add(kind)
    return getattr(value, key, default)


def int_list(value: Any) -> list[int] | None:
    """``value`` as a list of ints (token ids), or ``None`` when it is not one."""
    if not isinstance(value, list | tuple) or not all(type(v) is int for v in value):
        return None
    return list(value)
