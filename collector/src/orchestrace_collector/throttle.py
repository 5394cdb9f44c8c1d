"""Log lines for refusals, at most one per reason per interval, with how many were held back: a flood of
refused requests (a full disk answers every request 503) must not become a flood of log lines."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


class ThrottledLog:
    def __init__(
        self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._since: dict[str, tuple[float, int]] = {}  # reason -> (last line logged at, held back since)

    def log(self, level: int, reason: str, message: str, *args: object) -> None:
        """Log ``message`` unless ``reason`` was logged less than ``interval_s`` ago (then count it)."""
        now = self.clock()
        with self._lock:
            since, held = self._since.get(reason, (float("-inf"), 0))
            if now - since < self.interval_s:
                self._since[reason] = (since, held + 1)
                return
            self._since[reason] = (now, 0)
        if held:
            message += " (%d more like it in the last %.0f s)"
            args = (*args, held, now - since)
        self.logger.log(level, message, *args)
