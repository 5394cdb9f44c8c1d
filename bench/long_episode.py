"""A long agent loop, end to end: export size against turns, and the memory of the app and of offline
conversion for one long episode.

The app is an ``@ot.llm`` loop in one rewarded task whose prompt is the whole history so far, with replies of
``REPLY_BYTES``. Export size: the OTLP-JSON span dump of 10 / 20 / 40 / 200 turns, with the history exported
once (the default) and with ``full_prompt=True`` (each call's whole prompt, as ``@ot.llm`` did before).
Memory: the long episode runs in a subprocess writing through all three paths at once (the OTLP exporter to a
real ``orchestrace collect``, ``trace_dir``, and a span dump), then the dump is converted offline in another;
each reports its peak RSS above its RSS before the episode (after imports), and every path must have written
every turn.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.collector_throughput import running_collector

REPLY_BYTES = 8 * 1024
SIZE_TURNS = (10, 20, 40, 200)
QUICK_SIZE_TURNS = (10, 20)
LONG_TURNS = 2_000
QUICK_LONG_TURNS = 50

APP = r"""
import json, resource, sys, time
import orchestrace as ot

turns, reply_bytes, dump, trace_dir, endpoint, full = sys.argv[1:7]
exporters = [f"file:{dump}"] + (["otlp"] if endpoint != "-" else [])
handle = ot.configure(exporter=exporters, endpoint=None if endpoint == "-" else endpoint,
                      trace_dir=None if trace_dir == "-" else trace_dir, capture_content=True,
                      full_prompt=full == "full")
# What the app holds anyway (the history it sends) is not the tracing's: the baseline is taken with it.
filler = "x" * int(reply_bytes)

@ot.llm("m")
def model(messages):
    return f"reply {len(messages)} " + filler

@ot.agent
def solver():
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
    for k in range(int(turns)):
        reply = model(history)
        history += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"next {k}"}]

base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
with ot.task("long-episode"):
    solver()
    ot.reward(1.0)
handle.force_flush()
handle.shutdown()
print(json.dumps({"seconds": time.perf_counter() - start, "base_kib": base,
                  "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "dropped_spans": handle.dropped_spans}))
"""

CONVERT = r"""
import json, resource, sys, time
from orchestrace_collector.cli import app

base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    app(["convert", sys.argv[1], "--out", sys.argv[2]])
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps({"seconds": time.perf_counter() - start, "base_kib": base,
                  "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _run(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=False,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-4000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["extra_rss_mib"] = round((result.pop("peak_kib") - result.pop("base_kib")) / 1024, 1)
    result["seconds"] = round(result["seconds"], 1)
    return result


def _turns_written(out: Path) -> dict[str, Any]:
    """The episode's turns as written under ``out``: how many, and how many have a prompt of the full
    history (``2 + 2k`` messages for turn ``k``) and whose messages were not cut."""
    from orchestrace_collector.output import latest_traces, latest_turns

    traces = latest_traces([out])  # the collector's also has its warm-up span's
    (trace,) = [t for t in traces.values() if t["task_id"] == "long-episode"]
    turns = latest_turns(out, traces)[trace["trace_id"]]
    whole = sum(1 for k, t in enumerate(turns) if len(t.get("prompt") or ()) == 2 + 2 * k)
    return {"turns": len(turns), "prompts_whole_length": whole,
            "truncated": sum(1 for t in turns if t.get("truncated")), "task_id": trace["task_id"],
            "team_reward": trace["rewards"].get("team")}


def export_sizes(sizes: tuple[int, ...], work: Path) -> list[dict[str, Any]]:
    rows = []
    for turns in sizes:
        row: dict[str, Any] = {"turns": turns}
        for mode in ("once", "full"):
            dump = work / f"size-{turns}-{mode}.jsonl"
            _run(APP, str(turns), str(REPLY_BYTES), str(dump), "-", "-", mode)
            row[f"{mode}_mb"] = round(dump.stat().st_size / 1e6, 2)
            dump.unlink()
        rows.append(row)
    return rows


def run(out: Path, quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-long-") as tmp:
        work = Path(tmp)
        sizes = export_sizes(QUICK_SIZE_TURNS if quick else SIZE_TURNS, work)
        memory = memory_run(QUICK_LONG_TURNS if quick else LONG_TURNS, work)
    return {"reply_bytes": REPLY_BYTES, "export_size": sizes, "long_episode": memory}


def memory_run(turns: int, work: Path) -> dict[str, Any]:
    collected = work / "collected"
    dump = work / "long.jsonl"
    with running_collector(collected) as (endpoint, _):
        app = _run(APP, str(turns), str(REPLY_BYTES), str(dump), str(work / "trace_dir"), endpoint, "once")
    convert = _run(CONVERT, str(dump), str(work / "converted"))
    return {"turns": turns, "app": app, "dump_mb": round(dump.stat().st_size / 1e6, 1), "convert": convert,
            "written": {"collect": _turns_written(collected), "trace_dir": _turns_written(work / "trace_dir"),
                        "convert": _turns_written(work / "converted")}}


