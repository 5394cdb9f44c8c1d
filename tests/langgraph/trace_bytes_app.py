"""One deterministic run for ``test_trace_bytes.py``, in its own process (``ot.configure`` is process-wide):
``python tests/langgraph/trace_bytes_app.py APP OUT [--capture-content]``.

``APP`` is ``bench`` (every graph of ``bench/graphs.py``, each run twice, so what an instrumentation keeps
between runs is exercised too) or an example's name (``examples/<name>/app.py``, run as its ``main``). Spans
go as OTLP-JSON lines to ``OUT/spans.jsonl`` and orchestration traces to ``OUT/traces``, through a
``BatchSpanProcessor`` as users run it. The run is made repeatable: LangChain's run ids and every other
``uuid4``/``uuid6``/``uuid7`` come from a seeded generator, and Send fan-outs run one task at a time, so
that two runs of the same code write the same data (ids and times are normalised by the test).
"""

from __future__ import annotations

import contextlib
import importlib
import random
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

_rng = random.Random(0)
_rng_lock = threading.Lock()


def _seeded_uuid(*_: Any, **__: Any) -> uuid.UUID:
    with _rng_lock:
        return uuid.UUID(int=_rng.getrandbits(128), version=4)


def _seed_uuids() -> None:
    """Replace every uuid4/uuid6/uuid7 function that modules imported by name (and ``uuid.uuid4``)."""
    import langchain_core.utils.uuid as lc_uuid

    originals = {id(uuid.uuid4), id(lc_uuid.uuid7)}
    for module in list(sys.modules.values()):
        for name in ("uuid4", "uuid6", "uuid7"):
            value = getattr(module, name, None)
            if value is not None and (id(value) in originals or name == "uuid6") and callable(value):
                with contextlib.suppress(AttributeError, TypeError):  # a read-only module attribute
                    setattr(module, name, _seeded_uuid)


def _one_at_a_time() -> None:
    """Every graph run with ``max_concurrency=1``: its Send tasks run in order, not racing on two threads."""
    from langchain_core.runnables.config import var_child_runnable_config

    var_child_runnable_config.set({"max_concurrency": 1})


def run_bench(out: Path, capture: bool) -> None:
    import orchestrace as ot
    from orchestrace_langgraph import LangGraphInstrumentor

    from bench.graphs import GRAPHS

    handle = ot.configure("trace-bytes", exporter=f"file:{out / 'spans.jsonl'}", trace_dir=out / "traces",
                          capture_content=capture)
    LangGraphInstrumentor().instrument()
    _seed_uuids()
    _one_at_a_time()
    for factory, inputs in GRAPHS.values():
        graph = factory()
        for _ in range(2):
            graph.invoke(inputs)
    handle.shutdown()


def run_example(name: str, out: Path, capture: bool) -> None:
    module = importlib.import_module(f"examples.{name}.app")
    importlib.import_module("orchestrace_langgraph")
    _seed_uuids()
    _one_at_a_time()
    argv = ["--exporter", f"file:{out / 'spans.jsonl'}", "--trace-dir", str(out / "traces")]
    module.main([*argv, *(["--capture-content"] if capture else [])])
    import orchestrace as ot

    ot.configure().shutdown()


if __name__ == "__main__":
    app, out, *flags = sys.argv[1:]
    capture = "--capture-content" in flags
    if app == "bench":
        run_bench(Path(out), capture)
    else:
        run_example(app, Path(out), capture)
