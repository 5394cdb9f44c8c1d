"""The online loop on one machine, no GPU and no network: a fake engine (``fake_engine.py``), ``orchestrace
proxy`` in front of it, ``orchestrace collect``, the LangGraph app (``app.py``, tasks ``task-K``) and the
OpenAI Agents SDK app (``agents_app.py``, tasks ``agents-task-K``) each running N rollouts per task while the
trainer stand-in (``trainer.py``) takes groups from the live feed.

    python -m examples.online_rl.run --out /tmp/online --tasks 3 --n 4
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orchestrace as ot

from examples.online_rl import agents_app, app, fake_engine, trainer

#: The version of the engine's weights the proxy stamps on every turn (a trainer would bump it per update).
POLICY_VERSION = "step-0"
QUESTIONS = ("What is 6 times 7?", "Name a prime above 50.", "Spell 'orchestra' backwards.", "What is 2 + 2?")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _process(command: list[str], ready_url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A command running until the block ends, once ``ready_url`` answers (any status)."""
    with log.open("ab") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(ready_url, timeout=0.5)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{command[:4]} did not start:\n{log.read_text()}") from None
                time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        process.wait(60)


@dataclass
class Loop:
    """What a run did: the steps the trainer took, the rewards the app saw, the engine's base URL."""

    steps: list[trainer.Step]
    rewards: list[float]
    collector_url: str


def run(out: Path, *, tasks: int = 2, n: int = 3, streaming: bool = False) -> Loop:
    out.mkdir(parents=True, exist_ok=True)
    engine = fake_engine.serve()
    collector_port, proxy_port = _free_port(), _free_port()
    collector_url = f"http://127.0.0.1:{collector_port}"
    orchestrace = [sys.executable, "-m", "orchestrace_collector.cli"]
    collect = [*orchestrace, "collect", "--out", str(out / "traces"), "--port", str(collector_port),
               "--grpc-port", str(_free_port())]
    proxy = [*orchestrace, "proxy", "--upstream", f"http://127.0.0.1:{engine.server_port}/v1",
             "--port", str(proxy_port), "--collector", collector_url, "--policy-version", POLICY_VERSION]
    rewards: list[float] = []
    with (_process(collect, f"{collector_url}/healthz", out / "collector.log") as collector,
          _process(proxy, f"http://127.0.0.1:{proxy_port}/v1/models", out / "proxy.log")):
        handle = ot.configure("online-rl-app", exporter="otlp", endpoint=collector_url)
        graph = app.build(f"http://127.0.0.1:{proxy_port}/v1", streaming=streaming)
        agents = agents_app.build(f"http://127.0.0.1:{proxy_port}/v1")

        def rollouts() -> None:
            for attempt in range(n):
                for task in range(tasks):
                    question = QUESTIONS[task % len(QUESTIONS)]
                    rewards.append(app.rollout(graph, f"task-{task}", question, attempt))
                    rewards.append(agents_app.rollout(agents, f"agents-task-{task}", question, attempt))
            handle.force_flush()

        actor = threading.Thread(target=rollouts)
        actor.start()
        steps = list(trainer.train(collector_url, n, 2 * tasks, out / "trainer.cursor"))
        actor.join()
        handle.shutdown()
        collector.terminate()  # the collector writes what is still open before it exits
        collector.wait(60)
    engine.shutdown()
    return Loop(steps, rewards, collector_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    loop = run(args.out, tasks=args.tasks, n=args.n, streaming=args.stream)
    for step in loop.steps:
        outcomes = [e.outcome() for e in step.group.episodes]
        turns = sum(len(e.rows) for e in step.group.episodes)
        print(f"group {step.group.task_id}: {len(step.group.episodes)} rollouts, {turns} turns, "
              f"outcomes {outcomes}, advantages {step.advantages}")


if __name__ == "__main__":
    main()
