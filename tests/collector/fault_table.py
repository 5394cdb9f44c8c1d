"""The fault table: runs the fault suite (fast and slow tests) with ``FAULT_TABLE`` set, then prints each
fault's figures as a Markdown table (sent, acknowledged, written, peak RSS).

    .tools/bin/uv run --frozen python tests/collector/fault_table.py [--out table.md] [--rows rows.jsonl]

``--rows`` renders rows gathered earlier (``FAULT_TABLE=rows.jsonl pytest ...``) without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: The tests that record a row (``fault_support.record_fault``).
FILES = ("test_faults.py", "test_output_limit.py", "test_collector_exposure.py")


def run_suite(rows: Path) -> int:
    tests = [str(HERE / name) for name in FILES]
    command = [sys.executable, "-m", "pytest", "-q", "-m", "slow or not slow", *tests]
    return subprocess.run(command, env={**os.environ, "FAULT_TABLE": str(rows)}, check=False).returncode


def _mib(value: float) -> str:
    return f"{value:.1f} MiB" if value else "not measured"


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| Fault | Requests sent | Acknowledged (runs / spans) | Refused 503 "
        "| Spans written (of acknowledged) | Peak RSS |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        peak = _mib(row["peak_rss_mib"])
        if row.get("memory_limit_mb"):
            growth = (row["peak_rss_mib"] - row["idle_rss_mib"]) / row["memory_limit_mb"]
            peak += f" (idle {row['idle_rss_mib']:.0f}; growth {growth:.2f} x the limit)"
        lines.append(
            f"| {row['fault']} | {row['sent']} | {row['acknowledged']} / {row['acknowledged_spans']} "
            f"| {row['refused_503']} | {row['written_spans_of_acknowledged']} | {peak} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the table here (else print it)")
    parser.add_argument("--rows", type=Path, help="render these rows instead of running the suite")
    args = parser.parse_args()
    status = 0
    if args.rows is None:
        rows_path = Path(tempfile.mkdtemp(prefix="fault-table-")) / "rows.jsonl"
        status = run_suite(rows_path)
    else:
        rows_path = args.rows
    rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
    table = render(rows)
    if args.out is not None:
        args.out.write_text(table)
    else:
        print(table, end="")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
