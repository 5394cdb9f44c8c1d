"""The guard of every performance change to the LangGraph integration and the SDK: the data written for the
bench graphs (``bench/graphs.py``, capture off and on) and the examples' LangGraph apps (capture on) stays
the same, byte for byte, once the values that differ between two runs of the same code are set aside.

Each run is a process of its own (``trace_bytes_app.py``: seeded uuids and hash seed, Send tasks one at a
time), exporting
as users do (a ``BatchSpanProcessor``, the OTLP-JSON file exporter and the in-process ``trace_dir`` writer,
flushed by ``shutdown``). Both the in-process output and ``orchestrace convert`` of the exported spans are
compared with ``trace_bytes/<run>.jsonl``: the last revision of every trace, its turns, and every stored
content file (by its ``sha256`` name). Span and trace ids are numbered by first appearance and times are
replaced by a placeholder (the keys stay); everything else, content refs included, is compared as written.
Regenerate with ``ORCHESTRACE_UPDATE_GOLDEN=1`` when a change of the data is meant.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from collector_fixtures import validate_trace_dir
from orchestrace_collector.output import content_refs, latest_traces, latest_turns, read_content

HERE = Path(__file__).parent
EXPECTED = HERE / "trace_bytes"
DRIVER = HERE / "trace_bytes_app.py"
#: Run name -> the driver's arguments after the output directory's.
RUNS: dict[str, tuple[str, ...]] = {
    "bench-capture-off": ("bench",),
    "bench-capture-on": ("bench", "--capture-content"),
    **{f"{name}-capture-on": (name, "--capture-content")
       for name in ("supervisor", "swarm", "map_reduce", "hierarchical", "human_in_the_loop")},
}
#: Keys whose values are clock readings (or derived from them).
_TIMING = {"t", "t_end", "t_start", "wall_clock_s", "parallelism_efficiency", "start_time", "end_time"}
#: OTel trace (32 hex) and span (16 hex) ids, and UUIDs, not inside a longer hex run (a sha256 stays).
_ID = re.compile(
    r"(?<![0-9a-f])(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}|[0-9a-f]{16})"
    r"(?![0-9a-f])"
)


class _Ids:
    """Each id found becomes ``<idN>``, numbered by first appearance."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def _one(self, match: re.Match[str]) -> str:
        return self.seen.setdefault(match.group(0), f"<id{len(self.seen) + 1}>")

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {self(k): ("<time>" if k in _TIMING else self(v, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str):
            return _ID.sub(self._one, value)
        return value


def normalized(out: Path) -> list[str]:
    """What ``out`` holds, one JSON line per trace, turn and content file, ids and times normalised."""
    traces = latest_traces([out])
    turns = latest_turns(out, traces)
    ids = _Ids()
    lines = []
    for trace_id, trace in traces.items():
        lines.append(json.dumps({"trace": ids(trace)}))
        lines.extend(json.dumps({"turn": ids(turn)}) for turn in turns[trace_id])
    refs = content_refs(out)
    for ref in sorted(refs):
        lines.append(json.dumps({"content": ref, "text": read_content(out, ref, refs)}))
    return lines


def _run(name: str, out: Path) -> Path:
    out.mkdir(parents=True)
    # A fixed hash seed: langgraph-supervisor offers its handoff tools in the order of a set of names.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ORCHESTRACE_"))}
    env["PYTHONHASHSEED"] = "0"
    done = subprocess.run([sys.executable, str(DRIVER), RUNS[name][0], str(out), *RUNS[name][1:]],
                          capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr
    converted = out / "converted"
    convert = [sys.executable, "-m", "orchestrace_collector.cli", "convert", str(out / "spans.jsonl")]
    done = subprocess.run([*convert, "--out", str(converted)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Every run, two at a time (the machine's cores), each in ``<tmp>/<run>``."""
    root = tmp_path_factory.mktemp("trace_bytes")
    with ThreadPoolExecutor(2) as pool:
        yield dict(zip(RUNS, pool.map(lambda name: _run(name, root / name), RUNS), strict=True))


@pytest.mark.parametrize("run", list(RUNS))
def test_written_traces_turns_and_content_stay_the_same(run: str, written: dict[str, Path]) -> None:
    out = written[run]
    lines = {}
    for source, path in (("trace_dir", out / "traces"), ("convert", out / "converted")):
        assert validate_trace_dir(path)
        lines[source] = normalized(path)
    expected = EXPECTED / f"{run}.jsonl"
    if os.environ.get("ORCHESTRACE_UPDATE_GOLDEN"):
        expected.write_text("\n".join(lines["trace_dir"]) + "\n")
    want = expected.read_text().splitlines()
    assert any('"content"' in line for line in want) == run.endswith("capture-on")
    for source, got in lines.items():
        first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
        assert got == want, f"{source} output of {run} changed (first different line: {first})"
