"""Other forms of a model call's or tool call's record, as the GenAI attributes they stand for.

Conversion reads GenAI attributes (and the flattened messages ``chat`` reads); each vocabulary's
``model_call`` / ``tool_call`` overlay says what its spans record in another form (messages on span events,
usage as one JSON object, a prompt and reply of its own shape), and is overlaid on a span's attributes, the
span's own attributes winning. Message contents in a library's own form are read through the vocabularies'
``content_parts``.
"""

from __future__ import annotations

from typing import Final

from ..spans import Attributes, Span
from .vocabularies import VOCABULARIES
from .vocabularies.base import Overlay

_MODEL_CALL: Final = tuple(v.model_call for v in VOCABULARIES if v.model_call is not None)
_TOOL_CALL: Final = tuple(v.tool_call for v in VOCABULARIES if v.tool_call is not None)
_CONTENT_PARTS: Final = tuple(v.content_parts for v in VOCABULARIES if v.content_parts is not None)
_OTHER_FORMS: Final = tuple(key for v in VOCABULARIES for key in v.other_forms)


def _overlaid(span: Span, overlays: tuple[Overlay, ...]) -> Attributes:
    """The span's own attributes, with what ``overlays`` find in its record's other forms under them. A span
    that records nothing in another form (most spans: no span event, none of the vocabularies'
    ``other_forms`` keys) is its attributes, found without a further call."""
    attrs = span.attributes
    if not span.events:
        for key in _OTHER_FORMS:
            if key in attrs:
                break
        else:
            return attrs
    found: dict[str, object] = {}
    for overlay in overlays:
        overlay(span, found, content_parts)
    return {**found, **attrs} if found else attrs


# Plain functions, not closures made by a factory: compiled, a module-level closure is called generically.
def model_call(span: Span) -> Attributes:
    """A model call's attributes with its record's other forms overlaid."""
    return _overlaid(span, _MODEL_CALL)


def tool_call(span: Span) -> Attributes:
    """A tool span's attributes with its record's other forms overlaid."""
    return _overlaid(span, _TOOL_CALL)


def content_parts(content: object) -> object:
    """A message's content as the content parts ``chat`` reads: the first vocabulary that reads it in its own
    form (anything none reads, as it is)."""
    for parts in _CONTENT_PARTS:
        read = parts(content)
        if read is not content:
            return read
    return content
