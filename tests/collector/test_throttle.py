"""Refusals are logged once per reason per interval, with how many were held back."""

from __future__ import annotations

import logging

import pytest
from orchestrace_collector.throttle import ThrottledLog


def test_one_line_per_reason_per_interval_with_the_count_held_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    throttled = ThrottledLog(logging.getLogger("throttle-test"), interval_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, logger="throttle-test"):
        for _ in range(257):  # a second of refusals
            throttled.log(logging.ERROR, "wal", "append failed: %s", "disk full")
        throttled.log(logging.ERROR, "other", "another reason")
        now[0] = 10.5
        throttled.log(logging.ERROR, "wal", "append failed: %s", "disk full")
    assert [r.getMessage() for r in caplog.records] == [
        "append failed: disk full",
        "another reason",
        "append failed: disk full (256 more like it in the last 10 s)",
    ]
