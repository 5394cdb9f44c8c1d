"""Content refs: the one place that turns Python values into the digests spans carry (``*_ref`` attributes).

``content_ref(value)`` is the digest every orchestrace part uses (SDK, integrations, collector), so a value
hashed in one place matches the same value hashed in another:

* ``str``: SHA-256 of its UTF-8 bytes (so a ref can be checked against a stored text file);
* ``bytes`` / ``bytearray`` / ``memoryview``: SHA-256 of the bytes;
* anything else: SHA-256 of its canonical JSON: keys sorted, separators ``,`` and ``:``, no ASCII escaping;
  pydantic models via ``model_dump(mode="json")``, dataclasses via ``asdict``, sets sorted, other objects by
  ``repr``. Values JSON cannot encode at all (circular ones) fall back to ``repr``.

Large values are hashed in a stream: a 50 MB argument is never copied whole. ``to_text`` is the same
serialization as text (what the SDK captures, before redaction and the size limit).

That serialization is ``json``'s (``json.dumps(value, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, default=...)``). Values of plain JSON types, pydantic models among them, are written by
``orjson`` instead, about ten times cheaper, only after a walk has seen nothing on which the two could differ
(see ``_walk``, which also decides whether ``json`` writes a value in one piece or streams it); anything else
takes ``json``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import importlib
import json
import logging
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import orjson

REF_PREFIX = "sha256:"
#: Strings are hashed, and values serialized, in pieces of this many characters.
CHUNK = 1 << 20
_SMALL_NODES = 2000
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _json_default(value: Any) -> Any:
    """JSON fallback for the types ``json`` does not know."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "backslashreplace")
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__qualname__}>"


_encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)
_unsorted_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_json_default)
#: ``_encoder``'s C encoder, built once (``JSONEncoder.encode`` builds one per call) and without the circular
#: check, for the values ``_walk`` calls small: its bounded walk rules out cycles among their containers
#: (one hidden behind a ``default`` conversion ends in RecursionError, caught like the check's ValueError).
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)  # CPython's accelerator (not in typeshed)
_small_encoder = (None if _c_make_encoder is None else _c_make_encoder(
    None, _json_default, json.encoder.encode_basestring, None, ":", ",", True, False, True))


def _encode_small(value: Any) -> str:
    if _small_encoder is None:  # no C accelerator (some other Python implementations)
        return _encoder.encode(value)
    return "".join(_small_encoder(value, 0))


#: orjson writes these floats as ``repr`` does (fixed notation, the shortest digits that read back); below
#: and above, its exponent notation is not Python's (``1e-05``: ``0.00001``; other versions ``1e16`` for
#: ``1e+16``), and it writes NaN and infinities as ``null``.
_FLOAT_LOW = 1e-4
_FLOAT_HIGH = 1e16
#: Sorted keys; everything orjson would write its own way (dataclasses, datetimes, subclasses of str, int,
#: dict and list) goes to ``default`` instead, where ``_walk`` has ruled it out.
_ORJSON_OPTIONS = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
                   | orjson.OPT_PASSTHROUGH_SUBCLASS)
#: Objects ``json`` writes without ``default`` (subclasses of its types, as their base type), or orjson does
#: (Enum members and UUIDs by value, fragments as they are), even when they have a ``model_dump``.
_NOT_DEFAULTED = (str, int, float, list, tuple, dict, enum.Enum, uuid.UUID, orjson.Fragment)
#: The walk's mark for an object it does not write with orjson (no ``model_dump``, or one that raised).
_NOT_DUMPED = object()
#: Per type: whether ``json`` hands its objects to ``default`` (not one of ``_NOT_DEFAULTED``: decided by the
#: type, as both libraries do). A cache, so that the walk does not test nine classes per object; bounded,
#: for programs that make classes on the fly.
_DEFAULTED: dict[type, bool] = {}
_MAX_TYPES = 1024
#: pydantic's own ``BaseModel.model_dump`` once pydantic is loaded (a placeholder until then): a model whose
#: ``model_dump`` is this one is dumped by its serializer directly, which is all that method does, without
#: its Python frame and fifteen keyword arguments (a third of the dump's cost for a LangChain message).
_pydantic_dump: Any = object()


def _defaulted(kind: type) -> bool:
    """``_DEFAULTED[kind]``, decided and cached the first time ``kind`` is seen."""
    global _pydantic_dump
    if len(_DEFAULTED) >= _MAX_TYPES:
        _DEFAULTED.clear()
    main = sys.modules.get("pydantic.main")
    dump = getattr(getattr(main, "BaseModel", None), "model_dump", None)
    # The method pydantic defines, not a replacement patched into BaseModel (called then like any other).
    if getattr(dump, "__module__", None) == "pydantic.main" and getattr(dump, "__qualname__", None) == (
            "BaseModel.model_dump"):
        _pydantic_dump = dump
    answer = _DEFAULTED[kind] = not issubclass(kind, _NOT_DEFAULTED)
    return answer


def _walk(value: Any) -> bytes | bool:
    """One bounded walk of ``value`` that answers how to serialize it: its canonical JSON written by orjson,
    when that is surely ``json``'s byte for byte (plain); else whether ``json`` may write it in one piece
    (``True``: small) or must stream it (``False``: large). Raises only what the value's own ``__len__``,
    ``__iter__`` or ``items`` raise (json would call them too).

    Bounds: at most ``_SMALL_NODES`` containers and items (a dict item counts twice: key and value), and
    ``CHUNK`` characters of strings and bytes, counted by length where they are met; past either, large.
    Empty dicts and lists met as items are not walked (nor counted): both libraries write them alike.

    Plain, as long as the walk has seen only what both libraries write alike: dicts (orjson refuses keys other
    than ``str``, and sorts their UTF-8 bytes: code point order), lists, tuples, ``str`` (orjson raises on
    lone surrogates), ``int`` (it raises beyond 64 bits), ``bool``, ``None``, floats of the range above, all
    of exact type, and objects with a ``model_dump`` (what ``_json_default`` writes first; its JSON-mode
    output is walked too: it may hold NaN or small floats). Anything else (Enum and UUID, which orjson
    writes by value, sets, bytes, dataclasses, subclasses, other objects, a ``str`` as the value itself,
    whose ref hashes the text) ends plainness, and the rest of the walk only sizes: objects are then leaves
    (``json``'s ``default`` dumps them), and subclasses of dict, list and tuple, sets and frozensets are
    walked as containers.
    """
    dumps: dict[int, Any] = {}  # held here, so no id is reused while orjson runs
    stack = [value]
    nodes = 0
    size = 0
    plain = True
    while stack:
        item = stack.pop()
        kind = type(item)
        nodes += 1
        if kind is dict or kind is list or kind is tuple:
            nodes += 2 * len(item) if kind is dict else len(item)
            if nodes > _SMALL_NODES:
                return False
            try:
                children = item
                if kind is dict:
                    size += sum(map(len, item))  # its keys
                    children = item.values()
                for child in children:
                    kind = type(child)
                    if kind is str:
                        size += len(child)
                    elif kind is not int and kind is not bool and child is not None and (
                            (kind is not dict and kind is not list) or child):  # empty ones: nothing to see
                        stack.append(child)
            except Exception:  # a dict key without a length (a number, None, an object): orjson refuses it
                plain = False
                stack.extend(item)  # sized when they come up again
                stack.extend(item.values())
        elif kind is float:
            if plain and not (_FLOAT_LOW <= abs(item) < _FLOAT_HIGH or item == 0.0):  # NaN fails both
                plain = False
        elif kind is not int and kind is not bool and item is not None:  # those only as the value itself
            if plain:
                try:
                    defaulted = _DEFAULTED.get(kind)  # a metaclass may make its classes unhashable
                    dump = getattr(item, "model_dump", None) if defaulted or (
                        defaulted is None and _defaulted(kind)) else None
                    if getattr(dump, "__func__", None) is _pydantic_dump:
                        # What pydantic's model_dump(mode="json") returns (same serializer, same defaults).
                        dumped = item.__pydantic_serializer__.to_python(item, mode="json")
                    else:
                        dumped = dump(mode="json") if callable(dump) else _NOT_DUMPED
                except Exception:  # json then decides (and raises or not) on its own
                    dumped = _NOT_DUMPED
                if dumped is not _NOT_DUMPED:
                    dumps[id(item)] = dumped
                    stack.append(dumped)
                    continue
                plain = False
            # Only sized from here on: the containers json writes, as their items come up.
            if isinstance(item, dict):
                nodes += 2 * len(item)
                if nodes > _SMALL_NODES:
                    return False
                for pair in item.items():
                    stack.extend(pair)
            elif isinstance(item, list | tuple | set | frozenset):
                nodes += len(item)
                if nodes > _SMALL_NODES:
                    return False
                stack.extend(item)
            elif isinstance(item, str | bytes | bytearray | memoryview):
                size += len(item)
        if size > CHUNK:
            return False
    if not plain:
        return True
    try:
        if not dumps:
            return orjson.dumps(value, option=_ORJSON_OPTIONS)
        return orjson.dumps(value, default=lambda item: dumps[id(item)], option=_ORJSON_OPTIONS)
    except Exception:  # orjson refused it (a lone surrogate, an int beyond 64 bits, ...): json writes it
        return True


def _text_chunks(value: Any, encoder: json.JSONEncoder, small: bool) -> Iterator[str]:
    """The serialization of ``value`` as text: in one piece when ``small`` (``_walk``'s answer), else streamed
    in chunks so that a large value is never copied whole."""
    if isinstance(value, str):
        for start in range(0, len(value), CHUNK):
            yield value[start:start + CHUNK]
    elif small:
        yield encoder.encode(value)
    else:
        yield from encoder.iterencode(value)


def _digest(value: Any, encoder: json.JSONEncoder, small: bool) -> str:
    digest = hashlib.sha256()
    if isinstance(value, _BYTES_LIKE):
        digest.update(value)
    else:
        for chunk in _text_chunks(value, encoder, small):
            digest.update(chunk.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _short_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256 (``_sha2`` from 3.12, ``_sha256`` before; private, hence looked up), else
    OpenSSL's."""
    for module in ("_sha2", "_sha256"):
        with contextlib.suppress(ImportError, AttributeError):
            return cast(Callable[[bytes], Any], importlib.import_module(module).sha256)
    return hashlib.sha256


#: Short data is hashed by CPython's own SHA-256: OpenSSL's allocates, copies and frees a context per hash (a
#: third more instructions, and more time, for a ref of a few words), but with the CPU's SHA instructions it
#: is the faster one past a couple of blocks.
_sha256_short = _short_sha256()
_SHORT = 128


def _ref(data: bytes) -> str:
    return REF_PREFIX + (_sha256_short if len(data) <= _SHORT else hashlib.sha256)(data).hexdigest()


def json_ref(text: str) -> str:
    """The content ref of the value whose canonical JSON (``content_ref``'s serialization) is ``text``: for
    callers that write the JSON of a known shape themselves, cheaper than building the value to encode it."""
    return _ref(text.encode("utf-8", "surrogatepass"))


def quick_ref(value: Any) -> str | None:
    """The content ref of a ``str`` (up to 1 MB) or ``bytes`` value: one hash, no serialization, never
    raises. ``None`` for any other value (use :func:`content_ref`)."""
    kind = type(value)  # exact types: no ABC checks on the hot path
    if kind is str and len(value) <= CHUNK:
        return _ref(value.encode("utf-8", "surrogatepass"))
    if kind is bytes:
        return _ref(value)
    return None


def content_ref(value: Any) -> str:
    """``sha256:<hex>`` of ``value``'s canonical serialization (see the module docstring). Never raises."""
    kind = type(value)
    if kind is not dict and kind is not list:  # the commonest values are not strings or bytes
        ref = quick_ref(value)
        if ref is not None:
            return ref
    try:
        walked = _walk(value)
    except Exception:  # the value's own methods raised, as they would in json: hash the repr instead
        walked = None
    if type(walked) is bytes:
        return _ref(walked)
    if walked is not None:
        try:
            if walked and not isinstance(value, _BYTES_LIKE):
                # Small JSON: one encode, one hash (what ``_digest`` does, without its generator).
                return json_ref(_encode_small(value))
            return REF_PREFIX + _digest(value, _encoder, False)
        except TypeError:  # dict keys of mixed types cannot be sorted: keep insertion order
            try:
                return REF_PREFIX + _digest(value, _unsorted_encoder, walked is True)
            except Exception:
                pass
        except Exception:  # circular structures and the like: hash the repr instead
            pass
    try:
        return _ref(repr(value).encode("utf-8", "surrogatepass"))
    except Exception as exc:
        _log_once(exc)
        return _ref(type(value).__qualname__.encode())




_failed = False


def _log_once(exc: Exception) -> None:
    """A value not even ``repr`` can write: logged the first time (its type name is hashed instead)."""
    global _failed
    if not _failed:
        _failed = True
        logging.getLogger("orchestrace").error("orchestrace: a value could not be serialized for its content "
                                               "ref; its type name is hashed instead", exc_info=exc)


def _prefix(value: Any, limit: int | None, encoder: json.JSONEncoder, small: bool) -> tuple[str, bool]:
    parts: list[str] = []
    size = 0
    for chunk in _text_chunks(value, encoder, small):
        if limit is not None and size + len(chunk) > limit:
            parts.append(chunk[: limit - size])
            return "".join(parts), True
        parts.append(chunk)
        size += len(chunk)
    return "".join(parts), False


def to_text(value: Any, limit: int | None = None) -> tuple[str, bool]:
    """The serialization behind ``content_ref`` as text, reading at most ``limit`` characters.

    Returns the text read and whether more remained.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value[: None if limit is None else limit + 4])
        text, cut = _prefix(raw.decode("utf-8", "backslashreplace"), limit, _encoder, False)
        return text, cut or len(raw) < len(value)
    walked: bytes | bool | None = False  # a text is cut in chunks whatever its size
    if not isinstance(value, str):
        try:
            walked = _walk(value)
        except Exception:  # as in content_ref: the repr
            walked = None
        if type(walked) is bytes:
            text = walked.decode()
            return (text, False) if limit is None or len(text) <= limit else (text[:limit], True)
    if walked is not None:
        small = walked is True
        try:
            return _prefix(value, limit, _encoder, small)
        except TypeError:
            try:
                return _prefix(value, limit, _unsorted_encoder, small)
            except Exception:
                pass
        except Exception:
            pass
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}>"
    return (text, False) if limit is None or len(text) <= limit else (text[:limit], True)
