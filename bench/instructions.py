"""CPU instructions of parts of a benchmark, counted by valgrind's callgrind.

Time on a shared machine is noisy; an instruction count is deterministic (the same whatever else the machine
does), so the benchmarks report both. Instructions are not time (a cache miss or a contended lock weighs like
any other instruction), so verdicts stay the timed ones.

A counting worker is a ``python -m`` module started by :func:`count` under ``callgrind --instr-atstart=no``:
it sets up uncounted, then wraps each measured part in ``with counted(name):``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

_ROOT = Path(__file__).parent.parent


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def _control(*args: str) -> None:
    """Ask the callgrind running this process to do something (``callgrind_control``, through vgdb)."""
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)


@contextlib.contextmanager
def counted(name: str) -> Iterator[None]:
    """In a worker: count the instructions of the block as the part ``name``."""
    _control("--zero")
    _control("--instr=on")
    yield
    _control("--instr=off")
    _control(f"--dump={name}")


def count(module_args: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, int]:
    """Run ``python -m {module_args}`` under callgrind; the instructions of each part it counted, by name."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={tmp}/cg.out",
            sys.executable,
            "-m",
            *module_args,
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, cwd=_ROOT, env={**os.environ, **(env or {})}
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(module_args[:1])} under callgrind failed: {proc.stderr[-2000:]}")
        counts: dict[str, int] = {}
        for part in Path(tmp).glob("cg.out.*"):
            text = part.read_text()
            name = re.search(r"^desc: Trigger: dump (\S+)$", text, re.M)
            total = re.search(r"^totals: (\d+)$", text, re.M)
            if name and total:
                counts[name.group(1)] = int(total.group(1))
        return counts
