"""Content references and captured content.

orchestrace's own spans carry ``orchestrace.content.*_ref`` (``sha256:<hex>`` of the full content). Spans of
other instrumentations carry content only (where, each vocabulary's ``input_content`` / ``output_content``
say): their ref is computed here with the SDK's own ref function (``orchestrace_semconv.refs.content_ref``),
so a value has one ref wherever it is hashed.
In both cases the captured text is kept for the content store under the ref the span claims; the writer
stores it under the sha256 of its own bytes and records the claimed ref when the two differ (content cut to
the size limit, redacted, or captured in another form than the one hashed).
"""

from __future__ import annotations

from typing import Final

from orchestrace_semconv.refs import content_ref, to_text

from ..spans import Attributes
from .vocabularies import VOCABULARIES

#: Where captured content may be, by direction, first match wins.
INPUT_CONTENT: Final = tuple(key for v in VOCABULARIES for key in v.input_content)
OUTPUT_CONTENT: Final = tuple(key for v in VOCABULARIES for key in v.output_content)


class ContentStore:
    """Collects ``claimed ref -> captured text`` for one episode."""

    __slots__ = ("contents",)

    def __init__(self) -> None:
        self.contents: dict[str, str] = {}

    def ref(self, attrs: Attributes, ref_key: str, content_keys: tuple[str, ...]) -> str | None:
        """The ref of a span's (or span event's) content in one direction, recording captured text."""
        ref = attrs.get(ref_key)
        raw = None
        for key in content_keys:
            raw = attrs.get(key)
            if raw is not None:
                break
        if not ref:
            if raw is None:
                return None
            ref = content_ref(raw)  # the text's own ref: a string's UTF-8 bytes, a list's canonical JSON
        ref = str(ref)
        if raw is not None:
            self.contents.setdefault(ref, raw if isinstance(raw, str) else to_text(raw)[0])
        return ref
