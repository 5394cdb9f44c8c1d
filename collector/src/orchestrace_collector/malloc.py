"""glibc's allocator, set so that the memory a collector frees goes back to the system.

glibc serves an allocation of at least its mmap threshold with its own mapping, returned on free, but raises
that threshold to the size of each such block freed (up to 32 MiB): after the first large request body, the
next ones come from heaps that are never given back, so the resident set ratchets up to the largest burst
of requests ever held at once (a 12 MiB gRPC flood at ``--memory-limit-mb 100``: 2.6 x the limit over idle,
1.2 x with the threshold fixed). Setting the threshold fixes it (glibc then no longer moves it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

_M_MMAP_THRESHOLD = -3  # malloc.h
THRESHOLD = 1 << 20


def release_large_blocks() -> bool:
    """Fix glibc's mmap threshold at :data:`THRESHOLD` (unless ``MALLOC_MMAP_THRESHOLD_`` sets it already).
    Returns whether it was set: not on another C library."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, THRESHOLD))
    except (OSError, AttributeError):  # not glibc: its allocator has its own policy
        log.debug("orchestrace: mallopt not available; the allocator keeps its policy")
        return False
