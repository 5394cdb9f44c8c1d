"""``TraceDirExporter``: the collector's output written in-process, with no collector running.

An OpenTelemetry ``SpanExporter`` (so it composes with any other exporter), added by
``ot.configure(trace_dir=...)``. Finished spans go straight from ``ReadableSpan`` to the collector's ``Span``
(no protobuf round trip) into the same assembler and writer as ``orchestrace collect``. A background thread
completes episodes after the quiet period; ``force_flush`` writes every episode whose root span has ended,
``shutdown`` writes everything. Like all of orchestrace's instrumentation it never raises into the
application: a directory it cannot create or write to is logged once, and the exporter then drops what it is
given (other exporters are not affected).

What earlier runs wrote into the directory: as every writer of it does (``output_log.OutputLog``), the
exporter replays ``OUT/wal`` at start-up, so a span of an episode an earlier process wrote there makes its
next revision, and logs the spans it retains there at shutdown. Another process writing the directory
meanwhile holds it: the exporter then writes as if the directory were new (logged).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from orchestrace_collector.assemble import Assembler, Converter, EpisodeConverter, EpisodeHook
from orchestrace_collector.output import TraceDirWriter
from orchestrace_collector.output_log import OutputLog
from orchestrace_collector.spans import Span, SpanEvent, SpanLink
from orchestrace_collector.wal import WriteAheadLog

log = logging.getLogger(__name__)


def span_from_readable(span: ReadableSpan) -> Span:
    context = span.context
    scope = span.instrumentation_scope
    return Span(
        trace_id=format(context.trace_id, "032x") if context else "0" * 32,
        span_id=format(context.span_id, "016x") if context else "0" * 16,
        parent_span_id=format(span.parent.span_id, "016x") if span.parent else None,
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        kind=span.kind.value + 1,  # the Python API counts from INTERNAL=0, OTLP from INTERNAL=1
        attributes=dict(span.attributes or {}),
        events=tuple(
            SpanEvent(name=e.name, time_ns=e.timestamp or 0, attributes=dict(e.attributes or {}))
            for e in span.events
        ),
        links=tuple(
            SpanLink(
                trace_id=format(lk.context.trace_id, "032x"),
                span_id=format(lk.context.span_id, "016x"),
                attributes=dict(lk.attributes or {}),
            )
            for lk in span.links
        ),
        status_code=span.status.status_code.value,
        status_message=span.status.description or "",
        resource=dict(span.resource.attributes) if span.resource else {},
        scope=scope.name if scope else "",
    )


class TraceDirExporter(SpanExporter):
    def __init__(
        self,
        out_dir: str | Path,
        *,
        quiet_period_s: float = 2.0,
        idle_timeout_s: float = 300.0,
        credit: str = "causal",
        converter: Converter | None = None,
        hook: EpisodeHook | None = None,
    ) -> None:
        self._out_dir = Path(out_dir)
        self._stop = threading.Event()
        self._warned = False
        self._assembler: Assembler | None = None
        try:
            self._writer = TraceDirWriter(self._out_dir)
        except OSError as exc:  # a path under a file, a directory it may not create
            self._unusable(str(exc))
            return
        if not os.access(self._out_dir, os.W_OK | os.X_OK):
            self._writer.close()
            self._unusable("not writable")
            return

        def build(wal: WriteAheadLog | None) -> Assembler:
            return Assembler(
                self._writer,
                quiet_period_s=quiet_period_s,
                idle_timeout_s=idle_timeout_s,
                converter=converter or EpisodeConverter(credit),
                hook=hook,
                wal=wal,
            )

        self._output = _open_output(self._writer.out_dir, build)
        self._assembler = self._output.assembler if self._output is not None else build(None)
        if self._output is not None:
            try:
                self._output.replay()
            except Exception:
                log.exception("orchestrace: TraceDirExporter could not read %s", self._output.wal.directory)
        self._ticker = threading.Thread(
            target=self._tick_loop, args=(self._assembler,), name="orchestrace-trace-dir", daemon=True
        )
        self._ticker.start()

    def _unusable(self, why: str) -> None:
        """The directory cannot be written: no traces go there for this exporter's life (every span would be
        held in memory for writes that keep failing); the application and its other exporters go on."""
        log.error("orchestrace: trace_dir %s cannot be written (%s): no orchestration traces are written "
                  "there; other exporters still get every span", self._out_dir, why)

    @property
    def out_dir(self) -> Path:
        return self._out_dir

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._assembler is None:
            return SpanExportResult.FAILURE
        try:
            self._assembler.add([span_from_readable(s) for s in spans])
        except Exception:
            self._warn("could not record spans")
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self._assembler is None:
            return True  # nothing held
        try:
            self._assembler.flush(only_ended=True)
        except Exception:
            self._warn("could not flush traces")
            return False
        return True

    def shutdown(self) -> None:
        if self._stop.is_set() or self._assembler is None:
            return
        self._stop.set()
        self._ticker.join(timeout=5.0)
        try:
            if self._output is not None:
                self._output.finish()
            else:
                self._assembler.flush()
        except Exception:
            self._warn("could not write traces at shutdown")
        finally:
            self._writer.close()

    def _tick_loop(self, assembler: Assembler) -> None:
        interval = min(0.5, max(0.05, assembler.quiet_period_s / 4))
        while not self._stop.wait(interval):
            try:
                assembler.tick()
            except Exception:
                self._warn("could not write a trace")

    def _warn(self, what: str) -> None:
        # Logged once with the traceback, then silent: the application must not drown in our errors.
        if not self._warned:
            self._warned = True
            log.exception("orchestrace: TraceDirExporter %s in %s", what, self.out_dir)


def _open_output(out_dir: Path, build: Callable[[WriteAheadLog], Assembler]) -> OutputLog | None:
    try:
        return OutputLog(out_dir, build)
    except OSError as exc:  # held by another process (LogInUse), or its files unreadable
        # Info, not a warning: processes of one run sharing a directory (parallel rollouts) is a usual setup,
        # and each still writes all it gets, as before.
        log.info("orchestrace: trace_dir writes without what earlier runs wrote there (%s)", exc)
        return None
