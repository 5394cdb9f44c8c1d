"""``GET /v1/episodes?after=CURSOR&wait=S&format=turns``: the live feed on the collector's HTTP port.

Answers ``{"cursor": ..., "episodes": [...]}``: the episodes written after ``CURSOR`` (``feed_index.py``), at
most ``limit``, each with its export rows in ``format`` (``turns``, ``trl``, ``tokens``, ``decisions``: the
rows ``orchestrace export`` writes, built by the same code). When none is there yet it waits up to ``wait``
seconds (long poll, at most :data:`MAX_WAIT_S`) for one. A later revision of an episode (a late reward) comes
again with ``"update": true``. The next request passes the answer's ``cursor``, which stays valid across
collector restarts. The receivers' token rule applies (the caller of ``create_app`` checks it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from orchestrace_collector.feed_index import CursorError, Entry, FeedIndex, format_cursor, parse_cursor
from orchestrace_collector.outcome import OutcomeKeyError, outcome_key

#: Feed formats and the export format whose rows they are.
FEED_FORMATS = {"turns": "jsonl", "trl": "trl", "tokens": "tokens", "decisions": "decisions"}
MAX_WAIT_S = 60.0
MAX_LIMIT = 1000
POLL_S = 0.05


def episodes_endpoint(
    index: FeedIndex, refused: Callable[[Request], Response | None]
) -> Callable[[Request], Awaitable[Response]]:
    async def episodes(request: Request) -> Response:
        denied = refused(request)
        if denied is not None:
            return denied
        query = request.query_params
        try:
            after = parse_cursor(query.get("after"))
            wait = min(max(float(query.get("wait", "0")), 0.0), MAX_WAIT_S)
            limit = min(max(int(query.get("limit", "100")), 1), MAX_LIMIT)
            fmt = query.get("format", "turns")
            if fmt not in FEED_FORMATS:
                raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FEED_FORMATS)}")
            key = outcome_key(query.get("outcome"))
        except (CursorError, OutcomeKeyError, ValueError) as exc:
            return PlainTextResponse(str(exc), status_code=400)
        deadline = time.monotonic() + wait
        while True:
            await run_in_threadpool(index.refresh)
            entries = index.after(after, limit)
            if entries or time.monotonic() >= deadline or await request.is_disconnected():
                break
            await asyncio.sleep(POLL_S)
        items = await run_in_threadpool(_items, index, entries, FEED_FORMATS[fmt], key)
        cursor = format_cursor(entries[-1].position if entries else after)
        return JSONResponse({"cursor": cursor, "episodes": items})

    return episodes


def _items(index: FeedIndex, entries: list[Entry], fmt: str, key: str | None) -> list[dict[str, Any]]:
    # Imported here: the export code needs pyarrow (the ``export`` extra), which ingestion alone does not.
    from orchestrace_collector.export import ExportError, episode_of, rows

    items = []
    for entry in entries:
        trace, turns = index.load(entry)
        episode = episode_of(trace, turns, key)
        skipped: list[str] = []
        try:
            found = rows([episode], fmt, skipped=skipped)
        except ExportError as exc:
            found, skipped = [], [str(exc)]
        items.append(
            {
                "cursor": format_cursor(entry.position),
                "trace_id": entry.trace_id,
                "task_id": episode.task_id,
                "revision": entry.revision,
                "update": entry.update,
                "outcome": episode.outcome(),
                "rewards": trace.get("rewards") or {},
                "flags": episode.flags,
                "rows": found,
                "skipped": skipped,
            }
        )
    return items
