"""LangGraph: the cost of each instrumentation on the same graphs, each mode in its own process, alternated.

Modes: ``uninstrumented``, ``orchestrace`` (orchestrace-langgraph), ``openinference``
(openinference-instrumentation-langchain) and ``openllmetry`` (opentelemetry-instrumentation-langchain), each
with its default configuration. Every mode exports into the same in-memory exporter through a
SimpleSpanProcessor, so what is measured is the instrumentation's work in the application thread; spans and
OTLP protobuf bytes per run are counted from one extra run after the timed ones.

Time on a shared machine is noisy, so each mode is also counted in CPU instructions per run (valgrind's
callgrind, when valgrind is installed: deterministic, the same count whatever else the machine does).
Instructions are not time (they weigh a cache miss or a contended lock like any other), so the verdict stays
the timed one.

Run as a worker: ``python -m bench.langgraph_overhead --mode MODE --graphs a,b --runs N --out FILE``
(``--callgrind``: under ``valgrind --tool=callgrind --instr-atstart=no``, counting only the measured runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.graphs import GRAPHS
from bench.instructions import available, count, counted
from bench.timing import CountingExporter, median

MODES = ("uninstrumented", "orchestrace", "orchestrace_content", "openinference", "openllmetry")
#: orchestrace leaves message content out by default, the other two record it: this mode captures it too.
MODE_ENV = {"orchestrace_content": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}}
COMPETITORS = ("openinference", "openllmetry")
#: Per mode, one result per round of processes: per graph, its figures.
Samples = dict[str, list[dict[str, dict[str, float]]]]


@dataclass(frozen=True)
class Sizes:
    processes_per_mode: int
    runs: int
    warmup: int
    graphs: tuple[str, ...]
    #: Runs per graph counted under callgrind (one process per mode: the count does not vary between runs).
    counted_runs: int
    counted_modes: tuple[str, ...]
    counted_graphs: tuple[str, ...]


QUICK = Sizes(
    processes_per_mode=1,
    runs=2,
    warmup=1,
    graphs=("chain3", "supervisor3", "fanout8"),
    counted_runs=1,
    counted_modes=("uninstrumented", "orchestrace"),
    counted_graphs=("chain3",),
)
FULL = Sizes(
    processes_per_mode=7,
    runs=30,
    warmup=5,
    graphs=tuple(GRAPHS),
    counted_runs=3,
    counted_modes=("uninstrumented", "orchestrace", *COMPETITORS),
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
    elif mode != "uninstrumented":
        raise ValueError(f"unknown mode {mode!r}")


def counted_worker(mode: str, graphs: list[str], runs: int, warmup: int) -> None:
    """Under callgrind: the instructions of ``runs`` runs of each graph, dumped as a part named after it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _instrument(mode, provider)
    for name in graphs:
        graph, inputs = GRAPHS[name][0](), GRAPHS[name][1]
        for _ in range(warmup):
            graph.invoke(inputs)
            exporter.clear()
        with counted(name):
            for _ in range(runs):
                graph.invoke(inputs)
                exporter.clear()


def worker(mode: str, graphs: list[str], runs: int, warmup: int) -> dict[str, dict[str, float]]:
    """Per graph: median microseconds per run (wall clock, and CPU time of the process: every thread, so
    the Send tasks' pool too; steadier than wall time on a shared machine), spans and OTLP bytes of one run,
    in this process."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _instrument(mode, provider)
    built = {name: GRAPHS[name][0]() for name in graphs}
    out: dict[str, dict[str, float]] = {}
    for name in graphs:
        graph, inputs = built[name], GRAPHS[name][1]
        for _ in range(warmup):
            graph.invoke(inputs)
            exporter.clear()
        times, cpu_times = [], []
        for _ in range(runs):
            start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
            graph.invoke(inputs)
            cpu_times.append((time.process_time_ns() - cpu_start) / 1000)
            times.append((time.perf_counter_ns() - start) / 1000)
            exporter.clear()
        graph.invoke(inputs)
        spans = list(exporter.spans)
        exporter.clear()
        out[name] = {
            "us_per_run": median(times),
            "cpu_us_per_run": median(cpu_times),
            "spans": len(spans),
            "bytes": len(encode_spans(spans).SerializeToString()) if spans else 0,
        }
    return out


def _spawn(mode: str, sizes: Sizes) -> dict[str, dict[str, float]]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [
            sys.executable,
            "-m",
            "bench.langgraph_overhead",
            "--mode",
            mode,
            "--graphs",
            ",".join(sizes.graphs),
            "--runs",
            str(sizes.runs),
            "--warmup",
            str(sizes.warmup),
            "--out",
            out.name,
        ]
        env = {**os.environ, **MODE_ENV.get(mode, {})}
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).parent.parent, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{mode} worker failed: {proc.stderr[-2000:]}")
        result: dict[str, dict[str, float]] = json.loads(Path(out.name).read_text())
        return result


def _count(mode: str, sizes: Sizes) -> dict[str, float]:
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
        "--out",
        os.devnull,
    ]
    return {name: total / sizes.counted_runs for name, total in count(args, MODE_ENV.get(mode)).items()}


def instructions(sizes: Sizes) -> dict[str, Any]:
    """Per graph: instructions per run of each counted mode, and orchestrace's overhead in instructions
    against the lighter competitor's; or why nothing was counted."""
    if not available():
        return {"skipped": "valgrind is not installed"}
    # Counts do not depend on what else runs, so the modes are counted side by side.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        per_mode = dict(
            zip(sizes.counted_modes, pool.map(lambda m: _count(m, sizes), sizes.counted_modes), strict=True)
        )
    graphs: dict[str, Any] = {}
    for name in sizes.counted_graphs:
        row = {mode: counts[name] for mode, counts in per_mode.items() if name in counts}
        base = row.get("uninstrumented")
        if not base:
            continue
        cell: dict[str, Any] = {"per_run": row, "ratio": {m: v / base for m, v in row.items()}}
        competitors = [row[m] - base for m in COMPETITORS if m in row]
        if "orchestrace" in row and competitors:
            cell["fraction_of_lighter"] = _fraction(row["orchestrace"] - base, min(competitors))
        graphs[name] = cell
    return {"runs": sizes.counted_runs, "graphs": graphs}


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    samples: Samples = {m: [] for m in MODES}
    errors: dict[str, str] = {}
    for rep in range(sizes.processes_per_mode):
        order = MODES[rep % len(MODES) :] + MODES[: rep % len(MODES)]
        for mode in order:
            if mode in errors:
                continue
            try:
                samples[mode].append(_spawn(mode, sizes))
            except RuntimeError as exc:
                errors[mode] = str(exc)
    graphs: dict[str, dict[str, dict[str, float]]] = {}
    for name in sizes.graphs:
        row: dict[str, dict[str, float]] = {}
        for mode in MODES:
            if not samples[mode]:
                continue
            runs = [s[name] for s in samples[mode]]
            row[mode] = {
                "us_per_run": median([r["us_per_run"] for r in runs]),
                "cpu_us_per_run": median([r["cpu_us_per_run"] for r in runs]),
                "spans": runs[-1]["spans"],
                "bytes": runs[-1]["bytes"],
            }
        base, cpu_base = row["uninstrumented"]["us_per_run"], row["uninstrumented"]["cpu_us_per_run"]
        for cell in row.values():
            cell["ratio"] = cell["us_per_run"] / base
            cell["overhead_us"] = cell["us_per_run"] - base
            cell["cpu_ratio"] = cell["cpu_us_per_run"] / cpu_base
            cell["cpu_overhead_us"] = cell["cpu_us_per_run"] - cpu_base
        graphs[name] = row
    return {
        "sizes": sizes.__dict__,
        "exporter": "SimpleSpanProcessor -> in-memory list (same for every mode)",
        "graphs": graphs,
        "target": _target(graphs, samples),
        "instructions": instructions(sizes),
        "errors": errors,
    }


def _fraction(overhead: float, lighter: float) -> float:
    return overhead / lighter if lighter > 0 else float("inf")


def _paired_fraction(samples: Samples, graph: str, mode: str, key: str) -> float | None:
    """The median over rounds of ``mode``'s overhead over the lighter competitor's, each taken from the
    processes of one round (run one after the other, so the machine's drift cancels out); ``key``: wall or
    CPU time per run. ``None`` when a mode it needs has no result."""
    competitors = [c for c in COMPETITORS if samples.get(c)]
    if not samples.get(mode) or not samples.get("uninstrumented") or not competitors:
        return None
    rounds = min(len(samples[m]) for m in ("uninstrumented", mode, *competitors))
    fractions = []
    for r in range(rounds):
        base = samples["uninstrumented"][r][graph][key]
        lighter = min(samples[c][r][graph][key] - base for c in competitors)
        fractions.append(_fraction(samples[mode][r][graph][key] - base, lighter))
    return median(fractions)


def _target(graphs: dict[str, dict[str, dict[str, float]]], samples: Samples) -> dict[str, Any]:
    """orchestrace's overhead against half the lighter competitor's, per graph."""
    verdict: dict[str, Any] = {}
    for name, row in graphs.items():
        fraction = _paired_fraction(samples, name, "orchestrace", "us_per_run")
        fraction_cpu = _paired_fraction(samples, name, "orchestrace", "cpu_us_per_run")
        if fraction is None or fraction_cpu is None:
            continue
        verdict[name] = {
            "orchestrace_overhead_us": row["orchestrace"]["overhead_us"],
            "lighter_competitor_overhead_us": min(row[m]["overhead_us"] for m in COMPETITORS if m in row),
            "fraction_of_lighter": fraction,
            "met": fraction <= 0.5,
            "fraction_of_lighter_cpu": fraction_cpu,
            "met_cpu": fraction_cpu <= 0.5,
        }
        with_content = _paired_fraction(samples, name, "orchestrace_content", "us_per_run")
        if with_content is not None:
            verdict[name]["fraction_of_lighter_with_content"] = with_content
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--graphs", required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--callgrind", action="store_true", help="count instructions (run under callgrind)")
    args = parser.parse_args()
    if args.callgrind:
        counted_worker(args.mode, args.graphs.split(","), args.runs, args.warmup)
        return
    result = worker(args.mode, args.graphs.split(","), args.runs, args.warmup)
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
