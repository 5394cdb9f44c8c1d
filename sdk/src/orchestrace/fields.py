"""Reading a field of a model-call result, whichever way the client library delivers it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Classes already found not to be mappings: ``field_of`` checks each class once (an ABC ``isinstance``
#: costs as much as the rest of it, and a model call's reply is read a field at a time).
_OBJECT_CLASSES: set[type] = set()
#: Of those, the pydantic models that keep pydantic's own ``__getattr__`` (LangChain messages, the OpenAI
#: and Anthropic SDKs' objects): a field they lack costs that ``__getattr__`` raising an ``AttributeError``
#: (about 20 k instructions, more than the rest of reading a reply), which ``_pydantic_attribute`` avoids.
_PYDANTIC_CLASSES: set[type] = set()
#: Per (pydantic model class, name): whether the class itself has the attribute (a property, a method).
_CLASS_HAS: dict[tuple[type, str], bool] = {}
_MISSING = object()


def field_of(value: Any, key: str, default: Any = None) -> Any:
    """``value[key]`` for mappings, ``value.key`` for objects: results come as dicts or as SDK objects."""
    kind = type(value)
    if kind is dict:
        return value.get(key, default)
    if kind not in _OBJECT_CLASSES:
        if isinstance(value, Mapping):
            return value.get(key, default)
        _OBJECT_CLASSES.add(kind)
        if _is_pydantic_model(kind):
            _PYDANTIC_CLASSES.add(kind)
    if kind in _PYDANTIC_CLASSES:
        # Its fields (pydantic allows no class attribute of their names); anything else as pydantic finds it.
        found = value.__dict__.get(key, _MISSING)
        return found if found is not _MISSING else _pydantic_attribute(value, kind, key, default)
    return getattr(value, key, default)


_NO_FIELDS: dict[str, Any] = {}


def model_fields(value: Any) -> dict[str, Any]:
    """The fields of a pydantic model instance as ``field_of`` reads them first (its ``__dict__``: a key in it
    is ``field_of``'s answer); empty for any other value (ask ``field_of``). For code that reads several
    fields of one reply."""
    kind = type(value)
    if kind not in _OBJECT_CLASSES and kind is not dict:
        field_of(value, "")  # tells the class apart once
    return value.__dict__ if kind in _PYDANTIC_CLASSES else _NO_FIELDS


def _is_pydantic_model(kind: type) -> bool:
    """A pydantic v2 model class that looks attributes up as pydantic does (no ``__getattr__`` of its own)."""
    getattr_ = getattr(kind, "__getattr__", None)
    return (getattr(getattr_, "__qualname__", None) == "BaseModel.__getattr__"
            and str(getattr(getattr_, "__module__", "")).startswith("pydantic")
            and isinstance(getattr(kind, "__private_attributes__", None), dict))


def _pydantic_attribute(value: Any, kind: type, key: str, default: Any) -> Any:
    """``getattr(value, key, default)`` for a pydantic model lacking the field ``key``, answered as pydantic's
    lookup would: the class's own attributes, private attributes, then extra fields (``extra="allow"``)."""
    has = _CLASS_HAS.get((kind, key))
    if has is None:
        has = _CLASS_HAS[(kind, key)] = hasattr(kind, key)
    if has or key in kind.__private_attributes__:  # type: ignore[attr-defined]
        return getattr(value, key, default)
    extra = getattr(value, "__pydantic_extra__", None)
    return extra.get(key, default) if extra else default


def int_list(value: Any) -> list[int] | None:
    """``value`` as a list of ints (token ids), or ``None`` when it is not one."""
    if not isinstance(value, list | tuple) or not all(type(v) is int for v in value):
        return None
    return list(value)
