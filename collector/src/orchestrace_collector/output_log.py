"""What an output directory remembers (``OUT/wal``), held by one writer at a time.

Every writer of an output directory (``orchestrace collect``, ``orchestrace convert``, the in-process
``trace_dir``) goes through :class:`OutputLog`, so each keeps the one late-span rule (``assemble.py``): open
the log exclusively (:class:`~orchestrace_collector.wal.LogInUse` while another process holds it), build the
run's assembler on it, :meth:`~OutputLog.replay` what earlier runs left, and at the end either
:meth:`~OutputLog.finish` (a run that ends: every open episode written, the retained ones logged again for
the next run, the log closed) or :meth:`~OutputLog.close` (the collector, which writes within its shutdown
deadline first and whose log, its spool, is kept bounded while it runs).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from orchestrace_collector.assemble import Assembler
from orchestrace_collector.ingest import replay
from orchestrace_collector.output import WAL_DIR
from orchestrace_collector.wal import SEGMENT_BYTES, FsyncPolicy, WriteAheadLog


class OutputLog:
    """``with OutputLog(out, build) as output:``: :meth:`finish` when the block ends normally, only
    :meth:`close` when it raises (what was not written stays unwritten; the lock is let go either way)."""

    def __init__(
        self,
        out_dir: Path,
        build: Callable[[WriteAheadLog], Assembler],
        *,
        fsync: FsyncPolicy = "none",
        segment_bytes: int = SEGMENT_BYTES,
        max_bytes: int = 0,
    ) -> None:
        """``build``: the run's assembler on the log it is given."""
        self.wal = WriteAheadLog(
            out_dir / WAL_DIR, fsync=fsync, segment_bytes=segment_bytes, max_bytes=max_bytes, exclusive=True
        )
        try:
            self.assembler = build(self.wal)
        except BaseException:
            self.wal.close()
            raise

    def replay(self) -> int:
        """Feed what earlier runs left to the assembler (``ingest.replay``). Returns the batches replayed."""
        return replay(self.assembler, self.wal)

    def finish(self) -> None:
        """Write every open episode, log the retained ones for the next run (``Assembler.keep_retained``),
        close the log (also when writing fails)."""
        try:
            self.assembler.flush()
            self.assembler.keep_retained()
        finally:
            self.wal.close()

    def close(self) -> None:
        """Close the log as it is (the collector's: the episodes still open stay in it for its next start)."""
        self.wal.close()

    def __enter__(self) -> OutputLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.finish()
        else:
            self.close()
