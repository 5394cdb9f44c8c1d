"""Which span produced a value: lets ``ot.aggregate(inputs)`` link to the agent and tool calls it merges.

Keyed by the value's content ref (computed anyway for ``orchestrace.content.output_ref``), so no reference to
the value is held, ids cannot be reused by other objects, and an equal copy (e.g. one that crossed a
process) still resolves. Bounded: the least recently used refs are forgotten past ``MAX_ENTRIES``.

Recording is on every decorated call's path, lookups are rare: a record is only appended to a queue (a
thread-safe append, no lock), and the queue is folded into the index, in order, at the next lookup or once
``_BATCH`` records wait. The index is the same as if every record had been applied at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from opentelemetry.trace import SpanContext

MAX_ENTRIES = 4096
#: Producers kept per ref: several agents may return the same value.
_MAX_PRODUCERS = 16
_BATCH = 256

#: A ref's producers, oldest first (the deque drops the oldest past ``_MAX_PRODUCERS``).
_producers: OrderedDict[str, deque[SpanContext]] = OrderedDict()
_pending: deque[tuple[str, SpanContext]] = deque()
_lock = threading.Lock()


def record(ref: str, producer: SpanContext) -> None:
    """Remember that the span ``producer`` returned the value whose content ref is ``ref``."""
    _pending.append((ref, producer))
    if len(_pending) >= _BATCH:
        with _lock:
            _fold()


def _fold() -> None:
    """Apply the pending records to the index (with ``_lock`` held)."""
    while _pending:
        ref, producer = _pending.popleft()
        spans = _producers.get(ref)
        if spans is None:
            _producers[ref] = deque((producer,), _MAX_PRODUCERS)
            while len(_producers) > MAX_ENTRIES:
                _producers.popitem(last=False)
        else:
            _producers.move_to_end(ref)
            spans.append(producer)


def producers(ref: str) -> list[SpanContext]:
    """Spans that returned a value with this ref, oldest first (the newest ``_MAX_PRODUCERS``)."""
    with _lock:
        _fold()
        spans = _producers.get(ref)
        if spans is None:
            return []
        _producers.move_to_end(ref)
        return list(spans)
