"""Small orchestrace apps whose true answer is known by construction, and a runner that records one run
three ways at once: in-process (``trace_dir``), as a span dump converted offline (``orchestrace convert``),
and over OTLP/HTTP into a real ``orchestrace collect``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orchestrace as ot
from collector_fixtures import RunningCollector, validate_trace_dir
from opentelemetry.sdk.trace import TracerProvider
from orchestrace_collector.cli import app as cli
from orchestrace_collector.output import latest_turns
from typer.testing import CliRunner

#: Tokens of every fake model call (prompt, completion).
PROMPT_TOKENS, COMPLETION_TOKENS = 7, 3
WAYS = ("trace_dir", "convert", "collect")


@ot.llm("fake-model", provider="test")
def chat(messages: list[dict[str, str]]) -> dict[str, Any]:
    if messages[-1]["content"] == "rate me":
        ot.reward(0.25, family="process")  # recorded on the model call: that turn's own reward
    return {
        "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS},
    }


def ask(text: str) -> None:
    chat([{"role": "user", "content": text}])


@dataclass
class Written:
    """One way's output: the latest revision of each trace, and its turns."""

    traces: dict[str, dict[str, Any]]
    turns: dict[str, list[dict[str, Any]]]
    out: Path

    def only(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        assert len(self.traces) == 1, sorted(self.traces)
        ((trace_id, trace),) = self.traces.items()
        return trace, self.turns[trace_id]


def tokens_by_agent(turns: list[dict[str, Any]]) -> dict[str, int]:
    """Input plus output tokens of the turns, summed per agent."""
    tokens: dict[str, int] = {}
    for turn in turns:
        tokens[turn["agent"]] = tokens.get(turn["agent"], 0) + turn["input_tokens"] + turn["output_tokens"]
    return tokens


def written(out: Path) -> Written:
    traces = validate_trace_dir(out)  # every revision of every trace validates
    return Written(traces, latest_turns(out, traces), out)


def run_three_ways(tmp_path: Path, collector: RunningCollector, app: Callable[[], None],
                   provider: TracerProvider | None = None, **configure: Any) -> dict[str, Written]:
    """``provider``: the one to record on, when the app also writes spans of its own with it."""
    dump = tmp_path / "spans.jsonl"
    handle = ot.configure("ground-truth", exporter=[f"file:{dump}", "otlp"], endpoint=collector.base_url,
                          trace_dir=tmp_path / "trace_dir", **configure,
                          tracer_provider=provider or TracerProvider(shutdown_on_exit=False))
    try:
        app()
    finally:
        handle.shutdown()
    assert collector.stop() == 0
    convert([dump], tmp_path / "convert", *_credit_args(configure))
    return {"trace_dir": written(tmp_path / "trace_dir"), "convert": written(tmp_path / "convert"),
            "collect": written(collector.out)}


def convert(dumps: list[Path], out: Path, *args: str) -> str:
    """``orchestrace convert DUMPS --out OUT``; returns what it printed."""
    result = CliRunner().invoke(cli, ["convert", *map(str, dumps), "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return result.output


def _credit_args(configure: dict[str, Any]) -> list[str]:
    return ["--credit", configure["credit"]] if "credit" in configure else []


# --- the apps ---------------------------------------------------------------------------------------------


@ot.tool
def search(query: str) -> str:
    return f"found {query}"


@ot.agent(role="writer")
def writer(topic: str, self_reward: float | None = None) -> str:
    ask(topic)
    ask(topic + " again")
    if self_reward is not None:
        ot.reward(self_reward, family="individual", unit="agent", target=ot.current_agent())
    return f"draft on {topic}"


@ot.agent(role="lead")
def units_lead() -> str:
    ask("plan")  # lead turn 1: it also requests the search tool below
    writer("a")
    ot.reward(0.6, family="individual", unit="agent", target="writer")  # the writer that just finished
    writer("b", self_reward=0.3)  # the second writer rewards itself through its own handle
    search("facts")
    ot.reward(-0.2, unit="tool", target="search")
    ask("rate me")  # lead turn 2, with a process reward of its own
    ask("answer")  # lead turn 3
    ot.reward(0.5, unit="role", target="writer")
    ot.reward(2.0, family="team")  # an outcome recorded twice: the last one counts
    ot.reward(1.0, family="team")
    ot.reward(0.9, family="verifier", name="unit_tests")
    ot.reward(0.1, family="verifier", name="lint")
    return "answer"


def units_app() -> None:
    with ot.task("units"):
        units_lead()


#: The rewards ``units_app`` records, as the trace must hold them.
UNITS_REWARDS = {
    "team": 1.0,
    "individual": 0.9,
    "verifier:unit_tests": 0.9,
    "verifier:lint": 0.1,
    "tool": -0.2,
    "role": 0.5,
    "process": 0.25,
}
UNITS_TURNS = 7  # lead 3 + two writers x 2


@ot.agent
def branch(mode: str, seconds: float) -> str:
    """``seconds`` of work: plain waiting, or half of it inside a tool call or a model call."""
    if mode == "none":
        time.sleep(seconds)
    elif mode == "tool":
        time.sleep(seconds / 2)
        slow_tool(seconds / 2)
    else:
        time.sleep(seconds / 2)
        slow_chat(seconds / 2)
    return mode


@ot.tool
def slow_tool(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


@ot.llm("slow-model", provider="test")
def slow_chat(seconds: float) -> dict[str, Any]:
    time.sleep(seconds)
    return {"choices": [{"message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


def parallel_app(mode: str, parallel: bool, branches: int = 4, seconds: float = 0.3) -> Callable[[], None]:
    @ot.agent
    def fan_out() -> list[str]:
        if not parallel:
            return [branch(mode, seconds) for _ in range(branches)]
        with ot.ThreadPoolExecutor(branches) as pool:
            return list(pool.map(lambda _: branch(mode, seconds), range(branches)))

    def app() -> None:
        with ot.task(f"parallel-{mode}"):
            fan_out()

    return app


def handing_out_app(how: str, works: bool, children: int = 3, seconds: float = 0.3) -> Callable[[], None]:
    """A lead hands ``children`` branches of ``seconds`` to workers (``threads``: ``ot.ThreadPoolExecutor``,
    ``gather``: ``ot.gather``) and collects their results. When ``works`` (threads only), it works
    ``seconds`` itself meanwhile, half in its own code and half in a model call: ``children + 1`` things
    busy at once. Either way the summed busy time is ``seconds`` for each thing that works."""

    @ot.agent
    async def awaited_branch() -> str:
        await asyncio.sleep(seconds)
        return "done"

    @ot.agent
    def lead() -> list[str]:
        if how == "gather":
            async def gathered() -> list[str]:
                return await ot.gather(*(awaited_branch() for _ in range(children)))
            return asyncio.run(gathered())
        with ot.ThreadPoolExecutor(children) as pool:
            futures = [pool.submit(branch, "none", seconds) for _ in range(children)]
            if works:
                time.sleep(seconds / 2)
                slow_chat(seconds / 2)
            return [future.result() for future in futures]

    def app() -> None:
        with ot.task(f"handing-out-{how}"):
            lead()

    return app
