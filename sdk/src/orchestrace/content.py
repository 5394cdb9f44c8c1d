"""Captured content: the text a span may carry for a value, as the capture settings say (redacted by their
hook, cut to their size limit). Refs (the digests every span carries) are :mod:`orchestrace_semconv.refs`,
re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from orchestrace_semconv.refs import REF_PREFIX, content_ref, json_ref, quick_ref, to_text

from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig
from orchestrace.failsafe import log_once

__all__ = ["REF_PREFIX", "Captured", "call_input", "capture_text", "capture_value", "content_ref", "json_ref",
           "quick_ref", "redact", "to_text", "truncate_utf8"]

#: Redaction sees a little more than the kept prefix, so a secret cut by the size limit is still matched.
_REDACT_MARGIN = 1024


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


def truncate_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes on a character boundary."""
    if len(text) * 4 <= max_bytes:  # fast path: cannot exceed
        return text, False
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", "ignore"), True


def redact(text: str, capture: CaptureConfig) -> str | None:
    """Apply the redaction hook; ``None`` when the hook fails (then nothing is captured)."""
    if capture.redact is None:
        return text
    try:
        return str(capture.redact(text))
    except Exception as exc:
        log_once("content.redact (the configured redaction hook raised)", exc)
        return None


def capture_value(value: Any, capture: CaptureConfig) -> Captured | None:
    """Text to put on a span for ``value``, or ``None`` when ``capture`` says no (or redaction failed).

    Only a prefix of large values is ever serialized.
    """
    if not capture.capture_content:
        return None
    limit = capture.max_content_bytes
    text, cut = to_text(value, limit + _REDACT_MARGIN)
    return capture_text(text, capture, cut)


def capture_text(text: str, capture: CaptureConfig, already_cut: bool = False) -> Captured | None:
    """Redact and truncate text that is already a string (e.g. a message's content)."""
    redacted = redact(text, capture)
    if redacted is None:
        return None
    kept, cut = truncate_utf8(redacted, capture.max_content_bytes)
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
