"""CPython's cyclic garbage collector in a process that converts: paused around conversions
(:func:`gc_paused`, shared by concurrent ones) and tuned while a collector serves
(:func:`gc_tuned_for_serving`). Both are context managers that put back what they changed.

Why pause at all: a conversion allocates a few objects per span that all survive until it returns (the output
models, the event records). Each time the tracked heap grows by a quarter, CPython runs a full collection that
walks every live object, the whole episode included; on a 50,000-span episode those full passes cost more than
the conversion itself (about 2.5x the CPU time). Reference counting still frees everything that is not a cycle
during the pause.

Why this is safe in a server with other threads: a pause lasts only while conversions run (pure data work, no
user code, no blocking I/O), so other threads' cyclic garbage waits at most that long and is collected by the
first pass after it. Concurrent conversions share one pause (a count under a lock): the first one in disables
the collector only if it was enabled, and the last one out enables it again only in that case, so an
application that runs with the collector disabled keeps it disabled. A conversion joins a pause only in its
first ``MAX_SHARED_PAUSE_S`` (otherwise it runs without pausing), so overlapping conversions on a busy server
cannot keep the collector off for good. A pause neither freezes objects (``gc.freeze``) nor changes
thresholds.

Why tune while serving: a collector holds its open episodes' spans for seconds to minutes, so young passes
promote them and full passes walk them all. At CPython's (700, 10, 10) a burst ran a young pass every 700 new
objects and a full pass every few thousand requests: 5 % of the collector's CPU (bench/, section 3). The
collector makes almost no cyclic garbage (what a pass finds is start-up's), so :data:`SERVING_THRESHOLDS`
makes passes rare at a cost of a few MiB at most; and what exists when serving starts (modules, the
collector's own parts) lives until exit: frozen, the full passes leave it out (they cost half as much).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_SHARED_PAUSE_S = 1.0
#: The cyclic collector's thresholds while a collector serves (see above).
SERVING_THRESHOLDS = (50_000, 10, 10)

_lock = threading.Lock()
_holders = 0
_disabled_by_us = False
_since = 0.0


@contextmanager
def gc_paused() -> Iterator[None]:
    global _holders, _disabled_by_us, _since
    with _lock:
        joined = _holders == 0 or time.monotonic() - _since < MAX_SHARED_PAUSE_S
        if joined:
            if _holders == 0:
                _disabled_by_us = gc.isenabled()
                _since = time.monotonic()
                if _disabled_by_us:
                    gc.disable()
            _holders += 1
    try:
        yield
    finally:
        if joined:
            with _lock:
                _holders -= 1
                if _holders == 0 and _disabled_by_us:
                    _disabled_by_us = False
                    gc.enable()


@contextmanager
def gc_tuned_for_serving() -> Iterator[None]:
    """Freeze what exists now and set :data:`SERVING_THRESHOLDS`; on exit put the thresholds back and, unless
    the caller had frozen objects itself, unfreeze."""
    thresholds, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    try:
        gc.collect()
        gc.freeze()
        gc.set_threshold(*SERVING_THRESHOLDS)
        yield
    finally:
        gc.set_threshold(*thresholds)
        if not frozen_before:
            gc.unfreeze()
