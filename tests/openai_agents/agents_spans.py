"""Finished spans of one test and the written trace they convert to; the requests the Agents SDK's exporter
tried to send."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import httpx2
from finished_spans import FinishedSpans
from orchestrace_collector.convert import Episode
from written_traces import convert

#: Requests the Agents SDK's default exporter tried to send during the session (each test expects none new).
SENT: list[httpx2.Request] = []


def refuse(request: httpx2.Request) -> httpx2.Response:
    """Where the Agents SDK's exporter sends in these tests: recorded, answered 500, never on the network."""
    SENT.append(request)
    return httpx2.Response(500)


class Spans(FinishedSpans):
    def convert(self) -> tuple[dict[str, Any], Episode]:
        """The written trace of every span (one episode), after checking that it validates."""
        return convert(self.all)

    async def settled(self, name: str, rounds: int = 200) -> None:
        """Wait (collecting garbage) until a span ``name`` ended: abandoned runs end in their own tasks."""
        for _ in range(rounds):
            if self.named(name):
                return
            gc.collect()
            await asyncio.sleep(0.01)
