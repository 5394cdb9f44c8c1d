"""The machine and software a benchmark run was measured on."""

from __future__ import annotations

import os
import platform
from importlib import metadata

import psutil

PACKAGES = (
    "orchestrace",
    "orchestrace-langgraph",
    "orchestrace-collector",
    "opentelemetry-sdk",
    "opentelemetry-proto",
    "protobuf",
    "langgraph",
    "langchain-core",
    "langgraph-supervisor",
    "openinference-instrumentation-langchain",
    "opentelemetry-instrumentation-langchain",
    "uvicorn",
    "starlette",
    "pydantic",
    "ray",
    "pyarrow",
    "pyinstrument",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe() -> dict[str, object]:
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {dist: _version(dist) for dist in PACKAGES},
    }
