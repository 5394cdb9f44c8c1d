"""Scale-out: ``orchestrace convert --engine ray`` (a local Ray cluster) against the single-process engine.

Both run as the command a user types, on the same protobuf dump files (1,000,000 spans in 10,000 traces at
full size), timed end to end (interpreter and Ray start-up included). Their outputs must be the same: same
number of traces and turns, and the same SHA-256 over the sorted canonical JSON of each. Peak memory is the
largest sum of the resident sets of the command's process tree (Ray's workers and object store included;
shared pages count once per process that maps them).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.spangen import write_dumps


@dataclass(frozen=True)
class Sizes:
    traces: int
    spans_per_trace: int
    files: int


QUICK = Sizes(traces=20, spans_per_trace=50, files=2)
FULL = Sizes(traces=10_000, spans_per_trace=100, files=20)


def run_measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run ``cmd``; return its wall seconds, the peak summed RSS (MiB) of its process tree, and its stderr."""
    peak = [0.0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while not done.wait(0.2):
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    total += p.memory_info().rss
            except psutil.Error:
                continue  # a process ended between listing and reading: skip this sample
            peak[0] = max(peak[0], total / 2**20)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    return seconds, peak[0], stderr.decode(errors="replace")


_PLAN = re.compile(r"Execution plan of Dataset (\S+): (.*)")
_FINISHED = re.compile(r"Dataset (\S+) execution finished in ([\d.]+) seconds")


def ray_stages(log: str) -> list[dict[str, Any]]:
    """Each Ray Data execution of the run (its operators and seconds), read from Ray's log lines."""
    plans = {m.group(1): m.group(2) for m in _PLAN.finditer(log)}
    return [
        {
            "plan": plans.get(m.group(1), "?").removeprefix("InputDataBuffer[Input] -> "),
            "seconds": float(m.group(2)),
        }
        for m in _FINISHED.finditer(log)
    ]


def digest(out: Path, prefix: str) -> tuple[int, str]:
    """Line count and SHA-256 of the sorted canonical JSON lines of ``{prefix}*.jsonl`` in ``out``."""
    lines = sorted(
        json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"))
        for path in sorted(out.glob(f"{prefix}*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    cli = str(Path(sys.executable).parent / "orchestrace")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        start = time.perf_counter()
        write_dumps(tmp / "dumps", sizes.traces, sizes.spans_per_trace, sizes.files)
        generate_s = time.perf_counter() - start
        dump_mb = sum(p.stat().st_size for p in (tmp / "dumps").iterdir()) / 2**20
        local_s, local_mb, _ = run_measured([cli, "convert", str(tmp / "dumps"), "--out", str(tmp / "local")])
        env = {
            k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"
        }  # the local cluster, whatever the shell
        ray_s, ray_mb, ray_log = run_measured(
            [cli, "convert", str(tmp / "dumps"), "--out", str(tmp / "ray"), "--engine", "ray"], env=env
        )
        local_traces, local_turns = digest(tmp / "local", "traces-"), digest(tmp / "local", "turns-")
        ray_traces, ray_turns = digest(tmp / "ray", "traces-"), digest(tmp / "ray", "turns-")
    spans = sizes.traces * sizes.spans_per_trace
    return {
        "sizes": sizes.__dict__,
        "spans": spans,
        "dump_mb": dump_mb,
        "generate_s": generate_s,
        "nproc": len(os.sched_getaffinity(0)),
        "local": {
            "seconds": local_s,
            "spans_per_s": spans / local_s,
            "peak_rss_mb": local_mb,
            "traces": local_traces[0],
            "turns": local_turns[0],
        },
        "ray": {
            "seconds": ray_s,
            "spans_per_s": spans / ray_s,
            "peak_rss_tree_mb": ray_mb,
            "traces": ray_traces[0],
            "turns": ray_turns[0],
        },
        "ray_stages": ray_stages(ray_log),
        "speedup": local_s / ray_s,
        "same_output": local_traces == ray_traces and local_turns == ray_turns,
        "traces_sha256": local_traces[1],
        "turns_sha256": local_turns[1],
    }
