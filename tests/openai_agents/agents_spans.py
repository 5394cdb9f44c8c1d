"""Finished spans of one test and the written trace they convert to; the requests the Agents SDK's exporter
tried to send."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import httpx2
from finished_spans import FinishedSpans
from orchestrace_collector.convert import Episode, convert_episode
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.validate import validate_trace

#: Requests the Agents SDK's default exporter tried to send during the session (each test expects none new).
SENT: list[httpx2.Request] = []


def refuse(request: httpx2.Request) -> httpx2.Response:
    """Where the Agents SDK's exporter sends in these tests: recorded, answered 500, never on the network."""
    SENT.append(request)
    return httpx2.Response(500)


class Spans(FinishedSpans):
    def convert(self) -> tuple[dict[str, Any], Episode]:
        """The written trace of every span (one episode), after checking that it validates."""
        episode = convert_episode([span_from_readable(s) for s in self.all])
        written = json.loads(json.dumps(episode.trace.to_json_dict()))
        assert validate_trace(written) == [], validate_trace(written)
        return written, episode

    async def settled(self, name: str, rounds: int = 200) -> None:
        """Wait (collecting garbage) until a span ``name`` ended: abandoned runs end in their own tasks."""
        for _ in range(rounds):
            if self.named(name):
                return
            gc.collect()
            await asyncio.sleep(0.01)


def of_type(written: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [e for e in written["events"] if e["type"] == type_]


def edges_of(written: dict[str, Any], type_: str) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in written["edges"] if e["type"] == type_}
