"""The collector pause around conversions leaves the process's GC state as it found it, across threads."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest
from convert_support import Spans
from orchestrace_collector.convert import convert_episode, gcpause
from orchestrace_collector.spans import Span


@pytest.fixture(autouse=True)
def gc_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def _spans() -> list[Span]:
    s = Spans()
    s.tool("t", 1, 2, s.agent("a", 0, 3))
    return s.spans


def test_conversion_restores_the_state_it_found() -> None:
    convert_episode(_spans())
    assert gc.isenabled()
    gc.disable()  # an application that runs without the cyclic collector keeps it off
    convert_episode(_spans())
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(ValueError):
        convert_episode([])
    assert gc.isenabled()


def test_overlapping_conversions_share_one_pause() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with gcpause.gc_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with gcpause.gc_paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first left"] = gc.isenabled()
        seen["after both left"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first left": False, "after both left": True}


def test_a_late_conversion_does_not_extend_a_long_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcpause, "MAX_SHARED_PAUSE_S", 0.0)
    with gcpause.gc_paused():
        with gcpause.gc_paused():  # too late to join: leaving it must not end the first one's pause...
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()  # ...and the first one's end restores the collector
