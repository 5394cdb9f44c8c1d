"""Errors inside orchestrace never reach the user's program: they are logged once per site and swallowed.

Only orchestrace's own code is guarded; the user's function is always called outside these guards so that
its exceptions keep their identity and traceback.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

logger = logging.getLogger("orchestrace")

_P = ParamSpec("_P")
_R = TypeVar("_R")

_seen: set[tuple[str, str]] = set()
_seen_lock = threading.Lock()


def log_once(where: str, exc: BaseException) -> None:
    """Log an internal error the first time it happens at ``where`` (per exception type), then stay quiet.

    A hot path failing on every call must not flood the application's logs.
    """
    key = (where, type(exc).__name__)
    with _seen_lock:
        if key in _seen:
            return
        _seen.add(key)
    with contextlib.suppress(Exception):  # a broken logging handler must not break the app either
        logger.error("orchestrace: internal error in %s (ignored; further ones are not logged)", where,
                     exc_info=exc)


def failsafe(default: Any) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate one of orchestrace's own functions: any ``Exception`` it raises is logged once and
    ``default`` is returned instead."""

    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        where = f"{func.__module__}.{func.__qualname__}"

        @functools.wraps(func)
        def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                log_once(where, exc)
                return cast(_R, default)

        return guarded

    return decorate
