"""Content references and captured content.

orchestrace's own spans carry ``orchestrace.content.*_ref`` (``sha256:<hex>`` of the full content). Spans of
other instrumentations carry content only (GenAI ``gen_ai.*`` attributes, OpenInference ``input.value`` /
``output.value``, OpenLLMetry ``traceloop.entity.input`` / ``output``): their ref is the sha256 of that text.
In both cases the captured text is kept for the content store, keyed by the ref.
"""

from __future__ import annotations

import hashlib
import json

from orchestrace import semconv as sc

from ..spans import Attributes
from .vocabularies import OI_INPUT, OI_OUTPUT, TL_INPUT, TL_OUTPUT

#: Where captured content may be, by direction, first match wins.
INPUT_CONTENT = (sc.GEN_AI_TOOL_CALL_ARGUMENTS, sc.GEN_AI_INPUT_MESSAGES, OI_INPUT, TL_INPUT)
OUTPUT_CONTENT = (sc.GEN_AI_TOOL_CALL_RESULT, sc.GEN_AI_OUTPUT_MESSAGES, OI_OUTPUT, TL_OUTPUT)


def sha256_ref(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class ContentStore:
    """Collects ``ref -> captured text`` for one episode."""

    __slots__ = ("contents",)

    def __init__(self) -> None:
        self.contents: dict[str, str] = {}

    def ref(self, attrs: Attributes, ref_key: str, content_keys: tuple[str, ...]) -> str | None:
        """The ref of a span's (or span event's) content in one direction, recording captured text."""
        ref = attrs.get(ref_key)
        text = None
        for key in content_keys:
            raw = attrs.get(key)
            if raw is not None:
                text = as_text(raw)
                break
        if ref:
            ref = str(ref)
            if text is not None:
                self.contents.setdefault(ref, text)
            return ref
        if text is None:
            return None
        ref = sha256_ref(text)
        self.contents.setdefault(ref, text)
        return ref
