"""Run model calls under the real SDK with the in-process collector (``trace_dir``) and read the turns it
wrote, every trace and content file validated."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orchestrace as ot
from collector_fixtures import validate_trace_dir
from opentelemetry.sdk.trace import TracerProvider
from orchestrace.config import set_config
from orchestrace_collector.output import latest_turns


def record_turns(out: Path, body: Callable[[], Any], **options: Any) -> list[dict[str, Any]]:
    """Run ``body`` inside a task and an agent with content capture on (``options`` go to
    ``ot.configure``); return the written turns in call order."""
    handle = ot.configure(
        exporter="none",
        trace_dir=out,
        tracer_provider=TracerProvider(shutdown_on_exit=False),
        batch=False,
        **{"capture_content": True, **options},
    )
    try:

        @ot.agent
        def caller() -> None:
            body()

        with ot.task("replies"):
            caller()
    finally:
        handle.shutdown()
        set_config(None)
    traces = validate_trace_dir(out)
    turns = [t for ts in latest_turns(out, traces).values() for t in ts]
    return sorted(turns, key=lambda t: t["t"])
