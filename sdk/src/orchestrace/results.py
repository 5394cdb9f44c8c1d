"""Which span produced a value: lets ``ot.aggregate(inputs)`` link to the agent and tool calls it merges.

Keyed by the value's content ref (computed anyway for ``orchestrace.content.output_ref``), so no reference to
the value is held, ids cannot be reused by other objects, and an equal copy (e.g. one that crossed a
process) still resolves. Bounded: the least recently used refs are forgotten past ``MAX_ENTRIES``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from opentelemetry.trace import SpanContext

MAX_ENTRIES = 4096
#: Producers kept per ref: several agents may return the same value.
_MAX_PRODUCERS = 16

_producers: OrderedDict[str, list[SpanContext]] = OrderedDict()
_lock = threading.Lock()


def record(ref: str, producer: SpanContext) -> None:
    """Remember that the span ``producer`` returned the value whose content ref is ``ref``."""
    with _lock:
        spans = _producers.pop(ref, None) or []
        spans.append(producer)
        _producers[ref] = spans[-_MAX_PRODUCERS:]
        while len(_producers) > MAX_ENTRIES:
            _producers.popitem(last=False)


def producers(ref: str) -> list[SpanContext]:
    """Spans that returned a value with this ref, oldest first (the newest ``_MAX_PRODUCERS``)."""
    with _lock:
        spans = _producers.get(ref)
        if spans is None:
            return []
        _producers.move_to_end(ref)
        return list(spans)
