"""Collector: OTLP/HTTP protobuf ingest with the write-ahead log on, offline conversion, and memory.

Ingest runs ``orchestrace collect`` (``--fsync batch``: every acknowledged batch is fsync'd) in its own
process and a sender in another, posting pre-encoded OTLP protobuf requests of 512 spans from a few threads.
Figures:

* ``ack_spans_per_s``: spans acknowledged (HTTP 200, logged) per wall second, at the sender;
* ``e2e_spans_per_s``: from the first request until every trace is written, less the quiet period;
* ``spans_per_collector_cpu_s``: spans per CPU-second the collector process used over that whole window
  (receiving, logging, assembling, converting and writing): the per-core figure.

Each figure is the median of ``ingest_runs`` bursts, each in a fresh collector (the machine is shared);
``runs`` has every burst's.

Memory is the collector's resident set: with 1,000 traces open at once (their root spans withheld), with one
open trace of 100,000 spans (and the peak once it completes and is converted), and after each round of steady
traffic, to show that memory follows the open traces rather than the total traffic.

Offline conversion is measured stage by stage (decode, ``convert_episode``, the local engine's assemble +
convert + write) in two fresh processes, one running the mypyc-compiled modules (the default, built by ``make
sync``) and one pure Python (``ORCHESTRACE_PURE_PYTHON=1``), timed and counted under callgrind; then end to
end as ``orchestrace convert`` on dump files.

Run as the sender: ``python -m bench.collector_throughput --send URL --payloads FILE --threads N --out FILE``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from orchestrace_collector._compiled import PURE_PYTHON_ENV

from bench.instructions import available, count, counted
from bench.profiling import profile, summarize
from bench.spangen import encoded_requests, requests, trace_spans, write_dumps
from bench.timing import median, peak_rss_mb, rss_mb

#: Ingest target per core, spans/s; conversion target per core, spans/s.
INGEST_TARGET = 50_000
CONVERT_TARGET = 100_000
QUIET_PERIOD_S = 0.5
_ROOT = Path(__file__).parent.parent
_FRAME = struct.Struct("<I")


@dataclass(frozen=True)
class Sizes:
    rounds: int
    traces_per_round: int
    spans_per_trace: int
    open_traces: int
    big_trace_spans: int
    convert_traces: int
    sender_threads: int
    ingest_runs: int


QUICK = Sizes(
    rounds=2,
    traces_per_round=10,
    spans_per_trace=50,
    open_traces=20,
    big_trace_spans=500,
    convert_traces=20,
    sender_threads=2,
    ingest_runs=1,
)
FULL = Sizes(
    rounds=10,
    traces_per_round=200,
    spans_per_trace=100,
    open_traces=1000,
    big_trace_spans=100_000,
    convert_traces=1000,
    sender_threads=4,
    ingest_runs=3,
)


# --- the collector and the sender as processes --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _cli() -> str:
    return str(Path(sys.executable).parent / "orchestrace")


@contextlib.contextmanager
def running_collector(out: Path, profile_to: Path | None = None) -> Iterator[tuple[str, psutil.Process]]:
    """``orchestrace collect`` on free ports; yields its OTLP/HTTP url and process; stops it with SIGINT."""
    port = _free_port()
    cmd = [
        _cli(),
        "collect",
        "--out",
        str(out),
        "--port",
        str(port),
        "--grpc-port",
        str(_free_port()),
        "--fsync",
        "batch",
        "--quiet-period",
        str(QUIET_PERIOD_S),
    ]
    if profile_to is not None:
        cmd = [
            sys.executable,
            "-m",
            "pyinstrument",
            "-r",
            "pyisession",
            "-o",
            str(profile_to),
            "-i",
            "0.0005",
            *cmd,
        ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"collector did not start: {proc.stderr.read().decode() if proc.stderr else ''}"
                )
            time.sleep(0.1)
        # Warm up the request path (lazy imports on the first request) with one span whose trace never
        # completes, so it is never written and the trace counts stay exact.
        warmup = requests([trace_spans(0, 2, seed=99, complete=False)])
        httpx.post(
            f"http://127.0.0.1:{port}/v1/traces",
            content=next(warmup).SerializeToString(),
            headers={"content-type": "application/x-protobuf"},
            timeout=30,
        ).raise_for_status()
        # Under pyinstrument the collector is a child of the profiler process.
        target = psutil.Process(proc.pid)
        if profile_to is not None:
            target = max(target.children(recursive=True) or [target], key=lambda p: p.memory_info().rss)
        yield f"http://127.0.0.1:{port}/v1/traces", target
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def send(url: str, payloads: Sequence[bytes], threads: int) -> dict[str, float]:
    """Post every payload (round-robin over ``threads`` connections) in a sender process; its own timing."""
    with tempfile.TemporaryDirectory() as tmp:
        frames, result = Path(tmp) / "payloads.bin", Path(tmp) / "result.json"
        with frames.open("wb") as f:
            for payload in payloads:
                f.write(_FRAME.pack(len(payload)))
                f.write(payload)
        cmd = [
            sys.executable,
            "-m",
            "bench.collector_throughput",
            "--send",
            url,
            "--payloads",
            str(frames),
            "--threads",
            str(threads),
            "--out",
            str(result),
        ]
        subprocess.run(cmd, check=True, cwd=Path(__file__).parent.parent)
        sent: dict[str, float] = json.loads(result.read_text())
        return sent


def _sender_main(url: str, frames: Path, threads: int, out: Path) -> None:
    data = frames.read_bytes()
    payloads: list[bytes] = []
    offset = 0
    while offset < len(data):
        (size,) = _FRAME.unpack_from(data, offset)
        payloads.append(data[offset + 4 : offset + 4 + size])
        offset += 4 + size
    lock = threading.Lock()
    next_index = iter(range(len(payloads)))
    retries = [0]
    ready = threading.Barrier(threads + 1)

    def post_all() -> None:
        with httpx.Client(headers={"content-type": "application/x-protobuf"}, timeout=120) as client:
            ready.wait()
            while True:
                with lock:
                    i = next(next_index, None)
                if i is None:
                    return
                while client.post(url, content=payloads[i]).status_code == 503:  # backpressure: retry soon
                    with lock:
                        retries[0] += 1
                    time.sleep(0.02)

    workers = [threading.Thread(target=post_all) for _ in range(threads)]
    for w in workers:
        w.start()
    ready.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    out.write_text(
        json.dumps(
            {"seconds": time.perf_counter() - start, "requests": len(payloads), "retries_503": retries[0]}
        )
    )


# --- watching the output directory -------------------------------------------------------------------------


class TraceCounter:
    """Counts trace lines written to an output directory, reading only what was appended since last time."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.offsets: dict[Path, int] = defaultdict(int)
        self.count = 0

    def poll(self) -> int:
        for path in sorted(self.out.glob("traces-*.jsonl")):
            with path.open("rb") as f:
                f.seek(self.offsets[path])
                chunk = f.read()
            self.offsets[path] += len(chunk)
            self.count += chunk.count(b"\n")
        return self.count

    def wait_for(self, n: int, timeout: float = 600) -> float:
        """Block until ``n`` traces are written; returns the monotonic time it was seen."""
        deadline = time.monotonic() + timeout
        while self.poll() < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.count} of {n} traces written after {timeout} s")
            time.sleep(0.05)
        return time.monotonic()


def _settled_rss(process: psutil.Process, timeout: float = 60) -> float:
    """RSS once it stops changing (the assembly thread has caught up with what was acknowledged)."""
    last, stable_since, deadline = -1.0, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = rss_mb(process.pid)
        if abs(now - last) > 0.5:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since > 1.0:
            break
        time.sleep(0.1)
    return last


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


# --- the measurements --------------------------------------------------------------------------------------


def measure_ingest(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """Bursts of every round back to back (throughput; the medians of ``sizes.ingest_runs``, each in a fresh
    collector), then, after the last, rounds one at a time, each written before the next is sent (resident
    memory under steady traffic)."""
    per_round = sizes.traces_per_round
    burst = encoded_requests(range(sizes.rounds * per_round), sizes.spans_per_trace)
    rounds = [
        encoded_requests(
            range((sizes.rounds + r) * per_round, (sizes.rounds + r + 1) * per_round), sizes.spans_per_trace
        )
        for r in range(sizes.rounds)
    ]
    total = sizes.rounds * per_round * sizes.spans_per_trace
    runs: list[dict[str, Any]] = []
    for run in range(sizes.ingest_runs):
        out = tmp / f"ingest-{run}"
        with running_collector(out) as (url, process):
            counter = TraceCounter(out)
            idle_rss = _settled_rss(process)
            cpu_before, start = _cpu_s(process), time.monotonic()
            sent = send(url, burst, sizes.sender_threads)
            cpu_acked = _cpu_s(process) - cpu_before
            done = counter.wait_for(sizes.rounds * per_round)
            cpu = _cpu_s(process) - cpu_before
            runs.append(
                {
                    "ack_spans_per_s": total / sent["seconds"],
                    # Includes the assembly thread's work done meanwhile: a per-core figure that errs low.
                    "ack_collector_cpu_s": cpu_acked,
                    # psutil's CPU times tick in 10 ms: the quick sizes can finish within one tick.
                    "ack_spans_per_collector_cpu_s": total / cpu_acked if cpu_acked > 0 else None,
                    "retries_503": sent["retries_503"],
                    # The window ends one quiet period after the last span, which is latency, not work.
                    "e2e_spans_per_s": total / (done - start - QUIET_PERIOD_S),
                    "collector_cpu_s": cpu,
                    "spans_per_collector_cpu_s": total / cpu,
                }
            )
            if run < sizes.ingest_runs - 1:
                continue
            rss_after_round = []
            for r, payloads in enumerate(rounds):
                send(url, payloads, sizes.sender_threads)
                counter.wait_for((sizes.rounds + r + 1) * per_round)
                rss_after_round.append(round(rss_mb(process.pid), 1))
            peak = peak_rss_mb(process.pid)
    medians = {
        key: None if any(r[key] is None for r in runs) else median([r[key] for r in runs]) for key in runs[0]
    }
    return {
        "spans": total,
        "traces": sizes.rounds * per_round,
        "request_spans": 512,
        "sender_threads": sizes.sender_threads,
        "fsync": "batch",
        **medians,
        "runs": runs,
        "rss_idle_mb": idle_rss,
        "rss_after_each_round_mb": rss_after_round,
        "round_spans": per_round * sizes.spans_per_trace,
        "peak_rss_mb": peak,
    }


def measure_open_traces(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """RSS with many open traces, then with one big open trace (and the peak once it is converted)."""
    result: dict[str, Any] = {}
    out = tmp / "open-many"
    with running_collector(out) as (url, process):
        idle = _settled_rss(process)
        send(
            url,
            encoded_requests(range(sizes.open_traces), sizes.spans_per_trace, complete=False),
            sizes.sender_threads,
        )
        held = _settled_rss(process)
        result["many"] = {
            "open_traces": sizes.open_traces,
            "open_spans": sizes.open_traces * (sizes.spans_per_trace - 1),
            "rss_idle_mb": idle,
            "rss_open_mb": held,
            "kb_per_open_span": (held - idle) * 1024 / (sizes.open_traces * (sizes.spans_per_trace - 1)),
        }
    out = tmp / "open-big"
    spans = trace_spans(0, sizes.big_trace_spans)
    with running_collector(out) as (url, process):
        idle = _settled_rss(process)
        body = [r.SerializeToString() for r in requests([spans[:-1]])]
        send(url, body, sizes.sender_threads)
        held = _settled_rss(process)
        start = time.monotonic()
        send(url, [r.SerializeToString() for r in requests([spans[-1:]])], 1)
        written = TraceCounter(out).wait_for(1)
        result["one_big"] = {
            "spans": sizes.big_trace_spans,
            "rss_idle_mb": idle,
            "rss_open_mb": held,
            "peak_rss_mb": peak_rss_mb(process.pid),
            "complete_to_written_s": written - start - QUIET_PERIOD_S,
        }
    return result


#: The stages of offline conversion each mode is measured on.
STAGES = ("decode", "convert_episode", "local_engine")
#: Traces (of ``spans_per_trace`` spans) whose conversion is counted under callgrind, in each mode.
COUNTED_TRACES = 50
#: Rounds of one worker process per mode.
MODE_ROUNDS = 3


def _stages(traces: int, spans_per_trace: int, tmp: Path) -> dict[str, Callable[[], object]]:
    """Each stage of offline conversion as a call, on the same spans: decode (OTLP protobuf to spans),
    ``convert_episode`` of every trace, and the local engine (assemble, convert, write)."""
    from orchestrace_collector.assemble import Assembler
    from orchestrace_collector.convert import convert_episode
    from orchestrace_collector.decode import decode_bytes
    from orchestrace_collector.output import TraceDirWriter

    payloads = encoded_requests(range(traces), spans_per_trace)
    spans = [s for p in payloads for s in decode_bytes(p)]
    by_trace: dict[str, list[Any]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    runs = itertools.count()  # each run writes a directory of its own

    def local_engine() -> None:
        writer = TraceDirWriter(tmp / f"local-{next(runs)}")
        assembler = Assembler(writer)
        assembler.add(spans)
        assembler.flush()
        writer.close()

    return {
        "decode": lambda: [decode_bytes(p) for p in payloads],
        "convert_episode": lambda: [convert_episode(group) for group in by_trace.values()],
        "local_engine": local_engine,
    }


def conversion_worker(traces: int, spans_per_trace: int, tmp: Path, out: Path, callgrind: bool) -> None:
    """In a fresh process, compiled or pure Python (``ORCHESTRACE_PURE_PYTHON``): each stage's seconds, the
    median of 3 runs; under callgrind, each stage counted once after a warm-up run."""
    import orchestrace_collector

    stages = _stages(traces, spans_per_trace, tmp)
    seconds: dict[str, float] = {}
    for name, stage in stages.items():
        if callgrind:
            stage()
            with counted(name):
                stage()
            continue
        times = []
        for _ in range(3):
            start = time.perf_counter()
            stage()
            times.append(time.perf_counter() - start)
        seconds[name] = median(times)
    out.write_text(json.dumps({"compiled": orchestrace_collector.compiled(), "seconds": seconds}))


def _worker_args(traces: int, spans_per_trace: int, tmp: Path) -> list[str]:
    """A conversion worker's arguments: it works in ``tmp`` and writes its result to ``tmp``.json."""
    size = f"{traces},{spans_per_trace}"
    return ["bench.collector_throughput", "--conversion", size, "--tmp", str(tmp), "--out", f"{tmp}.json"]


def _mode_env(mode: str) -> dict[str, str]:
    return {**os.environ, PURE_PYTHON_ENV: "1" if mode == "pure_python" else "0"}


def _figures(seconds: dict[str, float], total: int) -> dict[str, float]:
    return {
        "decode_spans_per_s": total / seconds["decode"],
        "convert_episode_spans_per_s": total / seconds["convert_episode"],
        "local_engine_spans_per_s": total / seconds["local_engine"],
        "local_engine_with_decode_spans_per_s": total / (seconds["local_engine"] + seconds["decode"]),
    }


def compare_modes(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """Every stage compiled (mypyc, the default) and pure Python, each in its own process, in rounds of one
    process per mode (order alternating: the shared machine's speed drifts); and their instructions per span
    under callgrind when valgrind is installed. Figures: medians over rounds; speedup: the median of each
    round's ratio."""
    total = sizes.convert_traces * sizes.spans_per_trace
    rounds: dict[str, list[dict[str, Any]]] = {"compiled": [], "pure_python": []}
    for r in range(MODE_ROUNDS):
        for mode in sorted(rounds, reverse=r % 2 == 1):
            args = _worker_args(sizes.convert_traces, sizes.spans_per_trace, tmp / f"{mode}-{r}")
            subprocess.run([sys.executable, "-m", *args], check=True, cwd=_ROOT, env=_mode_env(mode))
            worker = json.loads((tmp / f"{mode}-{r}.json").read_text())
            rounds[mode].append({"ran_compiled": worker["compiled"], **_figures(worker["seconds"], total)})
    keys = list(_figures({stage: 1.0 for stage in STAGES}, 1))
    modes: dict[str, Any] = {
        mode: {"ran_compiled": all(r["ran_compiled"] for r in runs)}
        | {key: median([r[key] for r in runs]) for key in keys}
        for mode, runs in rounds.items()
    }
    paired = list(zip(rounds["compiled"], rounds["pure_python"], strict=True))
    modes["speedup"] = {key: median([c[key] / p[key] for c, p in paired]) for key in keys}
    modes["rounds"] = MODE_ROUNDS
    modes["instructions"] = _count_modes(sizes, tmp)
    return modes


def _count_modes(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    if not available():
        return {"skipped": "valgrind is not installed"}
    traces = min(COUNTED_TRACES, sizes.convert_traces)
    spans = traces * sizes.spans_per_trace
    per_span = {}
    for mode in ("compiled", "pure_python"):
        args = _worker_args(traces, sizes.spans_per_trace, tmp / f"counted-{mode}")
        totals = count([*args, "--callgrind"], env=_mode_env(mode))
        stages = per_span[mode] = {name: totals[name] / spans for name in STAGES}
        stages["local_engine_with_decode"] = stages["local_engine"] + stages["decode"]
    compiled, pure = per_span["compiled"], per_span["pure_python"]
    ratio = {name: pure[name] / compiled[name] for name in compiled}
    return {"spans": spans, "per_span": per_span, "pure_over_compiled": ratio}


def measure_conversion(sizes: Sizes, tmp: Path, out: Path) -> dict[str, Any]:
    """The stages in both modes (:func:`compare_modes`), then ``orchestrace convert`` end to end and the
    profiles, in the default mode."""
    modes = compare_modes(sizes, tmp)
    stages = _stages(sizes.convert_traces, sizes.spans_per_trace, tmp / "profiled")
    dumps = write_dumps(tmp / "dumps", sizes.convert_traces, sizes.spans_per_trace, n_files=4)
    start = time.perf_counter()
    subprocess.run(
        [_cli(), "convert", *map(str, dumps), "--out", str(tmp / "cli-out")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    cli_s = time.perf_counter() - start
    total = sizes.convert_traces * sizes.spans_per_trace
    return {
        "spans": total,
        "traces": sizes.convert_traces,
        # The default mode's figures (compiled when ``make sync`` built the modules); ``modes`` has both.
        **{k: v for k, v in modes["compiled"].items() if k.endswith("_per_s")},
        "modes": modes,
        "cli_convert_spans_per_s": total / cli_s,
        "cli_convert_s": cli_s,
        "profile_local_engine": profile("convert_local_engine", stages["local_engine"], out),
        "profile_decode": profile("decode", stages["decode"], out),
    }


def profile_ingest(sizes: Sizes, tmp: Path, out: Path) -> dict[str, Any]:
    """The collector's main thread (HTTP receive, parse, WAL append) under pyinstrument, during one round."""
    from pyinstrument.session import Session

    session_file = tmp / "ingest.pyisession"
    collector_out = tmp / "ingest-profiled"
    with running_collector(collector_out, profile_to=session_file) as (url, _):
        send(
            url, encoded_requests(range(sizes.traces_per_round), sizes.spans_per_trace), sizes.sender_threads
        )
        TraceCounter(collector_out).wait_for(sizes.traces_per_round)
    # The main thread runs the HTTP handler (receive, parse, log); assembly and conversion run on another
    # thread, profiled in-process under "conversion".
    return summarize(
        "ingest_http_handler",
        Session.load(str(session_file)),
        out,
        focus="orchestrace_collector/receiver_http.py:export",
    )


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        ingest = measure_ingest(sizes, tmp)
        memory = measure_open_traces(sizes, tmp)
        conversion = measure_conversion(sizes, tmp, out)
        ingest["profile"] = profile_ingest(sizes, tmp, out)
    return {
        "sizes": sizes.__dict__,
        "nproc": len(os.sched_getaffinity(0)),
        "ingest": ingest,
        "memory": memory,
        "conversion": conversion,
        "targets": {
            "ingest_spans_per_core_s": INGEST_TARGET,
            "ingest_met": ingest["spans_per_collector_cpu_s"] >= INGEST_TARGET,
            "ack_met": ingest["ack_spans_per_s"] >= INGEST_TARGET,
            "convert_spans_per_core_s": CONVERT_TARGET,
            "convert_met": conversion["local_engine_with_decode_spans_per_s"] >= CONVERT_TARGET,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--send")
    parser.add_argument("--payloads", type=Path)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--conversion", help="TRACES,SPANS_PER_TRACE: time (or count) the conversion stages")
    parser.add_argument("--tmp", type=Path)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.conversion:
        traces, spans_per_trace = map(int, args.conversion.split(","))
        conversion_worker(traces, spans_per_trace, args.tmp, args.out, args.callgrind)
    else:
        _sender_main(args.send, args.payloads, args.threads, args.out)


if __name__ == "__main__":
    main()
