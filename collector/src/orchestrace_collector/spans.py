"""The collector's in-memory span: what every input format (OTLP protobuf, OTLP-JSON, Jaeger JSON) decodes to.

Plain slotted dataclasses rather than pydantic models: the collector holds hundreds of thousands of these and
converts them on its hot path. Input is validated where it is decoded (``decode.py``); once a ``Span`` exists
its fields are trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from orchestrace_semconv import ORCH_LINK_TYPE

#: Attribute values after decoding: OTLP's AnyValue flattened to Python (arrays become tuples).
AttrValue = Any
Attributes = dict[str, AttrValue]

STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2

#: The memory limit's estimate of what a batch costs once decoded (queued for assembly and held as ``Span``
#: objects): its wire bytes, plus these per span and per attribute (span, event and link attributes, each
#: event and link counting as one). Fitted to resident-set growth of held SDK-shaped spans with 4 to 64
#: attributes each (within 3 %; spans with fewer attributes are overestimated, up to 2.5 x for bare ones).
SPAN_BYTES: Final = 1200
ATTRIBUTE_BYTES: Final = 128


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class SpanLink:
    trace_id: str  # 32 lowercase hex
    span_id: str  # 16 lowercase hex
    attributes: Attributes = field(default_factory=dict)


# Its own ``__init__`` (the fields' defaults again): compiled by mypyc (``collector/build_mypyc.py``) it is
# native, where the one ``dataclass`` generates runs interpreted, through a checked setattr per field (most of
# what decoding a received span cost).
@dataclass(slots=True, init=False)
class Span:
    trace_id: str  # 32 lowercase hex
    span_id: str  # 16 lowercase hex
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    kind: int = 1  # OTLP SpanKind, 1 = INTERNAL
    attributes: Attributes = field(default_factory=dict)
    # Tuples, so that every decoder gives equal spans: most spans have no events or links and share the
    # empty tuple, which the cyclic GC does not track (two objects per held span less for its full passes).
    events: Sequence[SpanEvent] = ()
    links: Sequence[SpanLink] = ()
    status_code: int = STATUS_UNSET
    status_message: str = ""
    resource: Attributes = field(default_factory=dict)
    scope: str = ""

    def __init__(
        self,
        trace_id: str,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        start_ns: int,
        end_ns: int,
        kind: int = 1,
        attributes: Attributes | None = None,
        events: Sequence[SpanEvent] = (),
        links: Sequence[SpanLink] = (),
        status_code: int = STATUS_UNSET,
        status_message: str = "",
        resource: Attributes | None = None,
        scope: str = "",
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.kind = kind
        self.attributes = {} if attributes is None else attributes
        self.events = events
        self.links = links
        self.status_code = status_code
        self.status_message = status_message
        self.resource = {} if resource is None else resource
        self.scope = scope

    def __reduce__(self) -> tuple[type[Span], tuple[Any, ...]]:
        # Compiled, the class makes its instances through ``__init__``: pickle (Ray) passes it the fields.
        return Span, tuple([getattr(self, f.name) for f in fields(self)])


def continued_link(span: Span) -> tuple[str, str] | None:
    """``(trace id, span id)`` of the span a root span continues (see ``assemble.py``): the first of its
    links, when all of them that point outside its own trace (orchestrace's typed links aside) point into one
    other trace; else None."""
    if span.parent_span_id or not span.links:
        return None
    found: tuple[str, str] | None = None
    for link in span.links:
        if link.trace_id == span.trace_id or ORCH_LINK_TYPE in link.attributes:
            continue
        if found is None:
            found = (link.trace_id, link.span_id)
        elif link.trace_id != found[0]:
            return None
    return found


def resident_bytes(spans: Sequence[Span], wire_bytes: int) -> int:
    """The memory limit's estimate for the decoded ``spans`` of one batch of ``wire_bytes`` (see
    :data:`SPAN_BYTES`). Compiled with the span (``collector/build_mypyc.py``): it reads every span of every
    received batch."""
    attributes = 0
    for span in spans:
        attributes += len(span.attributes) + len(span.events) + len(span.links)
        for event in span.events:
            attributes += len(event.attributes)
    return wire_bytes + SPAN_BYTES * len(spans) + ATTRIBUTE_BYTES * attributes
