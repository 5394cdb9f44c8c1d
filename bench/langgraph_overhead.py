"""LangGraph: the cost of each instrumentation on the same graphs, each mode in its own process, run by run.

Modes: ``uninstrumented``, ``orchestrace`` (orchestrace-langgraph), ``orchestrace_content`` (the same with
message content captured), ``openinference`` (openinference-instrumentation-langchain) and ``openllmetry``
(opentelemetry-instrumentation-langchain), each with its default configuration; and ``spans_only``, the floor
under any instrumentation that writes as many spans as orchestrace: the uninstrumented run followed by that
many OTel spans with nothing in them (one root, the others its children), through the same exporter. Every
mode exports as users run it: a BatchSpanProcessor with its default settings and the OTLP/HTTP exporter that
``ot.configure`` installs (OTel's exporter sending the bytes of OTel's encoder, written by
``orchestrace.trace_encoder`` for a fraction of the CPU), to one loopback receiver (``bench.otlp_sink``)
that all modes share. The exporter's thread works in the same process as the graph, so its encoding and
sending are part of each mode's wall and CPU time (spread over the runs that fill a batch). Spans and OTLP
protobuf bytes per run are counted from one extra run after the timed ones.

Each mode lives in its own process for the whole group, and the processes take turns one graph run at a
time (a round: every mode once, the order rotated). A shared machine's speed drifts by up to 2x within
minutes; with runs interleaved at this grain the drift hits every mode alike, so each round's ratios are
paired and the verdict is their median. Processes that ran their runs back to back, one mode after the
other, gave fan-out verdicts anywhere between 0.34 and 0.72 for the same code.

Time is also backed by CPU instructions per run (valgrind's callgrind, when valgrind is installed:
deterministic, the same count whatever else the machine does). Instructions are not time (they weigh a
cache miss or a contended lock like any other), so the verdict stays the timed one. They are counted with
spans handed to an in-memory list (SimpleSpanProcessor) and each run's spans encoded as one OTLP protobuf
request at its end, as the timed runs' exporter thread does in batches (whose batches would fall at different
runs from one count to the next): the encoding is counted alone too, since it grows with every attribute and
event a span carries, not with its bytes, and so is OTel's own encoder's (``encode_spans``) for the same
spans, what an OTel exporter set up by hand pays instead.

Run as a worker: ``python -m bench.langgraph_overhead --mode MODE --graphs a,b --warmup N --serve``
answers ``time GRAPH`` and ``count GRAPH`` lines on stdin with JSON lines (``--callgrind --runs N``: under
``valgrind --tool=callgrind --instr-atstart=no``, counting only the measured runs).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bench.graphs import GRAPHS
from bench.instructions import available, count, counted
from bench.timing import CountingExporter, median

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

MODES = ("uninstrumented", "spans_only", "orchestrace", "orchestrace_content", "openinference", "openllmetry")
#: orchestrace leaves message content out by default, the other two record it: this mode captures it too.
MODE_ENV = {"orchestrace_content": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}}
COMPETITORS = ("openinference", "openllmetry")
#: The most orchestrace may cost with content capture off (its default), as a multiple of the
#: uninstrumented run (paired ratio by wall time).
RATIO_TARGETS = {"orchestrace": 1.35}
#: The peers record message content by default: with content captured too (``orchestrace_content``),
#: orchestrace's added time is judged against the lighter peer's, at most this fraction of it.
PEER_MODE = "orchestrace_content"
PEER_FRACTION_TARGET = 0.5
#: Per mode, per graph: (wall, CPU) microseconds of each round's run; round i of every mode ran together.
Samples = dict[str, dict[str, list[tuple[float, float]]]]
WALL, CPU = 0, 1


@dataclass(frozen=True)
class Sizes:
    #: Groups of processes (one per mode), started afresh: a process's own layout and hash seed vary.
    groups: int
    #: Rounds per graph and group.
    rounds: int
    warmup: int
    graphs: tuple[str, ...]
    #: Runs per graph counted under callgrind (one process per mode: the count does not vary between runs).
    counted_runs: int
    counted_modes: tuple[str, ...]
    counted_graphs: tuple[str, ...]


QUICK = Sizes(
    groups=1,
    rounds=2,
    warmup=1,
    graphs=("chain3", "supervisor3", "fanout8"),
    counted_runs=1,
    counted_modes=("uninstrumented", "orchestrace"),
    counted_graphs=("chain3",),
)
FULL = Sizes(
    groups=3,
    rounds=40,
    warmup=5,
    graphs=tuple(GRAPHS),
    counted_runs=3,
    counted_modes=("uninstrumented", "spans_only", "orchestrace", PEER_MODE, *COMPETITORS),
    counted_graphs=tuple(GRAPHS),
)


def _instrument(mode: str, provider: Any) -> None:
    if mode in ("orchestrace", "orchestrace_content"):
        from orchestrace_langgraph import LangGraphInstrumentor

        LangGraphInstrumentor().instrument(tracer_provider=provider)
    elif mode == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    elif mode == "openllmetry":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
    elif mode not in ("uninstrumented", "spans_only"):
        raise ValueError(f"unknown mode {mode!r}")


def _bare_spans(provider: TracerProvider, spans: int) -> None:
    """``spans`` OTel spans with nothing in them: a root and its children (``spans_only``'s work per run)."""
    from opentelemetry.trace import set_span_in_context

    if spans <= 0:
        return
    tracer = provider.get_tracer("bench.spans_only")
    root = tracer.start_span("run")
    context = set_span_in_context(root)
    for _ in range(spans - 1):
        tracer.start_span("step", context=context).end()
    root.end()


#: Suffixes of the parts counting only the OTLP encoding of a graph's runs: orchestrace's encoder, OTel's.
_EXPORT, _EXPORT_OTEL = ".export", ".export_otel"


def counted_worker(mode: str, graphs: list[str], runs: int, warmup: int, spans: dict[str, int]) -> None:
    """Under callgrind: the instructions of ``runs`` runs of each graph with each run's spans encoded as OTLP
    protobuf, dumped as a part named after it, and of that encoding alone (``{graph}.export``; with OTel's
    encoder: ``{graph}.export_otel``) for as many more runs (``spans``: ``spans_only``'s spans per run of each
    graph)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from orchestrace.trace_encoder import encode_request

    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _instrument(mode, provider)
    for name in graphs:
        graph, inputs = GRAPHS[name][0](), GRAPHS[name][1]
        for _ in range(warmup):
            graph.invoke(inputs)
            _bare_spans(provider, spans.get(name, 0))
            exporter.clear()
        # From a collected heap: a full collection falling inside the few counted runs adds millions of
        # instructions to one count and not to another (chain3: 10.5 M per run over 8 runs, 11.4 M over 2).
        gc.collect()
        with counted(name):
            for _ in range(runs):
                graph.invoke(inputs)
                _bare_spans(provider, spans.get(name, 0))
                encode_request(exporter.spans)
                exporter.clear()
        batches = []
        for _ in range(runs):
            graph.invoke(inputs)
            _bare_spans(provider, spans.get(name, 0))
            batches.append(list(exporter.spans))
            exporter.clear()
        with counted(f"{name}{_EXPORT}"):
            for batch in batches:
                encode_request(batch)
        with counted(f"{name}{_EXPORT_OTEL}"):
            for batch in batches:
                encode_spans(batch).SerializeToString()


class _OtlpCounting:
    """``ot.configure``'s OTLP/HTTP span exporter, counting the spans it exports and (while ``measure``) their
    bytes."""

    def __init__(self, endpoint: str) -> None:
        from orchestrace.exporters import create_exporter

        otlp = create_exporter("otlp-http", endpoint)
        assert otlp is not None
        self._otlp = otlp
        self.spans = 0
        self.bytes = 0
        self.measure = False

    def export(self, spans: Sequence[ReadableSpan]) -> Any:
        from orchestrace.trace_encoder import encode_request

        self.spans += len(spans)
        if self.measure:
            self.bytes += len(encode_request(spans))
        return self._otlp.export(spans)

    def shutdown(self) -> None:
        self._otlp.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _provider(exporter: _OtlpCounting) -> TracerProvider:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))  # type: ignore[arg-type]
    return provider


def serve(mode: str, graphs: list[str], warmup: int, endpoint: str) -> None:
    """Build and warm up every graph in ``mode``, exporting to ``endpoint``, then answer one request per stdin
    line on the stdout it started with (what the libraries print goes to stderr):

    - ``time GRAPH [SPANS]``: ``[wall, cpu]`` microseconds of one run (CPU time of the process: every thread,
      so the Send tasks' pool and the exporter's thread too), then ``SPANS`` bare spans (``spans_only``);
    - ``count GRAPH [SPANS]``: ``{"spans": n, "bytes": b}`` of one run, the bytes as OTLP protobuf.
    """
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    exporter = _OtlpCounting(endpoint)
    provider = _provider(exporter)
    _instrument(mode, provider)
    built = {name: (GRAPHS[name][0](), GRAPHS[name][1]) for name in graphs}
    for graph, inputs in built.values():
        for _ in range(warmup):
            graph.invoke(inputs)
    provider.force_flush()
    print(json.dumps("ready"), file=replies, flush=True)
    for line in sys.stdin:
        request, name, *spans = line.split()
        graph, inputs = built[name]
        if request == "count":
            provider.force_flush()
            spans_before, exporter.bytes, exporter.measure = exporter.spans, 0, True
        start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
        graph.invoke(inputs)
        _bare_spans(provider, int(spans[0]) if spans else 0)
        cpu = (time.process_time_ns() - cpu_start) / 1000
        wall = (time.perf_counter_ns() - start) / 1000
        reply: Any = [wall, cpu]
        if request == "count":
            provider.force_flush()
            reply = {"spans": exporter.spans - spans_before, "bytes": exporter.bytes}
            exporter.measure = False
        print(json.dumps(reply), file=replies, flush=True)
    provider.shutdown()


class _Worker:
    """One mode's serving process (see ``serve``)."""

    def __init__(self, mode: str, sizes: Sizes, endpoint: str) -> None:
        self.mode = mode
        # A file, not a pipe: nobody reads stderr until the worker fails, and a full pipe would block it.
        self._stderr: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in close)
        cmd = [sys.executable, "-m", "bench.langgraph_overhead", "--mode", mode, "--serve"]
        self._proc = subprocess.Popen(
            [*cmd, "--endpoint", endpoint, "--graphs", ",".join(sizes.graphs), "--warmup", str(sizes.warmup)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            cwd=Path(__file__).parent.parent,
            env={**os.environ, **MODE_ENV.get(mode, {})},
        )

    def ask(self, request: str) -> Any:
        """Send one request (``""``: none, just the reply to the last) and read its reply."""
        assert self._proc.stdin and self._proc.stdout
        try:
            if request:
                self._proc.stdin.write(request + "\n")
                self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self._stderr.seek(0)
            raise RuntimeError(f"{self.mode} worker failed: {self._stderr.read()[-2000:]}")
        return json.loads(line)

    def close(self) -> None:
        if self._proc.stdin:
            with contextlib.suppress(BrokenPipeError):  # a worker that died leaves the pipe broken
                self._proc.stdin.close()
        self._proc.wait()
        self._stderr.close()


def _count(mode: str, sizes: Sizes, spans: dict[str, int]) -> dict[str, float]:
    """Instructions per run of each counted graph in ``mode`` (one process under callgrind)."""
    args = [
        "bench.langgraph_overhead",
        "--callgrind",
        "--mode",
        mode,
        "--graphs",
        ",".join(sizes.counted_graphs),
        "--runs",
        str(sizes.counted_runs),
        "--warmup",
        str(sizes.warmup),
        *(["--spans", json.dumps(spans)] if mode == "spans_only" else []),
    ]
    return {name: total / sizes.counted_runs for name, total in count(args, MODE_ENV.get(mode)).items()}


def instructions(sizes: Sizes, spans: dict[str, int]) -> dict[str, Any]:
    """Per graph: instructions per run of each counted mode, and orchestrace's overhead with content captured
    in instructions against the lighter competitor's; or why nothing was counted. ``spans``: orchestrace's
    spans per run."""
    if not available():
        return {"skipped": "valgrind is not installed"}
    # Counts do not depend on what else runs, so the modes are counted side by side.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        per_mode = dict(
            zip(
                sizes.counted_modes,
                pool.map(lambda m: _count(m, sizes, spans), sizes.counted_modes),
                strict=True,
            )
        )
    graphs: dict[str, Any] = {}
    for name in sizes.counted_graphs:
        row = {mode: counts[name] for mode, counts in per_mode.items() if name in counts}
        base = row.get("uninstrumented")
        if not base:
            continue
        cell: dict[str, Any] = {
            "per_run": row,
            "ratio": {m: v / base for m, v in row.items()},
            "export_per_run": {m: c[name + _EXPORT] for m, c in per_mode.items() if name + _EXPORT in c},
            "export_otel_per_run": {m: c[name + _EXPORT_OTEL] for m, c in per_mode.items()
                                    if name + _EXPORT_OTEL in c},
        }
        competitors = [row[m] - base for m in COMPETITORS if m in row]
        if PEER_MODE in row and competitors:
            cell["fraction_of_lighter"] = _fraction(row[PEER_MODE] - base, min(competitors))
        graphs[name] = cell
    return {"runs": sizes.counted_runs, "graphs": graphs}


@contextlib.contextmanager
def _sink() -> Iterator[str]:
    """A loopback OTLP/HTTP receiver (``bench.otlp_sink``) for the duration; yields its traces endpoint."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.otlp_sink"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}/v1/traces"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _group(
    sizes: Sizes, modes: list[str], samples: Samples, errors: dict[str, str], endpoint: str
) -> dict[str, Any]:
    """One group: a process per mode, taking turns run by run; appends to ``samples``, and gives each live
    mode's spans and bytes per graph. A mode that fails is dropped from ``samples`` for good, so the rounds of
    the others stay aligned."""
    workers = {mode: _Worker(mode, sizes, endpoint) for mode in modes}
    spans: dict[str, int] = {}

    def ask(mode: str, request: str) -> Any:
        if mode not in workers:
            return None
        try:
            return workers[mode].ask(request)
        except RuntimeError as exc:
            errors[mode] = str(exc)
            workers.pop(mode).close()
            samples.pop(mode, None)
            return None

    def request(mode: str, verb: str, graph: str) -> str:
        return f"{verb} {graph} {spans.get(graph, 0)}" if mode == "spans_only" else f"{verb} {graph}"

    try:
        for mode in list(workers):
            ask(mode, "")
        for graph in sizes.graphs:  # spans_only writes as many spans as orchestrace does
            counted = ask("orchestrace", f"count {graph}")
            spans[graph] = counted["spans"] if counted else 0
        for graph in sizes.graphs:
            for r in range(sizes.rounds):
                live = list(workers)
                for mode in live[r % len(live) :] + live[: r % len(live)]:
                    reply = ask(mode, request(mode, "time", graph))
                    if reply is not None:
                        samples[mode][graph].append((reply[WALL], reply[CPU]))
        return {
            mode: {g: ask(mode, request(mode, "count", g)) for g in sizes.graphs} for mode in list(workers)
        }
    finally:
        for worker in workers.values():
            worker.close()


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    samples: Samples = {m: {g: [] for g in sizes.graphs} for m in MODES}
    errors: dict[str, str] = {}
    counts: dict[str, Any] = {}
    with _sink() as endpoint:
        for _ in range(sizes.groups):
            counts = _group(sizes, [m for m in MODES if m in samples], samples, errors, endpoint)
    graphs: dict[str, dict[str, dict[str, float]]] = {}
    for name in sizes.graphs:
        row: dict[str, dict[str, float]] = {}
        for mode, per_graph in samples.items():
            if mode not in counts or counts[mode][name] is None:
                continue
            runs = per_graph[name]
            row[mode] = {
                "us_per_run": median([run[WALL] for run in runs]),
                "cpu_us_per_run": median([run[CPU] for run in runs]),
                # Mean: the runs in which the exporter's thread sent a batch count in full.
                "mean_us_per_run": sum(run[WALL] for run in runs) / len(runs),
                "wall_per_cpu": median([run[WALL] / run[CPU] for run in runs]),
                **counts[mode][name],
            }
        if "uninstrumented" not in row:
            continue
        base, cpu_base = row["uninstrumented"]["us_per_run"], row["uninstrumented"]["cpu_us_per_run"]
        for mode, cell in row.items():
            cell["paired_ratio"] = median(_paired_ratios(samples, name, mode, WALL))
            cell["paired_cpu_ratio"] = median(_paired_ratios(samples, name, mode, CPU))
            cell["mean_ratio"] = cell["mean_us_per_run"] / row["uninstrumented"]["mean_us_per_run"]
            cell["ratio"] = cell["us_per_run"] / base
            if mode in RATIO_TARGETS:
                cell["ratio_met"] = cell["paired_ratio"] <= RATIO_TARGETS[mode]
            cell["overhead_us"] = cell["us_per_run"] - base
            cell["cpu_ratio"] = cell["cpu_us_per_run"] / cpu_base
            cell["cpu_overhead_us"] = cell["cpu_us_per_run"] - cpu_base
        graphs[name] = row
    return {
        "sizes": sizes.__dict__,
        "exporter": "BatchSpanProcessor (defaults) -> ot.configure's OTLP/HTTP protobuf exporter to a "
        "loopback receiver (same for every mode)",
        "ratio_targets": RATIO_TARGETS,
        "peer_fraction_target": PEER_FRACTION_TARGET,
        "modes": list(MODES),
        "graphs": graphs,
        "target": _target(graphs, samples, sizes.rounds),
        "instructions": instructions(
            sizes, {g: cell["spans"] for g, cell in counts.get("orchestrace", {}).items() if cell}
        ),
        "errors": errors,
    }


def _fraction(overhead: float, lighter: float) -> float:
    return overhead / lighter if lighter > 0 else float("inf")


def _paired_ratios(samples: Samples, graph: str, mode: str, key: int) -> list[float]:
    """Per round, ``mode``'s run over the uninstrumented one of the same round; ``key``: WALL or CPU."""
    pairs = zip(samples["uninstrumented"][graph], samples[mode][graph], strict=True)
    return [own[key] / base[key] for base, own in pairs]


def _paired_fractions(samples: Samples, graph: str, mode: str, key: int) -> list[float]:
    """Per round, ``mode``'s overhead over the lighter competitor's, all from the runs of that round; ``key``:
    WALL or CPU. Empty when a mode it needs has no result."""
    competitors = [c for c in COMPETITORS if c in samples]
    if mode not in samples or "uninstrumented" not in samples or not competitors:
        return []
    fractions = []
    runs = [samples[m][graph] for m in ("uninstrumented", mode, *competitors)]
    for base, own, *others in zip(*runs, strict=True):
        lighter = min(other[key] - base[key] for other in others)
        fractions.append(_fraction(own[key] - base[key], lighter))
    return fractions


def _target(graphs: dict[str, dict[str, dict[str, float]]], samples: Samples, rounds: int) -> dict[str, Any]:
    """orchestrace's overhead with content captured (``PEER_MODE``) against the lighter competitor's, per
    graph: the median of the paired rounds' fractions, and that median in each group (its spread shows how
    steady the verdict is); with capture off too, for comparison."""
    verdict: dict[str, Any] = {}
    for name, row in graphs.items():
        fractions = _paired_fractions(samples, name, PEER_MODE, WALL)
        fractions_cpu = _paired_fractions(samples, name, PEER_MODE, CPU)
        if not fractions:
            continue
        fraction, fraction_cpu = median(fractions), median(fractions_cpu)
        verdict[name] = {
            "orchestrace_overhead_us": row[PEER_MODE]["overhead_us"],
            "lighter_competitor_overhead_us": min(row[m]["overhead_us"] for m in COMPETITORS if m in row),
            "fraction_of_lighter": fraction,
            "met": fraction <= PEER_FRACTION_TARGET,
            "fraction_of_lighter_by_group": [
                median(fractions[i : i + rounds]) for i in range(0, len(fractions), rounds)
            ],
            "fraction_of_lighter_cpu": fraction_cpu,
            "met_cpu": fraction_cpu <= PEER_FRACTION_TARGET,
        }
        capture_off = _paired_fractions(samples, name, "orchestrace", WALL)
        if capture_off:
            verdict[name]["fraction_of_lighter_capture_off"] = median(capture_off)
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--graphs", required=True)
    parser.add_argument("--warmup", type=int, required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--serve", action="store_true", help="answer timing requests on stdin (see serve)")
    mode.add_argument("--callgrind", action="store_true", help="count instructions (run under callgrind)")
    parser.add_argument("--runs", type=int, default=1, help="with --callgrind: runs counted per graph")
    parser.add_argument("--endpoint", help="with --serve: the OTLP/HTTP traces endpoint to export to")
    parser.add_argument("--spans", default="{}", help="with --callgrind: spans_only's spans per graph (JSON)")
    args = parser.parse_args()
    if args.callgrind:
        counted_worker(args.mode, args.graphs.split(","), args.runs, args.warmup, json.loads(args.spans))
    else:
        serve(args.mode, args.graphs.split(","), args.warmup, args.endpoint)


if __name__ == "__main__":
    main()
