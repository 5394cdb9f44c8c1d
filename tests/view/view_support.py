"""``orchestrace view`` as users start it (a subprocess on a free loopback port) and a headless Chromium to
read its pages, plus what a page should show, computed from the written trace by the rules
``docs/viewer.md`` states."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from collector_fixtures import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextmanager
def running_view(*paths: Path, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """``orchestrace view PATHS`` on a free port; yields its base URL; stopped with SIGTERM."""
    for _ in range(3):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrace_collector.cli", "view", *map(str, paths), "--port", str(port),
             *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "NO_COLOR": "1"},
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        if line.startswith("orchestrace view: http"):
            break
        process.wait(timeout=10)
        error = process.stderr.read() if process.stderr else ""
        assert "cannot bind" in error, error  # a port taken meanwhile: another one
    else:
        raise AssertionError("orchestrace view did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_ready(page: Any, timeout_ms: int = 20_000) -> str:
    """Wait until the page finished rendering (or showed an error); returns the state."""
    page.wait_for_selector("#app[data-state=ready], #app[data-state=error]", timeout=timeout_ms)
    state: str = page.get_attribute("#app", "data-state")
    return state


def open_page(page: Any, url: str) -> str:
    page.goto(url)
    return wait_ready(page)


def route_to(page: Any, base: str, fragment: str) -> str:
    """Open ``base`` at ``fragment`` (a fresh load, as a shared link is opened)."""
    page.goto("about:blank")
    return open_page(page, f"{base}/{fragment}")


# --- what a page should show, from the trace ---------------------------------------------------------------


def lane_key(agent: str, activation: int | None) -> str:
    return json.dumps([agent, activation], separators=(",", ":"))


def expected_lanes(trace: dict[str, Any], turns: list[dict[str, Any]]) -> dict[str, str]:
    """Every event's lane key: its (agent, activation); a tool's result in its caller's lane."""
    by_id = {e["id"]: e for e in trace["events"]}
    caller = {edge["dst"]: by_id[edge["src"]] for edge in trace["edges"]
              if edge["type"] == "return" and by_id[edge["src"]]["type"] == "tool_call"
              and by_id[edge["dst"]]["type"] == "tool_result"}
    lanes = {}
    for event in trace["events"]:
        owner = event if isinstance(event.get("activation"), int) else caller.get(event["id"], event)
        lanes[event["id"]] = lane_key(owner["agent"], owner.get("activation"))
    for turn in turns:
        lanes[turn["turn_id"]] = lane_key(turn["agent"], turn.get("activation"))
    return lanes


def target_lane(trace: dict[str, Any], event: dict[str, Any]) -> str | None:
    """The lane ``to`` names: by ``to_activation`` when written, else by the instance label."""
    if event.get("to") is None:
        return None
    if isinstance(event.get("to_activation"), int):
        return lane_key(event["to"], event["to_activation"])
    most: dict[str, int] = {}
    for e in trace["events"]:
        if isinstance(e.get("activation"), int):
            most[e["agent"]] = max(most.get(e["agent"], 0), e["activation"])
    for agent, n in most.items():
        for k in range(1, n + 1):
            if (f"{agent}#{k}" if n > 1 else agent) == event["to"]:
                return lane_key(agent, k)
    return None


def expected_arrows(trace: dict[str, Any], turns: list[dict[str, Any]]) -> dict[str, str]:
    """Arrow id -> kind: spawns, messages, returns to a parent, delegations (handoffs apart), and one per
    aggregate edge (``src>dst``); never within one lane."""
    lanes = expected_lanes(trace, turns)
    arrows = {}
    for event in trace["events"]:
        kind = None
        if event["type"] in ("spawn", "message") or (event["type"] == "return" and event.get("to")):
            kind = event["type"]
        elif event["type"] == "orchestrator_decision" and event.get("decision") == "delegate":
            kind = "handoff" if event.get("handoff") else "delegate"
        target = target_lane(trace, event)
        if kind and target and target != lanes[event["id"]]:
            arrows[event["id"]] = kind
    for edge in trace["edges"]:
        if edge["type"] == "aggregate" and lanes[edge["src"]] != lanes[edge["dst"]]:
            arrows[f"{edge['src']}>{edge['dst']}"] = "aggregate"
    return arrows


def wait_for(predicate: Any, timeout_s: float, message: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(message)
