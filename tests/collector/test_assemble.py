"""Assembly: completion after the quiet period, episode stitching, revisions, orphans, bounded memory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from collector_fixtures import record_handover, record_run
from orchestrace import semconv as sc
from orchestrace_collector import convert_spans
from orchestrace_collector.assemble import Assembler, ConvertedEpisode, TraceSink, span_hash
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.model import Trace
from orchestrace_collector.spans import Span
from orchestrace_collector.wal import WriteAheadLog
from typing_extensions import get_protocol_members


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Sink:
    """A sink with the ``TraceSink`` protocol's methods and nothing else."""

    written: list[tuple[Trace, int]] = field(default_factory=list)
    syncs: int = 0

    def write_episode(self, episode: ConvertedEpisode, *, revision: int = 0) -> None:
        self.written.append((episode.trace, revision))

    def sync(self) -> None:
        self.syncs += 1


def spans_of(task_id: str, **kwargs: object) -> list[Span]:
    return [span_from_readable(s) for s in record_run(task_id, **kwargs)]  # type: ignore[arg-type]


def make(**kwargs: object) -> tuple[Assembler, Sink, Clock]:
    sink, clock = Sink(), Clock()
    return Assembler(sink, quiet_period_s=2.0, clock=clock, **kwargs), sink, clock  # type: ignore[arg-type]


def test_written_after_root_ended_and_quiet_period() -> None:
    assembler, sink, clock = make()
    spans = spans_of("t1")
    root = next(s for s in spans if s.parent_span_id is None)
    assembler.add([s for s in spans if s is not root])
    clock.now += 10
    assert assembler.tick() == 0, "the root has not ended: not complete however long it is quiet"
    assembler.add([root])
    clock.now += 1.9
    assert assembler.tick() == 0
    clock.now += 0.2
    assert assembler.tick() == 1
    trace, revision = sink.written[0]
    assert revision == 0 and trace.task_id == "t1" and trace.metrics["spans"] == len(spans)
    assert assembler.open_episodes == 0


def test_late_span_writes_a_new_revision_with_all_spans() -> None:
    assembler, sink, clock = make()
    spans = spans_of("t2")
    late = next(s for s in spans if s.name.startswith("execute_tool"))
    assembler.add([s for s in spans if s is not late])
    clock.now += 3
    assembler.tick()
    assembler.add([late])
    clock.now += 3
    assembler.tick()
    assert [(t.trace_id, r, t.metrics["spans"]) for t, r in sink.written] == [
        (sink.written[0][0].trace_id, 0, len(spans) - 1),
        (sink.written[0][0].trace_id, 1, len(spans)),
    ]


def test_late_span_after_retention_is_a_separate_fragment() -> None:
    assembler, sink, clock = make(retain_spans=0)
    spans = spans_of("t3")
    late = next(s for s in spans if s.name.startswith("execute_tool"))
    assembler.add([s for s in spans if s is not late])
    clock.now += 3
    assembler.tick()
    assembler.add([late])
    assembler.flush()
    first, fragment = sink.written[0][0], sink.written[1][0]
    assert fragment.trace_id == f"{first.trace_id}.late1"
    assert fragment.metrics["spans"] == 1
    assert fragment.task_id == first.task_id == "t3"  # the episode's task, not the OTel trace id


def test_episode_id_stitches_otel_traces_even_when_it_arrives_last() -> None:
    assembler, sink, _ = make()
    first = spans_of("t4", episode_id="thread-7")
    second = spans_of("t4", episode_id="thread-7")
    plain = [s for s in first if s.parent_span_id is not None]  # children do not carry the episode id
    assembler.add(plain)
    assembler.add(second)
    assembler.add([s for s in first if s.parent_span_id is None])
    assembler.flush()
    assert len(sink.written) == 1
    trace = sink.written[0][0]
    assert trace.metrics["spans"] == len(first) + len(second)
    assert {e.otel_trace_id for e in trace.events} == {first[0].trace_id, second[0].trace_id}


def test_a_conversation_id_never_merges_rollouts() -> None:
    # One chat session (or LangGraph thread) holds many rollouts: only orchestrace.episode.id groups traces.
    runs = [spans_of("t5"), spans_of("t5")]
    for spans in runs:
        spans[0].attributes[sc.GEN_AI_CONVERSATION_ID] = "conv-1"
    traces = convert_spans([s for spans in runs for s in spans])
    assert len(traces) == 2 and [t.metrics["spans"] for t in traces] == [4, 4]
    assert {t.task_id for t in traces} == {"t5"}


def test_orphans_are_written_after_the_idle_timeout() -> None:
    assembler, sink, clock = make(idle_timeout_s=30)
    spans = [s for s in spans_of("t6") if s.parent_span_id is not None]  # the root never arrives
    assembler.add(spans)
    clock.now += 29
    assert assembler.tick() == 0
    clock.now += 2
    assert assembler.tick() == 1
    trace = sink.written[0][0]
    assert any(e.incomplete for e in trace.events)


def test_memory_is_bounded_by_open_episodes_and_the_retention_budget() -> None:
    assembler, sink, clock = make(retain_spans=8)
    for index in range(20):
        assembler.add(spans_of(f"m{index}"))
        clock.now += 3
        assembler.tick()
    assert len(sink.written) == 20
    assert assembler.open_episodes == 0
    assert assembler._retained_spans <= 8 and len(assembler._retained) <= 2
    assert len(assembler._trace_keys) <= 2


def test_duplicate_spans_count_once() -> None:
    spans = spans_of("t7")
    traces = convert_spans(spans + spans)
    assert len(traces) == 1 and traces[0].metrics["spans"] == len(spans)


def test_a_converter_failure_is_logged_not_raised() -> None:
    def broken(spans: Sequence[Span]) -> object:
        raise RuntimeError("boom")

    sink, clock = Sink(), Clock()
    assembler = Assembler(sink, converter=broken, clock=clock)
    assembler.add(spans_of("t8"))
    assert assembler.flush() == 1
    assert assembler.failed == 1 and sink.written == []


def _agents(trace: Trace) -> list[tuple[str, str | None]]:
    return [(e.agent, e.to) for e in trace.events if e.type == "spawn"]


@pytest.mark.parametrize("order", ["as ended", "lead first", "root last"])
def test_a_trace_continuing_another_joins_its_episode_whichever_arrives_first(order: str) -> None:
    spans = [span_from_readable(s) for s in record_handover()]  # type: ignore[arg-type]
    process = next(s for s in spans if s.name == "process worker")
    if order == "lead first":
        spans = [s for s in spans if s.trace_id != process.trace_id] + [
            s for s in spans if s.trace_id == process.trace_id]
    elif order == "root last":
        spans = [s for s in spans if s is not process] + [process]
    assembler, sink, _ = make()
    for span in spans:
        assembler.add([span])
    assembler.flush()
    assert len(sink.written) == 1
    trace = sink.written[0][0]
    assert trace.metrics["spans"] == 4
    # The runtime's root runs under the span it links to: the lead hands the worker its work.
    assert _agents(trace) == [("lead", "worker")]


@pytest.mark.parametrize("case", ["links into two traces", "orchestrace's own link"])
def test_a_root_linking_elsewhere_continues_no_trace(case: str) -> None:
    readable = record_handover(links=2) if case == "links into two traces" else record_handover(typed=True)
    assembler, sink, _ = make()
    assembler.add([span_from_readable(s) for s in readable])  # type: ignore[arg-type]
    assembler.flush()
    assert sorted(t.metrics["spans"] for t, _ in sink.written) == [2, 2]


def test_an_episode_id_wins_over_a_continued_trace() -> None:
    spans = [span_from_readable(s) for s in record_handover()]  # type: ignore[arg-type]
    process = next(s for s in spans if s.name == "process worker")
    process.attributes[sc.ORCH_EPISODE_ID] = "ep-own"
    assembler, sink, _ = make()
    assembler.add(spans)
    assembler.flush()
    assert sorted(t.metrics["spans"] for t, _ in sink.written) == [2, 2]


def test_a_trace_continuing_a_written_episode_writes_its_next_revision() -> None:
    # Live collection: the lead's trace is written before the message it sent is processed (a model call
    # later, more than the quiet period).
    spans = [span_from_readable(s) for s in record_handover()]  # type: ignore[arg-type]
    process = next(s for s in spans if s.name == "process worker")
    lead = [s for s in spans if s.trace_id != process.trace_id]
    assembler, sink, clock = make()
    assembler.add(lead)
    clock.now += 3
    assert assembler.tick() == 1 and sink.written[-1][1] == 0
    assembler.add([s for s in spans if s.trace_id == process.trace_id])
    clock.now += 3
    assert assembler.tick() == 1
    trace, revision = sink.written[-1]
    assert revision == 1 and trace.metrics["spans"] == 4
    assert _agents(trace) == [("lead", "worker")]


@pytest.mark.parametrize("shape", ["self-parent", "cycle"])
def test_a_root_that_is_its_own_parent_or_in_a_cycle_completes_at_the_quiet_period(shape: str) -> None:
    from dataclasses import replace

    assembler, sink, clock = make(idle_timeout_s=300)
    spans = spans_of(f"rootless-{shape}")
    root = next(s for s in spans if s.parent_span_id is None)
    if shape == "self-parent":
        hostile = replace(root, parent_span_id=root.span_id)
    else:  # the root's parent is one of its own descendants
        child = next(s for s in spans if s.parent_span_id == root.span_id)
        hostile = replace(root, parent_span_id=child.span_id)
    assembler.add([s for s in spans if s is not root] + [hostile])
    clock.now += 1.9
    assert assembler.tick() == 0, "within the quiet period"
    clock.now += 0.2
    assert assembler.tick() == 1, "written at the quiet period, not after the idle timeout"
    trace = sink.written[0][0]
    assert trace.task_id == f"rootless-{shape}" and trace.metrics["spans"] == len(spans)
    assert trace.metrics.get("incomplete", 0) >= 1 or any(e.incomplete for e in trace.events)


def test_a_span_that_ends_before_it_starts_is_counted() -> None:
    from dataclasses import replace

    spans = spans_of("backwards", tools=2)
    tool = next(s for s in spans if s.name.startswith("execute_tool"))
    skewed = [replace(s, end_ns=s.start_ns - 5_000) if s is tool else s for s in spans]
    (trace,) = convert_spans(skewed)
    assert trace.to_json_dict()["metrics"]["end_before_start"] == 1  # written as an integer
    (clean,) = convert_spans(spans)
    assert "end_before_start" not in clean.metrics


def test_a_sink_with_only_the_protocols_methods_gets_every_episode_and_is_synced(tmp_path: Path) -> None:
    """The assembler calls what ``TraceSink`` declares, nothing it looks up by name: a sink with only
    ``write_episode`` and ``sync`` is given every episode, and synced before a WAL marks them written."""
    # Compiled (mypyc), the class also carries its pickling helpers: nothing a sink implements.
    mypyc_helpers = {"__mypyc_attrs__", "__getstate__", "__setstate__"}
    assert get_protocol_members(TraceSink) - mypyc_helpers == {"write_episode", "sync"}
    sink, clock = Sink(), Clock()
    assembler = Assembler(sink, quiet_period_s=1, clock=clock, wal=WriteAheadLog(tmp_path / "wal"))
    assembler.add(spans_of("synced"))
    clock.now += 2
    assert assembler.tick() == 1 and assembler.failed == 0
    assert [(trace.task_id, revision) for trace, revision in sink.written] == [("synced", 0)]
    assert sink.syncs == 1


def test_a_batch_assembles_as_its_spans_one_by_one() -> None:
    """A batch takes a shorter path for most spans (a new span of a trace whose episode is open); its
    episodes, their spans, hashes, byte counts and duplicates are those of adding each span alone."""
    runs = [record_run("batch-a"), record_run("batch-b", episode_id="batch-episode"), record_run("batch-c")]
    spans = [span_from_readable(s) for group in zip(*runs, strict=False) for s in group]
    spans += spans[:5]  # copies

    def assembled(batches: list[list[Span]]) -> dict[str, tuple[list[Span], list[int], int]]:
        assembler = Assembler(Sink(), quiet_period_s=1, clock=Clock())
        for batch in batches:
            assembler.add(batch, nbytes=100 * len(batch))
        assert assembler.duplicates == 5
        return {k: (list(e.spans.values()), e.hashes, e.nbytes) for k, e in assembler._open.items()}

    whole = assembled([spans])
    assert whole == assembled([[span] for span in spans])
    assert len(whole) == 3 and "batch-episode" in whole
    for batch_spans, hashes, _ in whole.values():
        assert hashes == [span_hash(s) for s in batch_spans]
