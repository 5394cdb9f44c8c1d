"""``make demo``: one instrumented multi-agent run, sent over OTLP to a local collector, then summarized.

1. starts ``orchestrace collect --out out/demo`` on two free local ports;
2. runs the supervisor example (examples/supervisor/app.py) with ``--exporter otlp`` pointed at it;
3. stops the collector with SIGTERM (it writes every trace still open before it exits);
4. prints what was written (traces, turns, events by type, rewards, metrics, topology) and validates it;
5. points to the OpenAI Agents SDK examples (examples/agents_triage, examples/agents_as_tools).

Offline and deterministic: the example's models are scripted fakes. Run it with ``make demo``, or
``.venv/bin/python examples/demo.py [--out DIR]``. The commands it prints at the end are this environment's
(``.venv/bin/...`` from the clone: ``make demo`` puts nothing on ``PATH``).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from orchestrace_collector.output import latest_traces, latest_turns
from orchestrace_collector.stats import compute_stats, stats_tables
from rich.columns import Columns
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "examples.supervisor.app"
#: The OpenAI Agents SDK examples the summary points to (``OpenAIAgentsInstrumentor``), and what they show.
AGENTS_EXAMPLES = {
    "examples.agents_triage.app": "a triage agent handing off to specialists",
    "examples.agents_as_tools.app": "an orchestrator calling agents as tools in parallel",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_collector(out: Path, log: IO[bytes]) -> tuple[subprocess.Popen[bytes], int]:
    """``orchestrace collect`` from this interpreter's environment, once it accepts connections."""
    port, grpc_port = free_port(), free_port()
    command = ["collect", "--out", str(out), "--port", str(port), "--grpc-port", str(grpc_port)]
    collector = subprocess.Popen([sys.executable, "-m", "orchestrace_collector.cli", *command], stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if collector.poll() is not None:
            raise RuntimeError(f"the collector exited with code {collector.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return collector, port
        except OSError:
            time.sleep(0.05)
    collector.kill()
    raise RuntimeError("the collector did not start listening within 30 s")


def run_example(endpoint: str) -> str:
    """The supervisor example in its own process, exporting OTLP/HTTP to ``endpoint``; returns its answer."""
    # Content capture on, so the turns are complete training samples (prompt and completion).
    command = [sys.executable, "-m", EXAMPLE, "--exporter", "otlp", "--endpoint", endpoint,
               "--capture-content"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{EXAMPLE} failed:\n{done.stderr}")
    return done.stdout.strip()


def summarize(console: Console, out: Path, traces: dict[str, dict[str, Any]]) -> None:
    """``orchestrace stats`` tables, then per trace its decisions, rewards, metrics and turns."""
    turns = latest_turns(out, traces)
    # Reward families are listed per trace below rather than one table row per unit-scoped credit key.
    tables = stats_tables(compute_stats(traces.values(), sum(len(t) for t in turns.values())))
    console.print(Columns([table for table in tables if table.title != "rewards"]))
    for trace in traces.values():
        events = trace["events"]
        decisions = Counter(e["decision"] for e in events if "decision" in e)
        families = {k: v for k, v in trace["rewards"].items() if ":" not in k}
        console.print(f"trace [cyan]{trace['trace_id']}[/] (task {trace['task_id']}, "
                      f"topology {trace.get('topology', 'unknown')}): {len(events)} events")
        console.print(f"  orchestrator decisions: {_numbers(decisions)}")
        unit_keys = len(trace["rewards"]) - len(families)
        console.print(f"  rewards: {_numbers(families)} (and {unit_keys} unit-scoped keys)")
        console.print(f"  metrics: {_numbers(trace.get('metrics', {}))}")
        console.print(_turns_table(turns[trace["trace_id"]]))
        _print_sample(console, turns[trace["trace_id"]])


def _print_sample(console: Console, turns: list[dict[str, Any]]) -> None:
    """The last turn as a trainer reads it: chat messages in, chat messages out, credited reward."""
    sample = next((turn for turn in reversed(turns) if turn.get("prompt")), None)
    if sample is None:
        return
    reward = sample.get("reward") or 0.0
    console.print(f"a training sample (turn of [cyan]{sample['agent']}[/], credited reward {reward:.3g}):")
    for message in [*sample["prompt"][-3:], *(sample.get("completion") or [])]:
        console.print(f"  {message['role']:>9}: {str(message.get('content', ''))[:90]!r}")


def _turns_table(turns: list[dict[str, Any]]) -> Table:
    """The trace's model calls: the training samples, each with the share of reward credited to it."""
    table = Table(title="turns (one model call each)")
    for column in ("agent", "model", "tokens in", "tokens out", "reward"):
        table.add_column(column, justify="left" if column in ("agent", "model") else "right")
    for turn in turns:
        reward = turn.get("reward")
        table.add_row(turn["agent"], turn.get("model") or "", str(turn.get("input_tokens", "")),
                      str(turn.get("output_tokens", "")), "" if reward is None else f"{reward:.3g}")
    return table


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is under it (shorter to read)."""
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def _command(name: str) -> str:
    """``name`` as installed beside this interpreter (``.venv/bin/orchestrace``), as typed from here."""
    return str(_shown(Path(sys.executable).parent / name))


def _numbers(values: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.3g}" for k, v in sorted(values.items())) or "(none)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "demo", help="output dir (emptied first)")
    out: Path = parser.parse_args(argv).out
    console = Console(soft_wrap=True)  # whole lines in a log or a pipe; tables keep the terminal width
    shutil.rmtree(out, ignore_errors=True)  # the summary describes this run only

    with tempfile.TemporaryFile() as log:
        collector, port = start_collector(out, log)
        try:
            console.rule("orchestrace demo")
            console.print(f"collector listening on http://127.0.0.1:{port}, writing to {_shown(out)}")
            console.print(f"running {EXAMPLE} with --exporter otlp ...")
            console.print(f"answer: [green]{run_example(f'http://127.0.0.1:{port}')}[/]")
        finally:
            collector.send_signal(signal.SIGTERM)
            code = collector.wait(timeout=30)
        if code != 0:
            log.seek(0)
            console.print(log.read().decode(errors="replace"))
            console.print(f"[red]the collector exited with code {code}[/]")
            return 1

    traces = latest_traces([out])
    if not traces:
        console.print("[red]no trace was written[/]")
        return 1
    summarize(console, out, traces)
    files = sorted(p.name for p in out.iterdir() if p.is_file())
    console.print(f"written to {_shown(out)}: {', '.join(files)}")
    console.print(f"$ {_command('orchestrace')} validate {_shown(out)}")
    validate = [sys.executable, "-m", "orchestrace_collector.cli", "validate", str(_shown(out))]
    if subprocess.run(validate, check=False).returncode != 0:
        return 1

    console.rule("the same run in Jaeger")
    console.print("docker run -p 16686:16686 -p 4317:4317 -p 4318:4318 jaegertracing/all-in-one")
    console.print(f"{_command('python')} -m {EXAMPLE} --exporter jaeger")
    console.print('open http://localhost:16686 and pick the service "supervisor-example"')

    console.rule("the OpenAI Agents SDK, instrumented the same way")
    for example, shows in AGENTS_EXAMPLES.items():
        name = example.split(".")[1]
        command = f"{_command('python')} -m {example} --exporter none --trace-dir out/{name}"
        console.print(f"{command}  [dim]# {shows}[/]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
