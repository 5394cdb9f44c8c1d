"""``orchestrace convert`` of many traces does work in proportion to them: the cyclic collector's passes and
the objects left when it is done do not grow faster than the traces (measured in a fresh process each, as the
suite runs: compiled when the build is current)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from collector_fixtures import validate_trace_dir

from bench.spangen import write_dumps

# Converts dumps as ``orchestrace convert`` does; prints the cyclic collector's passes per generation in the
# run, and the tracked objects and episodes alive once it returned.
_CONVERT = """
import gc
import json
import sys
from pathlib import Path

from orchestrace_collector import assemble
from orchestrace_collector.offline import convert_local
from orchestrace_collector.output import TraceDirWriter

passes = [0, 0, 0]
gc.callbacks.append(lambda phase, info: passes.__setitem__(info["generation"], passes[info["generation"]] + 1)
                    if phase == "start" else None)
writer = TraceDirWriter(Path(sys.argv[1]))
result = convert_local([Path(sys.argv[2])], writer)
writer.close()
del writer
gc.callbacks.clear()
gc.collect()
alive = gc.get_objects()
print(json.dumps({"written": result.written, "failed": result.failed, "passes": passes, "tracked": len(alive),
                  "episodes": sum(type(o) is assemble._Episode for o in alive)}))
"""


def _convert(tmp: Path, traces: int) -> dict[str, Any]:
    dumps = tmp / f"dumps-{traces}"
    write_dumps(dumps, traces, spans_per_trace=8, n_files=2)
    out = tmp / f"out-{traces}"
    done = subprocess.run([sys.executable, "-c", _CONVERT, str(out), str(dumps)],
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["written"] == traces and not result["failed"]
    assert len(validate_trace_dir(out)) == traces
    return result


def test_converting_twice_the_traces_costs_the_collector_at_most_twice_the_passes(tmp_path: Path) -> None:
    """Twice the traces: at most twice the cyclic collector's passes (plus start-up's few), and the same
    objects left once it returned, no episode among them. Before the written index took its entries as a
    function, the compiled assembler built every remembered write's entry on each write (mypyc makes a
    generator expression a list): 1,200 traces took 1,169 young passes (8 full) against 167 (1 full) for 600;
    now 2 and 2."""
    small, large = _convert(tmp_path, 600), _convert(tmp_path, 1_200)
    for generation in range(3):
        assert large["passes"][generation] <= 2 * small["passes"][generation] + 2, (small, large)
    assert small["episodes"] == large["episodes"] == 0
    assert abs(large["tracked"] - small["tracked"]) < 100, (small, large)
