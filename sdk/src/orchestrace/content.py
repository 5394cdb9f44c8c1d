"""Content refs and captured content: the one place that turns Python values into digests and text.

``content_ref(value)`` is the digest every orchestrace part uses (SDK, LangGraph integration, collector), so
a value hashed in one place matches the same value hashed in another:

* ``str``: SHA-256 of its UTF-8 bytes (so a ref can be checked against a stored text file);
* ``bytes`` / ``bytearray`` / ``memoryview``: SHA-256 of the bytes;
* anything else: SHA-256 of its canonical JSON: keys sorted, separators ``,`` and ``:``, no ASCII escaping;
  pydantic models via ``model_dump(mode="json")``, dataclasses via ``asdict``, sets sorted, other objects by
  ``repr``. Values JSON cannot encode at all (circular ones) fall back to ``repr``.

Large values are hashed in a stream: a 50 MB argument is never copied whole.
Captured text is the same serialization, redacted by the configured hook, then cut to the size limit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig
from orchestrace.failsafe import log_once

REF_PREFIX = "sha256:"
_CHUNK = 1 << 20
_SMALL_NODES = 2000
#: Redaction sees a little more than the kept prefix, so a secret cut by the size limit is still matched.
_REDACT_MARGIN = 1024
#: Exact types whose canonical JSON is one short token.
_SCALARS = frozenset({int, float, bool, type(None)})
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
#: check, for the values ``_is_small`` let through: its bounded walk rules out cycles among their containers
#: (one hidden behind a ``default`` conversion ends in RecursionError, caught like the check's ValueError).
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)  # CPython's accelerator (not in typeshed)
_small_encoder = (None if _c_make_encoder is None else _c_make_encoder(
    None, _json_default, json.encoder.encode_basestring, None, ":", ",", True, False, True))


def _encode_small(value: Any) -> str:
    if _small_encoder is None:  # no C accelerator (some other Python implementations)
        return _encoder.encode(value)
    return "".join(_small_encoder(value, 0))


def _is_small(value: Any) -> bool:
    """Whether ``value`` is surely small enough to serialize in one piece (fast, C-accelerated ``json``).

    Visits at most ``_SMALL_NODES`` containers and items (a dict item counts twice: key and value); strings
    and bytes count by length. Leaves are sized where they are met and only containers are walked, with
    exact-type checks first: this runs on every ref of a hot path.
    """
    stack = [value]
    nodes = 0
    size = 0
    while stack:
        item = stack.pop()
        kind = type(item)
        nodes += 1
        if kind is dict or (kind is not list and kind is not tuple and isinstance(item, dict)):
            nodes += 2 * len(item)
            if nodes > _SMALL_NODES:
                return False
            for key, child in item.items():
                if type(key) is str:
                    size += len(key)
                elif type(key) not in _SCALARS:
                    stack.append(key)
                if type(child) is str:
                    size += len(child)
                elif type(child) not in _SCALARS:
                    stack.append(child)
        elif kind is list or kind is tuple or isinstance(item, list | tuple | set | frozenset):
            nodes += len(item)
            if nodes > _SMALL_NODES:
                return False
            for child in item:
                if type(child) is str:
                    size += len(child)
                elif type(child) not in _SCALARS:
                    stack.append(child)
        elif isinstance(item, str | bytes | bytearray | memoryview):
            size += len(item)
        if size > _CHUNK:
            return False
    return True


def _text_chunks(value: Any, encoder: json.JSONEncoder = _encoder) -> Iterator[str]:
    """The serialization of ``value`` as text: in one piece when small, else streamed in chunks so that a
    large value is never copied whole."""
    if isinstance(value, str):
        for start in range(0, len(value), _CHUNK):
            yield value[start:start + _CHUNK]
    elif _is_small(value):
        yield encoder.encode(value)
    else:
        yield from encoder.iterencode(value)


def _digest(value: Any, encoder: json.JSONEncoder) -> str:
    digest = hashlib.sha256()
    if isinstance(value, _BYTES_LIKE):
        digest.update(value)
    else:
        for chunk in _text_chunks(value, encoder):
            digest.update(chunk.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _ref(data: bytes) -> str:
    return REF_PREFIX + hashlib.sha256(data).hexdigest()


def json_ref(text: str) -> str:
    """The content ref of the value whose canonical JSON (``content_ref``'s serialization) is ``text``: for
    callers that write the JSON of a known shape themselves, cheaper than building the value to encode it."""
    return _ref(text.encode("utf-8", "surrogatepass"))


def quick_ref(value: Any) -> str | None:
    """The content ref of a ``str`` (up to 1 MB) or ``bytes`` value: one hash, no serialization, never
    raises. ``None`` for any other value (use :func:`content_ref`)."""
    kind = type(value)  # exact types: no ABC checks on the hot path
    if kind is str and len(value) <= _CHUNK:
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
        if kind in _SCALARS or (not isinstance(value, _BYTES_LIKE) and _is_small(value)):
            # Small JSON: one encode, one hash (what ``_digest`` does, without its generator).
            return json_ref(_encode_small(value))
        return REF_PREFIX + _digest(value, _encoder)
    except TypeError:  # dict keys of mixed types cannot be sorted: keep insertion order
        try:
            return REF_PREFIX + _digest(value, _unsorted_encoder)
        except Exception:
            pass
    except Exception:  # circular structures and the like: hash the repr instead
        pass
    try:
        return _ref(repr(value).encode("utf-8", "surrogatepass"))
    except Exception as exc:
        log_once("content.content_ref", exc)
        return _ref(type(value).__qualname__.encode())


class Captured(NamedTuple):
    """Captured text (redacted, cut to the size limit) and whether it was cut."""

    text: str
    truncated: bool
    cut_bytes: int = 0  # UTF-8 bytes left out, when known (messages; 0 when unknown or nothing was cut)

    def attributes(self, key: str, cut_key: str | None = None) -> dict[str, str | bool | int]:
        """Span (or event) attributes: the text under ``key``, and the truncation flag when it was cut; the
        number of bytes cut under ``cut_key`` when given and known."""
        if not self.truncated:
            return {key: self.text}
        attributes: dict[str, str | bool | int] = {key: self.text, sc.ORCH_CONTENT_TRUNCATED: True}
        if cut_key is not None and self.cut_bytes:
            attributes[cut_key] = self.cut_bytes
        return attributes


def _prefix(value: Any, limit: int | None, encoder: json.JSONEncoder) -> tuple[str, bool]:
    parts: list[str] = []
    size = 0
    for chunk in _text_chunks(value, encoder):
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
        text, cut = _prefix(raw.decode("utf-8", "backslashreplace"), limit, _encoder)
        return text, cut or len(raw) < len(value)
    try:
        return _prefix(value, limit, _encoder)
    except TypeError:
        try:
            return _prefix(value, limit, _unsorted_encoder)
        except Exception:
            pass
    except Exception:
        pass
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}>"
    return (text, False) if limit is None or len(text) <= limit else (text[:limit], True)


def truncate_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes on a character boundary."""
    if len(text) * 4 <= max_bytes:  # fast path: cannot exceed
        return text, False
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", "ignore"), True


def redact(text: str, config: CaptureConfig) -> str | None:
    """Apply the redaction hook; ``None`` when the hook fails (then nothing is captured)."""
    if config.redact is None:
        return text
    try:
        return str(config.redact(text))
    except Exception as exc:
        log_once("content.redact (the configured redaction hook raised)", exc)
        return None


def capture(value: Any, config: CaptureConfig) -> Captured | None:
    """Text to put on a span for ``value``, or ``None`` when ``config`` says no (or redaction failed).

    Only a prefix of large values is ever serialized.
    """
    if not config.capture_content:
        return None
    limit = config.max_content_bytes
    text, cut = to_text(value, limit + _REDACT_MARGIN)
    return capture_text(text, config, cut)


def capture_text(text: str, config: CaptureConfig, already_cut: bool = False) -> Captured | None:
    """Redact and truncate text that is already a string (e.g. a message's content)."""
    redacted = redact(text, config)
    if redacted is None:
        return None
    kept, cut = truncate_utf8(redacted, config.max_content_bytes)
    return Captured(kept, cut or already_cut)


def call_input(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """The value that stands for a call's input: the single argument itself when there is exactly one
    (so ``agent(text)`` has the same input ref as ``text``), else the keyword arguments, else both.
    """
    if kwargs:
        return dict(kwargs) if not args else {"args": list(args), "kwargs": dict(kwargs)}
    if len(args) == 1:
        return args[0]
    return list(args)
