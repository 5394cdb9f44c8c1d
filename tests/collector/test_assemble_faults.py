"""Assembly under faults: a failing writer keeps the episode, revisions survive a restart, span conflicts
are counted, and the open-episode and byte bounds write the oldest episodes instead of growing."""

from __future__ import annotations

import errno
import json
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from collector_fixtures import record_run
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from orchestrace_collector import ingest as ingest_module
from orchestrace_collector.assemble import Assembler, ConvertedEpisode
from orchestrace_collector.encode import request_from_spans
from orchestrace_collector.ingest import Ingest, Overloaded
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.output import TraceDirWriter, latest_traces
from orchestrace_collector.spans import Span
from orchestrace_collector.wal import WriteAheadLog
from test_assemble import Clock, Sink


@dataclass
class FlakySink(Sink):
    """Fails with ``OSError`` (disk full) while ``failing``."""

    failing: bool = True

    def write_episode(self, episode: ConvertedEpisode, *, revision: int = 0) -> None:
        if self.failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        super().write_episode(episode, revision=revision)


def spans_of(task_id: str, **kwargs: object) -> list[Span]:
    return [span_from_readable(s) for s in record_run(task_id, **kwargs)]  # type: ignore[arg-type]


def test_a_failing_write_keeps_the_episode_and_retries() -> None:
    sink, clock = FlakySink(), Clock()
    assembler = Assembler(sink, quiet_period_s=1, retry_s=5, clock=clock)
    spans = spans_of("flaky")
    assembler.add(spans)
    clock.now += 2
    assert assembler.tick() == 0
    assert assembler.open_episodes == 1 and assembler.storage_error is not None
    assert "No space" in assembler.storage_error and assembler.failed == 0
    sink.failing = False
    clock.now += 1
    assert assembler.tick() == 0, "retried only after retry_s"
    clock.now += 5
    assert assembler.tick() == 1 and assembler.storage_error is None
    ((trace, revision),) = sink.written
    assert revision == 0 and trace.metrics["spans"] == len(spans)


def test_span_id_seen_again_with_other_content_keeps_the_first() -> None:
    sink, clock = FlakySink(failing=False), Clock()
    assembler = Assembler(sink, quiet_period_s=1, clock=clock)
    spans = spans_of("conflict")
    tool = next(s for s in spans if s.name.startswith("execute_tool"))
    forged = replace(tool, attributes={**tool.attributes, "gen_ai.tool.name": "forged"})
    assembler.add(spans)
    assembler.add(spans)  # an exporter retry: the same content, no conflict
    assembler.add([forged])
    assembler.flush()
    ((trace, _),) = sink.written
    assert trace.metrics["spans"] == len(spans) and trace.metrics["span_conflicts"] == 1
    assert "forged" not in trace.model_dump_json()


def _collector_parts(tmp_path: Path, **kwargs: object) -> tuple[WriteAheadLog, Assembler, Ingest]:
    wal = WriteAheadLog(tmp_path / "wal", segment_bytes=1000)
    assembler = Assembler(TraceDirWriter(tmp_path), quiet_period_s=0, wal=wal, **kwargs)  # type: ignore[arg-type]
    return wal, assembler, Ingest(wal, assembler)


def _late_span(spans: list[Span]) -> Span:
    child = next(s for s in spans if s.parent_span_id is not None)
    return replace(child, span_id="00000000000000ff")


def test_a_late_span_after_a_restart_merges_into_the_retained_trace(tmp_path: Path) -> None:
    readable = record_run("restart-late", tools=3)
    spans = [span_from_readable(s) for s in readable]  # type: ignore[arg-type]
    wal, assembler, ingest = _collector_parts(tmp_path)
    ingest.submit(encode_spans(readable))
    ingest.start()
    ingest.stop()  # written, and its WRITTEN marker logged
    wal.close()
    wal, assembler, ingest = _collector_parts(tmp_path)
    ingest.replay()  # rebuilds the written episode from the WAL, as retained
    assert assembler.open_episodes == 0
    assembler.add([_late_span(spans)])
    assert assembler.flush() == 1
    wal.close()
    trace = latest_traces([tmp_path])[spans[0].trace_id]
    assert trace["metrics"]["revision"] == 1 and trace["metrics"]["spans"] == len(spans) + 1


def test_a_late_span_for_a_forgotten_episode_never_supersedes_it(tmp_path: Path) -> None:
    spans = spans_of("forgotten", tools=3)
    wal, assembler, _ = _collector_parts(tmp_path, retain_spans=0)
    for index in range(5):  # enough segments that the episode's one is retired
        assembler.add(spans_of(f"filler-{index}"), segment=wal.segments[-1])
    assembler.add(spans)
    assembler.flush()
    wal.close()
    assert (tmp_path / "wal" / "written.idx").exists()
    wal, assembler, _ = _collector_parts(tmp_path, retain_spans=0)
    assembler.add([_late_span(spans)])
    assembler.flush()
    wal.close()
    latest = latest_traces([tmp_path])
    full = latest[spans[0].trace_id]
    assert full["metrics"]["revision"] == 0 and full["metrics"]["spans"] == len(spans), "not superseded"
    fragment = latest[f"{spans[0].trace_id}.late1"]
    assert fragment["metrics"]["spans"] == 1
    assert fragment["task_id"] == full["task_id"] == "forgotten"  # from written.idx, after the restart
    lines = [json.loads(line) for line in (tmp_path / "traces-00000.jsonl").read_text().splitlines()]
    assert all(isinstance(t["metrics"]["revision"], int) for t in lines)


def test_a_straggler_of_a_forgotten_task_is_its_fragment_not_an_episode(tmp_path: Path) -> None:
    """Only a task's own span names its episode: a straggler's span (under the task's span, its OTel trace
    alone) for an episode written and let go, after a restart, is still that episode's fragment, of its task,
    never an episode keyed by the OTel trace id (``written.idx`` keeps the episode's OTel traces)."""
    readable = record_run("forgotten-task", tools=2, episode_id="episode-7")
    spans = [span_from_readable(s) for s in readable]  # type: ignore[arg-type]
    late = _late_span(spans)
    assert "orchestrace.episode.id" not in late.attributes
    for _ in range(2):  # the collector stopped in between: the second only knows ``written.idx``
        wal, assembler, _ = _collector_parts(tmp_path, retain_spans=0)
        assembler.add(spans if assembler.duplicates == 0 and not latest_traces([tmp_path]) else [late])
        assembler.flush()
        wal.close()
    latest = latest_traces([tmp_path])
    assert set(latest) == {"episode-7", "episode-7.late1"}
    assert latest["episode-7.late1"]["task_id"] == latest["episode-7"]["task_id"] == "forgotten-task"
    assert latest["episode-7.late1"]["metrics"]["spans"] == 1


def test_open_episode_cap_writes_the_oldest_as_they_are() -> None:
    sink, clock = FlakySink(failing=False), Clock()
    assembler = Assembler(sink, max_open_episodes=2, clock=clock)
    for index in range(5):
        assembler.add([s for s in spans_of(f"open-{index}") if s.parent_span_id is not None])
        clock.now += 1
    assert assembler.tick() == 3 and assembler.open_episodes == 2
    assert all(any(e.incomplete for e in t.events) for t, _ in sink.written)


def test_byte_bound_lets_retained_go_then_writes_the_oldest_open() -> None:
    sink, clock = FlakySink(failing=False), Clock()
    assembler = Assembler(sink, quiet_period_s=1, max_bytes=10_000, clock=clock)
    assembler.add(spans_of("done"), nbytes=3_000)
    clock.now += 2
    assert assembler.tick() == 1 and assembler.retained_bytes == 3_000
    for index in range(4):
        assembler.add([s for s in spans_of(f"big-{index}") if s.parent_span_id is not None], nbytes=3_000)
    assert assembler.tick() == 2, "12 kB open: the two oldest are written"
    assert assembler.open_bytes == 6_000
    # The first episode was let go; of the two written, the newer one fits in the retained third of the bound.
    assert assembler.retained_bytes == 3_000
    assembler.add(spans_of("large"), nbytes=4_000)
    clock.now += 2
    assert assembler.tick() == 1 and assembler.retained_bytes == 0, "over a third of the bound: not retained"


def test_an_episode_past_a_third_of_the_byte_bound_is_written_in_parts() -> None:
    """Converting an episode costs a few times what its spans hold: one that keeps growing is written as it
    is once past a third of the bound (its conversion stays small), and its later spans make fragments."""
    sink, clock = FlakySink(failing=False), Clock()
    assembler = Assembler(sink, quiet_period_s=1, max_bytes=9_000, clock=clock)  # type: ignore[arg-type]
    spans = spans_of("huge", tools=7)  # 9 spans, root last
    root = spans[-1]
    assert root.parent_span_id is None
    assembler.add(spans[:4], nbytes=2_800)
    assert assembler.tick() == 0, "a third of the bound: still open"
    assembler.add(spans[4:6], nbytes=1_000)
    assert assembler.tick() == 1, "past a third: written as it is, though its root has not ended"
    assembler.add(spans[6:], nbytes=1_500)
    clock.now += 2
    assert assembler.tick() == 1
    (first, _), (second, _) = sink.written
    assert first.trace_id == root.trace_id and second.trace_id == f"{root.trace_id}.late1"
    assert (first.metrics["spans"], second.metrics["spans"]) == (6, 3), "every span in one part"
    assert first.metrics["incomplete"] == 1 and assembler.open_bytes == 0


def test_a_large_request_kept_out_by_held_spans_makes_room(tmp_path: Path) -> None:
    """Held spans under the assembler's bound can still keep a large request out (it needs its cost free
    under three quarters of the limit): its refusal makes the assembler write the oldest open episodes,
    rather than waiting for their idle timeout while their senders are refused."""
    wal = WriteAheadLog(tmp_path / "wal")
    clock = Clock()
    assembler = Assembler(TraceDirWriter(tmp_path), quiet_period_s=1, wal=wal, clock=clock)
    ingest = Ingest(wal, assembler, memory_limit_bytes=1_600_000)  # the assembler's bound: 1.2 MB
    for index in range(4):
        assembler.add([s for s in spans_of(f"held-{index}") if s.parent_span_id is not None], nbytes=281_000)
    assert assembler.tick() == 0, "1.124 MB held: under the bound"
    body = 20_000  # 160 kB as estimated while it is read
    assert not ingest.try_reserve(body)
    assert assembler.tick() == 1 and assembler.open_bytes < 900_000, "the oldest written to make room"
    assert ingest.try_reserve(body)
    assert assembler.tick() == 0, "room is made once"
    wal.close()

def _episode_spans(out: Path) -> dict[str, int]:
    return {t["trace_id"]: t["metrics"]["spans"] for t in latest_traces([out]).values()}


def test_a_long_open_episode_does_not_pin_the_wal_and_survives_a_crash(tmp_path: Path) -> None:
    """Compaction while running: the long-open episode's spans are logged again at the end of the WAL (not
    written early), the segments of written episodes go, and a crash then loses nothing."""
    wal = WriteAheadLog(tmp_path / "wal", segment_bytes=2_000, max_bytes=8_000)
    writer = TraceDirWriter(tmp_path)
    clock = Clock()
    assembler = Assembler(writer, quiet_period_s=1, wal=wal, clock=clock)
    ingest = Ingest(wal, assembler)
    ingest.start()
    never_ends = [s for s in record_run("never-ends") if s.parent is not None]
    key = f"{never_ends[0].context.trace_id:032x}"
    try:
        ingest.submit(encode_spans(never_ends))
        for index in range(40):
            ingest.submit(encode_spans(record_run(f"short-{index}")))
            clock.now += 2
            time.sleep(0.02)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (
            wal.total_bytes > 2 * wal.max_bytes or assembler.open_episodes > 1 or writer.written < 40
        ):
            clock.now += 2
            time.sleep(0.1)
        assert wal.total_bytes <= 2 * wal.max_bytes, f"WAL at {wal.total_bytes} bytes"
        assert min(wal.segments) > 1, "the never-ending episode's first segment was deleted"
        assert key not in _episode_spans(tmp_path), "logged again, not written early"
        assert assembler.open_episodes == 1
    finally:
        ingest._queue.put(None)  # a crash: nothing flushed at stop
        ingest._thread.join()
        wal.close()
        writer.close()
    wal = WriteAheadLog(tmp_path / "wal")
    writer = TraceDirWriter(tmp_path)
    assembler = Assembler(writer, wal=wal)
    Ingest(wal, assembler).replay()
    assert assembler.open_episodes == 1
    assembler.flush()
    wal.close()
    writer.close()
    written = _episode_spans(tmp_path)
    assert written[key] == len(never_ends), "the long-open episode came back whole"
    assert {f"short-{i}" for i in range(40)} <= {t["task_id"] for t in latest_traces([tmp_path]).values()}


def _logged(wal: WriteAheadLog, spans: list[Span]) -> int:
    """Log a batch as a receiver does (its segment handed to assembly at once)."""
    segment, _ = wal.append(request_from_spans(spans).SerializeToString())
    wal.done(segment)
    return segment


def test_a_reopened_episode_keeps_its_revision_through_compaction_and_a_crash(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path / "wal", segment_bytes=1_000, max_bytes=12_000)
    writer = TraceDirWriter(tmp_path)
    assembler = Assembler(writer, quiet_period_s=0, wal=wal)
    spans = spans_of("reopened", tools=3)
    first = _logged(wal, spans)
    assembler.add(spans, first)
    assembler.tick()  # revision 0 written
    late = _late_span(spans)
    assembler.add([late], _logged(wal, [late]))  # open again, as revision 1
    for index in range(16):  # other traffic fills the WAL past its limit
        _logged(wal, spans_of(f"filler-{index}"))
    assembler.quiet_period_s = 1e9  # keeps the reopened episode open while the WAL is compacted
    assembler.tick()
    assert assembler.open_episodes == 1
    assert min(wal.segments) > first, "its segment went: its spans were logged again"
    wal.close()
    wal = WriteAheadLog(tmp_path / "wal")
    assembler = Assembler(writer, wal=wal)
    Ingest(wal, assembler).replay()
    assembler.flush()
    wal.close()
    writer.close()
    trace = latest_traces([tmp_path])[spans[0].trace_id]
    assert trace["metrics"]["revision"] == 1 and trace["metrics"]["spans"] == len(spans) + 1


def test_a_batch_logged_while_its_episode_was_written_is_not_lost_in_a_crash(tmp_path: Path) -> None:
    """The WAL holds batch A, batch B, then the WRITTEN marker of a write that had only A (B was acknowledged
    while the episode was being written, and a crash came before B was assembled)."""
    wal = WriteAheadLog(tmp_path / "wal")
    writer = TraceDirWriter(tmp_path)
    assembler = Assembler(writer, quiet_period_s=0, wal=wal)
    spans = spans_of("racing", tools=3)
    assembler.add(spans, _logged(wal, spans))
    _logged(wal, [_late_span(spans)])  # B: logged, never assembled
    assembler.flush()  # writes A only; its marker follows B in the log
    wal.close()
    wal = WriteAheadLog(tmp_path / "wal")
    assembler = Assembler(writer, wal=wal)
    Ingest(wal, assembler).replay()
    assert assembler.open_episodes == 1, "more spans than the marker counted: still open"
    assembler.flush()
    wal.close()
    writer.close()
    trace = latest_traces([tmp_path])[spans[0].trace_id]
    assert trace["metrics"]["revision"] == 1 and trace["metrics"]["spans"] == len(spans) + 1


def test_the_written_index_stays_bounded_while_running(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path / "wal")
    writer = TraceDirWriter(tmp_path)
    assembler = Assembler(writer, quiet_period_s=0, wal=wal, max_known_episodes=5)
    index = tmp_path / "wal" / "written.idx"
    for number in range(40):
        assembler.add(spans_of(f"indexed-{number}", tools=1))
        assembler.tick()
        assert len(index.read_text().splitlines()) <= 10
    wal.close()
    known = [json.loads(line)["key"] for line in index.read_text().splitlines()]
    newest = [t["trace_id"] for t in latest_traces([tmp_path]).values()][-5:]
    assert set(newest) <= set(known)
    restarted = Assembler(writer, wal=WriteAheadLog(tmp_path / "wal"), max_known_episodes=5)
    assert set(restarted._written) == set(newest)



def test_the_written_index_keeps_where_each_write_ends_in_the_log(tmp_path: Path) -> None:
    """A write's entry holds the WAL position of its last batch (what a replay trusts to let a torn log's
    remains of it go); an entry written before positions were kept still loads, without one."""
    wal, assembler, ingest = _collector_parts(tmp_path)
    ingest.submit(encode_spans(record_run("positioned")))
    ingest.start()
    ingest.stop()
    wal.close()
    index = tmp_path / "wal" / "written.idx"
    (entry,) = [json.loads(line) for line in index.read_text().splitlines()]
    revision, late, spans, _digest, segment, offset = entry["written"]
    assert (revision, late, spans) == (0, 0, 4) and segment >= 1 and offset > 0
    index.write_text(json.dumps({**entry, "written": entry["written"][:4]}) + "\n")
    wal, assembler, _ = _collector_parts(tmp_path)
    (write,) = assembler._writes.values()
    assert write.spans == 4 and write.upto is None
    wal.close()

def test_spans_sent_again_are_absorbed_held_let_go_or_after_a_restart(tmp_path: Path) -> None:
    spans = spans_of("sent-again", tools=3)
    root = next(s for s in spans if s.parent_span_id is None)
    wal, assembler, _ = _collector_parts(tmp_path, retain_spans=len(spans))
    assembler.add(spans)
    assert assembler.flush() == 1
    assembler.add(spans)  # retained: every span already held
    assert assembler.open_episodes == 0
    assembler.add(spans_of("other", tools=3))  # lets the first go
    assembler.flush()
    assembler.add([root])  # let go: remembered by its spans' ids
    assert assembler.open_episodes == 0 and assembler.duplicates == len(spans) + 1
    wal.close()
    wal, assembler, _ = _collector_parts(tmp_path, retain_spans=0)  # a restart forgets the ids
    assembler.add(spans)
    assert assembler.flush() == 1  # settled as the write written.idx records: nothing written
    wal.close()
    wal, assembler, _ = _collector_parts(tmp_path, retain_spans=0)
    assembler.add([*spans, _late_span(spans)])  # the whole episode again, and one new span
    assembler.flush()
    wal.close()
    lines = [json.loads(line) for line in (tmp_path / "traces-00000.jsonl").read_text().splitlines()]
    assert [(t["trace_id"], t["metrics"]["revision"]) for t in lines if t["task_id"] == "sent-again"] == [
        (root.trace_id, 0),
        (root.trace_id, 1),  # the next revision of the whole trace, not a fragment
    ]
    assert lines[-1]["metrics"]["spans"] == len(spans) + 1


def test_decoded_batches_waiting_for_assembly_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``max_queued_bytes`` of decoded batches queued for assembly, a request waits, before it is
    decoded or logged, until the assembly thread takes batches off; one that waits too long is refused
    unlogged (503, the sender retries). Every accepted span is written, once."""
    assert (ingest_module.MAX_QUEUED_BYTES, ingest_module.QUEUE_WAIT_S) == (32 << 20, 5), "docs/collector.md"
    monkeypatch.setattr(ingest_module, "QUEUE_WAIT_S", 0.2)
    wal = WriteAheadLog(tmp_path / "wal")
    writer = TraceDirWriter(tmp_path)
    assembler = Assembler(writer, quiet_period_s=0, wal=wal)
    runs = [record_run(f"bounded-{index}") for index in range(8)]
    ingest = Ingest(wal, assembler, max_queued_bytes=1)
    ingest.submit(encode_spans(runs[0]))  # nothing queued: room
    with pytest.raises(Overloaded, match="assembly behind"):
        ingest.submit(encode_spans(runs[1]))  # no assembly thread yet: no room comes
    assert ingest.accepted_spans == len(runs[0]), "the refused batch was not logged"
    ingest.start()  # now each waiting request gets its turn as the queue drains
    senders = [threading.Thread(target=ingest.submit, args=(encode_spans(run),)) for run in runs[1:]]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    ingest.stop()
    assert ingest.accepted_spans == sum(map(len, runs))
    written = {t["task_id"]: t["metrics"]["spans"] for t in latest_traces([tmp_path]).values()}
    assert written == {f"bounded-{index}": len(run) for index, run in enumerate(runs)}
    wal.close()
