"""The online loop's costs: what ``orchestrace proxy`` adds to a model call (p50/p99 against calling the
engine directly, streaming and not), and how many episodes per second the live feed delivers to 1 and to 4
consumers while the collector ingests (and from a backlog already written).

    python -m bench.online_rl [--quick]     # prints the figures and writes bench/results/online_rl.json

The engine is the example's fake one (``examples/online_rl/fake_engine.py``, in this process); the proxy and
the collector are the real commands, in their own processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
from orchestrace_collector.feed import Feed

from examples.online_rl import fake_engine
from examples.online_rl.run import _free_port, _process

RESULTS = Path(__file__).parent / "results"
SENDER = textwrap.dedent("""
    import sys
    import orchestrace as ot

    endpoint, count = sys.argv[1], int(sys.argv[2])
    handle = ot.configure("feed-bench", exporter="otlp", endpoint=endpoint, capture_content=True)

    @ot.llm("policy", provider="bench")
    def chat(messages, answer):
        return {"choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2},
                "prompt_token_ids": [1, 2, 3, 4, 5]}

    @ot.agent
    def solver(k):
        chat([{"role": "user", "content": f"question {k}"}], f"answer {k}")
        chat([{"role": "user", "content": f"check {k}"}], f"checked {k}")

    for k in range(count):
        with ot.task(f"task-{k % 8}"):
            solver(k)
            ot.reward(float(k % 2), family="team")
    handle.shutdown()
""")


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(1000 * statistics.median(ordered), 3),
            "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3)}


def _latencies(url: str, calls: int, stream: bool) -> list[float]:
    body = {"model": "policy", "messages": [{"role": "user", "content": "bench"}], "stream": stream}
    out = []
    with httpx.Client(timeout=60) as client:
        for k in range(calls + 10):
            body["messages"][0]["content"] = f"bench {k}"
            start = time.perf_counter()
            response = client.post(f"{url}/chat/completions", json=body)
            response.read()
            elapsed = time.perf_counter() - start
            assert response.status_code == 200, response.text
            if k >= 10:  # the first calls warm connections and imports
                out.append(elapsed)
    return out


def proxy_latency(work: Path, calls: int) -> dict[str, Any]:
    engine = fake_engine.serve()
    engine_url = f"http://127.0.0.1:{engine.server_port}/v1"
    collector_port, proxy_port = _free_port(), _free_port()
    collector_url = f"http://127.0.0.1:{collector_port}"
    cli = [sys.executable, "-m", "orchestrace_collector.cli"]
    results: dict[str, Any] = {"calls": calls}
    try:
        with (_process([*cli, "collect", "--out", str(work / "proxy-traces"), "--port", str(collector_port),
                        "--grpc-port", str(_free_port())], f"{collector_url}/healthz", work / "c1.log"),
              _process([*cli, "proxy", "--upstream", engine_url, "--port", str(proxy_port),
                        "--collector", collector_url], f"http://127.0.0.1:{proxy_port}/v1/models",
                       work / "proxy.log")):
            for stream in (False, True):
                direct = _latencies(engine_url, calls, stream)
                proxied = _latencies(f"http://127.0.0.1:{proxy_port}/v1", calls, stream)
                d, p = _percentiles(direct), _percentiles(proxied)
                results["stream" if stream else "whole"] = {
                    "direct": d, "proxy": p,
                    "added_p50_ms": round(p["p50_ms"] - d["p50_ms"], 3),
                    "added_p99_ms": round(p["p99_ms"] - d["p99_ms"], 3),
                }
    finally:
        engine.shutdown()
    return results


def _consume(url: str, count: int, rates: list[float], start: float) -> None:
    got = 0
    with Feed(url, wait_s=2.0, limit=200) as feed:
        for _ in feed.episodes():
            got += 1
            if got == count:
                break
    rates.append(count / (time.perf_counter() - start))


def feed_rates(work: Path, episodes: int) -> dict[str, Any]:
    results: dict[str, Any] = {"episodes": episodes, "turns_per_episode": 2}
    for consumers in (1, 4):
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        out = work / f"feed-{consumers}"
        with _process([sys.executable, "-m", "orchestrace_collector.cli", "collect", "--out", str(out),
                       "--port", str(port), "--grpc-port", str(_free_port())], f"{url}/healthz",
                      work / f"feed-{consumers}.log"):
            rates: list[float] = []
            start = time.perf_counter()
            sender = subprocess.Popen([sys.executable, "-c", SENDER, url, str(episodes)])
            threads = [threading.Thread(target=_consume, args=(url, episodes, rates, start))
                       for _ in range(consumers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            sender.wait(600)
            ingest_s = time.perf_counter() - start
            backlog: list[float] = []
            start = time.perf_counter()
            threads = [threading.Thread(target=_consume, args=(url, episodes, backlog, start))
                       for _ in range(consumers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        results[f"{consumers}_consumers"] = {
            "live_episodes_per_s_each": round(min(rates), 1),
            "live_episodes_per_s_total": round(consumers * min(rates), 1),
            "ingest_s": round(ingest_s, 2),
            "backlog_episodes_per_s_each": round(min(backlog), 1),
            "backlog_episodes_per_s_total": round(consumers * min(backlog), 1),
        }
    return results


def run(out: Path, quick: bool) -> dict[str, Any]:
    with TemporaryDirectory() as tmp:
        work = Path(tmp)
        return {"proxy": proxy_latency(work, 100 if quick else 500),
                "feed": feed_rates(work, 200 if quick else 1000)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    figures = json.dumps(run(RESULTS, args.quick), indent=2)
    (RESULTS / "online_rl.json").write_text(figures + "\n")
    print(figures)


if __name__ == "__main__":
    main()
