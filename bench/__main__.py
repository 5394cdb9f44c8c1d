"""Run the benchmarks: ``python -m bench`` (full sizes, as ``make bench``) or ``python -m bench --quick``.

Writes ``results.json`` and ``results.md`` (and the scaling plot, and profiles) to ``--out``
(default ``bench/results``, and then the README's performance row too). A benchmark that fails is
recorded with its error and the others still run.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    collector_throughput,
    langgraph_overhead,
    long_episode,
    ray_convert,
    report,
    scaling,
    sdk_overhead,
    view_render,
)
from bench.machine import describe

BENCHMARKS: dict[str, Callable[[Path, bool], dict[str, Any]]] = {
    "sdk": sdk_overhead.run,
    "langgraph": langgraph_overhead.run,
    "collector": collector_throughput.run,
    "scaling": scaling.run,
    "ray": ray_convert.run,
    "view": view_render.run,
    "long_episode": long_episode.run,
}
RESULTS_DIR = Path(__file__).parent / "results"
#: Its performance row shows the figures of ``RESULTS_DIR`` (tests/test_readme.py checks they agree).
README = Path(__file__).parent.parent / "README.md"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny sizes (the smoke tests)")
    size.add_argument("--full", action="store_true", help="full sizes (the default)")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset of: %(default)s")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(sorted(unknown))}")
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / "results.json"
    # A partial run (--only) updates its benchmarks in the previous results and keeps the others.
    results: dict[str, Any] = (
        json.loads(json_path.read_text()) if json_path.exists() and len(names) < len(BENCHMARKS) else {}
    )
    results["machine"] = describe()
    for name in names:
        print(f"== {name}", flush=True)
        start = time.perf_counter()
        try:
            results[name] = BENCHMARKS[name](args.out, args.quick)
        except Exception as exc:  # one broken benchmark must not lose the others' results
            traceback.print_exc()
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        results[name]["bench_seconds"] = round(time.perf_counter() - start, 1)
        results[name]["date"] = datetime.now(UTC).isoformat(timespec="seconds")
        results[name]["quick"] = args.quick
        print(f"   {name} done in {results[name]['bench_seconds']} s", flush=True)
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    (args.out / "results.md").write_text(report.markdown(results))
    print(f"wrote {json_path} and {args.out / 'results.md'}")
    if args.out == RESULTS_DIR and not args.quick:
        README.write_text(report.with_readme_row(README.read_text(), results))


if __name__ == "__main__":
    main()
