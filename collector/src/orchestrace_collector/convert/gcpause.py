"""A pause of CPython's cyclic garbage collector around conversions, shared by concurrent ones.

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
cannot keep the collector off for good. Nothing here freezes objects (``gc.freeze``) or changes thresholds.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_SHARED_PAUSE_S = 1.0

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
