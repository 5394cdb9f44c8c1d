"""Scale-out: ``orchestrace convert --engine ray`` against the single-process engine, on the same dump files.

Both run as the command a user types, on the same protobuf dump files (1,000,000 spans in 10,000 traces at
full size), timed end to end (interpreter start-up included). The Ray engine runs twice:

* on a local Ray cluster the command starts and stops itself (no ``--address``): cluster start-up included;
* against an already running cluster (``ray start --head --num-cpus N`` here, then ``--address``), as a user
  with a real cluster runs it: the cluster's start-up is paid once, outside the command.

The local engine runs first and last (median of the two), so that a change in the machine's load during the
run weighs on both sides. All outputs must be the same: same number of traces and turns, and the same SHA-256
over the sorted canonical JSON of each. Peak memory is the largest sum of the resident sets of the command's
process tree (for the running cluster, the cluster's processes too; shared pages count once per process that
maps them).

A paper estimate (``estimate``), from measured per-stage costs, in CPU seconds (the machine is shared: other
load stretches wall times, not CPU times; a single-threaded command's CPU seconds are its wall time on a free
core). The Ray engine's stages run here in one process on the same dumps: the scan of every file, the split
of the scanned spans per convert task and the conversion of every episode (``parallel``: they run in parallel
on a cluster), and the driver's work (keying traces by episode and dealing episodes out, writing every line:
``driver``, serial). ``overhead`` is the rest of the CPU seconds the running-cluster run cost (its command and
the cluster's processes): interpreter and worker start-up, serialization, the object store, scheduling.
On ``C`` free cores of a running cluster (its start-up is paid once, outside the command):
``T(C) = driver + (parallel + overhead) / C`` when the overhead spreads over the cores like the stages (the
optimistic case), ``driver + parallel / C + overhead / 2`` when it stays what it was on the 2 measured cores
(the pessimistic one); the speedup is the local engine's CPU seconds over ``T``. Neither counts the stages'
imbalance or the wait between scan and convert.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from bench.spangen import write_dumps


@dataclass(frozen=True)
class Sizes:
    traces: int
    spans_per_trace: int
    files: int


QUICK = Sizes(traces=20, spans_per_trace=50, files=2)
FULL = Sizes(traces=10_000, spans_per_trace=100, files=20)


#: The kinds of process a run's CPU seconds are summed by (``ProcessCpu``).
KINDS = ("driver", "raylet", "gcs_server", "worker_startup", "worker_tasks", "worker_idle", "other")


class ProcessCpu:
    """CPU seconds by kind of process, from samples of the processes' CPU times and titles. A Ray worker
    shows ``ray::<task>`` as its title while it runs a task and ``ray::IDLE`` between tasks, so that its CPU
    splits into its start-up (before its first task: the interpreter, ``import ray``, registering), task time
    (the task's function, its arguments' and results' (de)serialization, and the import of the task's module
    on its first call) and idle time. A sample's CPU goes to the title seen at that sample (a task first seen
    takes the CPU since the previous sample)."""

    def __init__(self, driver: int) -> None:
        self.driver = driver
        self.seconds = dict.fromkeys(KINDS, 0.0)
        self._last: dict[int, tuple[float, str]] = {}  # pid -> (CPU seconds, kind) at its last sample
        self._tasks: dict[int, list[str]] = {}  # worker pid -> the tasks it ran, in order, once each

    def start(self, pid: int, cpu_s: float) -> None:
        """``pid`` was already running: count only its CPU from now on."""
        self._last[pid] = (cpu_s, "")

    def sample(self, pid: int, cpu_s: float, title: str) -> None:
        kind = self._kind(pid, title)
        before, _ = self._last.get(pid, (0.0, ""))  # a new process: all its CPU so far
        self.seconds[kind] += cpu_s - before
        self._last[pid] = (cpu_s, kind)

    def _kind(self, pid: int, title: str) -> str:
        if pid == self.driver:
            return "driver"
        program = title.split(" ", 1)[0]
        if program.endswith("/raylet"):  # before workers: its command line names the worker command
            return "raylet"
        if program.endswith("/gcs_server"):
            return "gcs_server"
        if program in ("ray::DashboardAgent", "ray::RuntimeEnvAgent") or not (
            program.startswith("ray::") or "default_worker.py" in title
        ):
            return "other"
        tasks = self._tasks.setdefault(pid, [])
        if program.startswith("ray::") and program != "ray::IDLE":
            if program not in tasks:
                tasks.append(program)
            return "worker_tasks"
        return "worker_idle" if tasks else "worker_startup"

    def workers(self) -> dict[str, Any]:
        """How many worker processes ran, and which tasks each ran (the same process reused across stages)."""
        return {"count": len(self._tasks), "tasks": sorted(" ".join(t) for t in self._tasks.values())}


def run_measured(
    cmd: list[str], env: dict[str, str] | None = None, also: psutil.Process | None = None
) -> tuple[float, float, ProcessCpu, str]:
    """Run ``cmd``; return its wall seconds, the peak summed RSS (MiB) and the CPU seconds of its process tree
    (and of ``also``'s tree, during the run) by kind of process, and its stderr. CPU seconds are sampled every
    0.1 s (the command's own from its rusage at its end): a process's last 0.1 s before it ends can be
    missed."""
    peak = [0.0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cpu = ProcessCpu(proc.pid)
    for p in _tree(also) if also else []:
        try:
            cpu.start(p.pid, _cpu_s(p))
        except psutil.Error:
            continue
    done = threading.Event()
    children = [False]  # whether the command ever had processes of its own (its own Ray cluster)

    def sample() -> None:
        command = psutil.Process(proc.pid)
        while not done.wait(0.1):
            total = 0
            mine = _tree(command)
            children[0] = children[0] or len(mine) > 1
            for p in [*mine, *(_tree(also) if also else [])]:
                try:
                    total += p.memory_info().rss
                    cpu.sample(p.pid, _cpu_s(p), " ".join(p.cmdline()))
                except psutil.Error:
                    continue  # it ended between listing and reading
            peak[0] = max(peak[0], total / 2**20)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    if not children[0]:
        # The command's whole CPU, its last moments included (a command with processes of its own: they are
        # in its rusage too, and sampled already).
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.sample(proc.pid, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, "")
    return seconds, peak[0], cpu, stderr.decode(errors="replace")


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def ray_cluster(cpus: int, env: dict[str, str]) -> Iterator[tuple[str, psutil.Process, float]]:
    """A Ray head node of ``cpus`` CPUs for the duration: (its address, its ``ray start`` process, seconds it
    took to start). It keeps its files in a temporary directory of its own, so that no other process's bare
    ``ray.init()`` finds and joins it, and is stopped by signalling its own process group (``ray stop`` would
    stop every Ray cluster of the machine, other users' too)."""
    port = _free_port()
    ray_cli = str(Path(sys.executable).parent / "ray")
    start = time.perf_counter()
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must stay short
    options = [f"--port={port}", f"--num-cpus={cpus}", f"--temp-dir={temp_dir}"]
    options += ["--include-dashboard=false", "--disable-usage-stats"]
    head = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the cluster's processes, and only them
    )
    try:
        output = _wait_for(head.stdout, "Ray runtime started")
        if output is not None:
            raise RuntimeError(f"ray start failed: {output[-2000:]}")
        started_s = time.perf_counter() - start
        assert head.stdout is not None
        threading.Thread(target=head.stdout.read, daemon=True).start()  # keep its pipe from filling
        yield f"127.0.0.1:{port}", psutil.Process(head.pid), started_s
    finally:
        _stop_group(head)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for(stream: IO[str] | None, marker: str) -> str | None:
    """Read ``stream`` until a line holds ``marker`` (None), or to its end (what it said)."""
    seen: list[str] = []
    for line in stream or ():
        if marker in line:
            return None
        seen.append(line)
    return "".join(seen)


def _stop_group(head: subprocess.Popen[str]) -> None:
    """SIGTERM to the cluster's process group, then SIGKILL to whatever of it is left after a grace period
    (a throwaway cluster: its parts take half a minute to stop gracefully, for nothing kept)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            head.poll()  # reap the head itself, so that it does not linger in the group as a zombie
            try:
                os.killpg(head.pid, 0)  # anyone left in the group?
            except ProcessLookupError:
                break
            time.sleep(0.5)
    head.wait()


def stage_costs(dumps: Path, out: Path) -> dict[str, float]:
    """CPU seconds of each stage of the Ray engine on ``dumps``, run in this process without Ray (the same
    functions the workers and the driver run; two convert tasks, one part per file)."""
    from orchestrace_collector.assemble import default_converter
    from orchestrace_collector.output import TraceDirWriter
    from orchestrace_collector.ray_engine import convert_rows, deal, episode_keys, scan, split

    files = sorted(str(p) for p in dumps.iterdir())
    start = time.process_time()
    scanned = [scan(i, path, 0, 1) for i, path in enumerate(files)]
    scan_s = time.process_time() - start
    start = time.process_time()
    indexes = [index for index, _ in scanned]
    keys = episode_keys(indexes)
    assigned = deal(indexes, keys, 2)
    episodes = [[keys.get(t.trace, t.trace) for t in index.traces] for index in indexes]
    key_s = time.process_time() - start
    start = time.process_time()
    pieces = [split(spans, names, [assigned[name] for name in names], 2)
              for (_, spans), names in zip(scanned, episodes, strict=True)]
    split_s = time.process_time() - start
    del scanned
    writer = TraceDirWriter(out)
    start = time.process_time()
    batches = [batch for task in range(2)
               for batch in convert_rows([p[task] for p in pieces], default_converter, None,
                                         writer.max_trace_bytes)]
    convert_s = time.process_time() - start
    start = time.process_time()
    for batch in batches:
        for _, lines, _ in batch:
            assert lines is not None
            writer.write_raw(*lines)
    writer.close()
    write_s = time.process_time() - start
    return {"scan_cpu_s": scan_s, "keys_cpu_s": key_s, "split_cpu_s": split_s, "convert_cpu_s": convert_s,
            "write_cpu_s": write_s}


def estimate(costs: dict[str, float], ray_cpu_s: float, local_cpu_s: float, cores: int,
             target_cores: int = 32) -> dict[str, float]:
    """Seconds and speedup over the local engine on ``cores`` and ``target_cores`` free cores of a running
    cluster (see the module docstring), in CPU seconds."""
    parallel = costs["scan_cpu_s"] + costs["split_cpu_s"] + costs["convert_cpu_s"]
    driver = costs["keys_cpu_s"] + costs["write_cpu_s"]
    overhead = max(0.0, ray_cpu_s - (driver + parallel))
    measured = driver + (parallel + overhead) / cores
    pessimistic = driver + parallel / target_cores + overhead / cores
    optimistic = driver + (parallel + overhead) / target_cores
    return {
        "cores": target_cores,
        "parallel_cpu_s": parallel,
        "driver_cpu_s": driver,
        "overhead_cpu_s": overhead,
        "local_cpu_s": local_cpu_s,
        "measured_cores": cores,
        "seconds_measured_cores": measured,
        "speedup_measured_cores": local_cpu_s / measured,
        "seconds_pessimistic": pessimistic,
        "seconds_optimistic": optimistic,
        "speedup_pessimistic": local_cpu_s / pessimistic,
        "speedup_optimistic": local_cpu_s / optimistic,
    }


def overhead_by_process(costs: dict[str, float], by_process: dict[str, float]) -> dict[str, float]:
    """The running-cluster run's overhead (``estimate``) by kind of process: the driver's CPU beyond its
    stages (keys, writing), the workers' task CPU beyond the parallel stages (serialization, the object store,
    the task module's import, and the stages' own variation between runs), and the rest as measured."""
    parallel = costs["scan_cpu_s"] + costs["split_cpu_s"] + costs["convert_cpu_s"]
    return {
        "driver": by_process["driver"] - (costs["keys_cpu_s"] + costs["write_cpu_s"]),
        "worker_startup": by_process["worker_startup"],
        "worker_tasks": by_process["worker_tasks"] - parallel,
        "worker_idle": by_process["worker_idle"],
        "raylet": by_process["raylet"],
        "gcs_server": by_process["gcs_server"],
        "other": by_process["other"],
    }


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
    cpus = len(os.sched_getaffinity(0))
    # The local cluster, whatever the shell; and Ray's `uv run` hook off, as the engine sets it for a local
    # cluster (under `uv run` it would package the working directory for the running cluster's workers,
    # which already share this environment); and, as the engine does too, Ray's multi-node mode off, so that
    # the running cluster (`ray start --head`) listens on 127.0.0.1 only, as the command's own does.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        dumps = str(tmp / "dumps")
        start = time.perf_counter()
        write_dumps(tmp / "dumps", sizes.traces, sizes.spans_per_trace, sizes.files)
        generate_s = time.perf_counter() - start
        dump_mb = sum(p.stat().st_size for p in (tmp / "dumps").iterdir()) / 2**20

        def convert(name: str, *args: str, also: psutil.Process | None = None) -> dict[str, Any]:
            seconds, peak_mb, cpu, _ = run_measured(
                [cli, "convert", dumps, "--out", str(tmp / name), *args], env=env, also=also
            )
            cpu_s = sum(cpu.seconds.values())
            traces, turns = digest(tmp / name, "traces-"), digest(tmp / name, "turns-")
            return {
                "seconds": seconds,
                # CPU seconds the command's processes got, over its wall time: the cores it actually had
                # (other load on the machine takes the rest).
                "cpu_s": cpu_s,
                "cores_used": cpu_s / seconds,
                "spans_per_s": sizes.traces * sizes.spans_per_trace / seconds,
                "peak_rss_mb": peak_mb,
                "cpu_by_process": cpu.seconds,
                "workers": cpu.workers(),
                "traces": traces[0],
                "turns": turns[0],
                "digest": (traces, turns),
            }

        local_first = convert("local-first")
        on_ray = convert("ray", "--engine", "ray")
        # Ray secures the clusters it starts with a token (~/.ray/auth_token); a driver given an address uses
        # it only when told to, as a user of a real cluster does.
        env |= {"RAY_AUTH_MODE": "token"}
        with ray_cluster(cpus, env) as (address, head, cluster_start_s):
            on_cluster = convert("ray-cluster", "--engine", "ray", "--address", address, also=head)
        del env["RAY_AUTH_MODE"]
        local_last = convert("local-last")
        costs = stage_costs(tmp / "dumps", tmp / "stages")
    runs = (local_first, on_ray, on_cluster, local_last)
    same_output = all(r["digest"] == local_first["digest"] for r in runs)
    (traces_sha, turns_sha) = (local_first["digest"][0][1], local_first["digest"][1][1])
    for r in runs:
        del r["digest"]
    local_s = statistics.median([local_first["seconds"], local_last["seconds"]])
    spans = sizes.traces * sizes.spans_per_trace
    return {
        "sizes": sizes.__dict__,
        "spans": spans,
        "dump_mb": dump_mb,
        "generate_s": generate_s,
        "nproc": cpus,
        "local": {
            "seconds": local_s,
            "runs_s": [local_first["seconds"], local_last["seconds"]],
            "cores_used": [local_first["cores_used"], local_last["cores_used"]],
            "cpu_s": [local_first["cpu_s"], local_last["cpu_s"]],
            "spans_per_s": spans / local_s,
            "peak_rss_mb": max(local_first["peak_rss_mb"], local_last["peak_rss_mb"]),
            "traces": local_first["traces"],
            "turns": local_first["turns"],
        },
        "ray": {
            "seconds": on_ray["seconds"],
            "spans_per_s": on_ray["spans_per_s"],
            "peak_rss_tree_mb": on_ray["peak_rss_mb"],
            "cpu_s": on_ray["cpu_s"],
            "cores_used": on_ray["cores_used"],
            "traces": on_ray["traces"],
            "turns": on_ray["turns"],
        },
        # (a) the command starts its own local cluster: its start-up is in the time.
        "speedup": local_s / on_ray["seconds"],
        "ray_running_cluster": {
            "seconds": on_cluster["seconds"],
            "spans_per_s": on_cluster["spans_per_s"],
            "peak_rss_tree_mb": on_cluster["peak_rss_mb"],
            "cpu_s": on_cluster["cpu_s"],
            "cores_used": on_cluster["cores_used"],
            "traces": on_cluster["traces"],
            "turns": on_cluster["turns"],
            "cpu_by_process": on_cluster["cpu_by_process"],
            "workers": on_cluster["workers"],
            "cluster_cpus": cpus,
            "cluster_start_s": cluster_start_s,
        },
        # (b) against a cluster already running (`ray start`, then --address): start-up paid once, outside.
        "speedup_running_cluster": local_s / on_cluster["seconds"],
        "stage_costs": costs,
        "estimate": estimate(costs, on_cluster["cpu_s"],
                             statistics.median([local_first["cpu_s"], local_last["cpu_s"]]), cpus),
        "overhead_by_process": overhead_by_process(costs, on_cluster["cpu_by_process"]),
        "same_output": same_output,
        "traces_sha256": traces_sha,
        "turns_sha256": turns_sha,
    }
