"""``OutputLog``: the one lifecycle of what an output directory remembers, shared by collect, convert and
trace_dir (each of those is tested through its own command elsewhere)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from collector_fixtures import record_run, validate_trace_dir
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from orchestrace_collector.assemble import WRITTEN_INDEX, Assembler
from orchestrace_collector.inprocess import TraceDirExporter, span_from_readable
from orchestrace_collector.output import WAL_DIR, TraceDirWriter
from orchestrace_collector.output_log import OutputLog
from orchestrace_collector.spans import Span
from orchestrace_collector.wal import LogInUse, WriteAheadLog


def _run(out: Path, spans: list[Span]) -> tuple[int, int]:
    """One run on ``out`` (as ``convert`` makes it): what it wrote and the spans it absorbed as copies."""
    writer = TraceDirWriter(out)
    try:
        with OutputLog(out, lambda wal: Assembler(writer, wal=wal)) as output:
            output.replay()
            replayed = output.assembler.duplicates
            output.assembler.add(spans)
        return writer.written, output.assembler.duplicates - replayed
    finally:
        writer.close()


def test_each_run_on_an_output_continues_what_the_runs_before_wrote(tmp_path: Path) -> None:
    spans = [span_from_readable(s) for s in record_run("runs", tools=3)]  # type: ignore[arg-type]
    late = replace(next(s for s in spans if s.parent_span_id is not None), span_id="00000000000000ff")
    assert _run(tmp_path, spans) == (1, 0)
    assert _run(tmp_path, [late]) == (1, 0)  # the next revision, with every span
    assert _run(tmp_path, [late, *spans]) == (0, len(spans) + 1)  # all written already: absorbed
    ((trace_id, trace),) = validate_trace_dir(tmp_path).items()
    assert trace_id == spans[0].trace_id
    assert (trace["metrics"]["revision"], trace["metrics"]["spans"]) == (1, len(spans) + 1)


def test_one_run_at_a_time_and_the_log_let_go_however_a_run_ends(tmp_path: Path) -> None:
    writer = TraceDirWriter(tmp_path)
    spans = [span_from_readable(s) for s in record_run("held")]  # type: ignore[arg-type]

    def build(wal: WriteAheadLog) -> Assembler:
        return Assembler(writer, wal=wal)

    held = OutputLog(tmp_path, build)
    with pytest.raises(LogInUse, match="in use by another process"):
        OutputLog(tmp_path, build)
    held.close()

    def failing(wal: WriteAheadLog) -> Assembler:
        raise RuntimeError("the builder's own error")

    with pytest.raises(RuntimeError, match="the builder's own error"):
        OutputLog(tmp_path, failing)
    with pytest.raises(ValueError, match="the run's own error"), OutputLog(tmp_path, build) as output:
        output.assembler.add(spans)
        raise ValueError("the run's own error")
    assert writer.written == 0, "a run that fails writes nothing more"
    OutputLog(tmp_path, build).finish()  # nobody holds the log any more
    writer.close()


def test_a_trace_dir_whose_output_log_cannot_be_read_writes_as_if_it_were_new(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Instrumentation never raises into the application: an unreadable ``written.idx`` (here a directory)
    costs what earlier runs wrote there, logged, and the exporter writes all it gets."""
    (tmp_path / WAL_DIR / WRITTEN_INDEX).mkdir(parents=True)
    with caplog.at_level(logging.INFO):
        exporter = TraceDirExporter(tmp_path, quiet_period_s=60)
    assert "without what earlier runs wrote there" in caplog.text
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("output-log-test")
    with tracer.start_as_current_span("invoke_workflow team"), tracer.start_as_current_span("step"):
        pass
    provider.shutdown()
    assert len(validate_trace_dir(tmp_path)) == 1
