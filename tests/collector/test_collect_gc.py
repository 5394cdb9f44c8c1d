"""The process settings the collector changes while it serves (switch interval, signal handlers, the cyclic
garbage collector's thresholds and frozen objects), and that it puts them back however it stops."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest
from orchestrace_collector import collect
from orchestrace_collector.assemble import Assembler
from orchestrace_collector.collect import CollectorOptions, run_collector
from orchestrace_collector.convert.gcpause import SERVING_THRESHOLDS, gc_tuned_for_serving
from orchestrace_collector.output import WAL_DIR, TraceDirWriter
from orchestrace_collector.output_log import OutputLog
from orchestrace_collector.wal import KIND_WRITTEN, LogInUse, WriteAheadLog


def test_serving_freezes_start_up_objects_and_sets_rare_passes() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with gc_tuned_for_serving():
        assert gc.get_threshold() == SERVING_THRESHOLDS
        assert SERVING_THRESHOLDS[0] > before[0]
        assert gc.get_freeze_count() > 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == (before, 0)
    # A caller that froze objects itself keeps them frozen.
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_tuned_for_serving():
            pass
        assert gc.get_freeze_count() >= frozen > 0
    finally:
        gc.unfreeze()


def _settings() -> tuple[Any, ...]:
    return (sys.getswitchinterval(), gc.get_threshold(), gc.get_freeze_count(),
            signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))


def _held(out: Path) -> Callable[[], None]:
    """Another writer holds OUT (a collector or a convert): found once the ports are bound."""
    writer = TraceDirWriter(out)
    held = OutputLog(out, lambda wal: Assembler(writer, wal=wal))

    def release() -> None:
        held.close()
        writer.close()

    return release


def _unreadable_marker(out: Path) -> Callable[[], None]:
    """The log holds a written marker that is not JSON: its replay fails, after the GC was tuned."""
    wal = WriteAheadLog(out / WAL_DIR)
    wal.append(b"not json", KIND_WRITTEN)
    wal.close()
    return lambda: None


@pytest.mark.parametrize(("setup", "error"), [(_held, LogInUse), (_unreadable_marker, json.JSONDecodeError)])
def test_a_collector_that_fails_before_serving_puts_back_what_it_changed(
        tmp_path: Path, setup: Callable[[Path], Callable[[], None]], error: type[Exception]) -> None:
    """An in-process ``run_collector`` that raises before it serves leaves the process as it found it.
    Before, it kept the 0.5 ms switch interval, its signal handlers (SIGINT no longer interrupted the
    caller) and, failing after the replay started, the thresholds (50000, 10, 10) and the frozen objects."""
    gc.set_threshold(700, 10, 10)
    before = _settings()
    assert before[2] == 0 and before[0] != 0.0005
    sockets = _sockets()
    release = setup(tmp_path)
    try:
        with pytest.raises(error):
            run_collector(CollectorOptions(out=tmp_path, port=0, grpc_port=0))
    finally:
        release()
    assert _settings() == before
    # And what it opened is let go: its two listening sockets, and OUT's log (a retry in the same process
    # can take it). Before, a failing replay left both ports bound and OUT locked.
    assert _sockets() <= sockets
    writer = TraceDirWriter(tmp_path)
    OutputLog(tmp_path, lambda wal: Assembler(writer, wal=wal)).close()
    writer.close()


@pytest.mark.parametrize("failing", ["make_server", "serve_grpc"])
def test_a_collector_failing_once_it_serves_lets_go_of_both_ports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """It fails after the hand-over to the ordered shutdown: its HTTP server cannot be made once gRPC
    serves (a TLS key uvicorn cannot load, say), or gRPC cannot be served. The shutdown runs, the HTTP socket
    uvicorn never took is closed and the gRPC server that never started lets go of its port (before: both
    stayed open in the process)."""
    sockets = _sockets()

    def cannot(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError(f"no {failing}")

    monkeypatch.setattr(collect, failing, cannot)
    try:
        run_collector(CollectorOptions(out=tmp_path, port=0, grpc_port=0))
    except RuntimeError as exc:  # its traceback (the failed call's frames) still held, as a caller holds it
        assert str(exc) == f"no {failing}"
        assert _sockets() <= sockets
    else:
        pytest.fail("run_collector returned")


def _sockets() -> set[str]:
    """The inodes of the process's listening TCP sockets, from /proc."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            listening |= {row.split()[9] for row in list(rows)[1:] if row.split()[3] == "0A"}
    own = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # closed while listed
            own.add(os.readlink(fd))
    return {link[8:-1] for link in own if link.startswith("socket:")} & listening
