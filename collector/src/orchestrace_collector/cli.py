"""The ``orchestrace`` command: collect, convert, validate, stats, annotate, export, view.

Errors a user can cause (a bad input file, a missing trace, a bad ``--reward``, a taken port) are one clear
line on stderr and exit code 1, never a traceback. One rule for empty input, on every command: nothing to work
on (no spans, no traces, no rows left to write) is such an error, and nothing is written; an empty input is
almost always a wrong path or a run that has not been written yet, and a training job fed an empty file
would fail later and further from the cause. Off a terminal, output lines are never wrapped (``terminal.py``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from orchestrace_collector.assemble import Converter, EpisodeConverter, EpisodeHook
from orchestrace_collector.senders import ANY_SENDER
from orchestrace_collector.terminal import LineConsole
from orchestrace_collector.wal import FSYNC_POLICIES

app = typer.Typer(
    name="orchestrace",
    help="Collect OpenTelemetry spans of multi-agent runs and write replayable orchestration traces.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = LineConsole()
errors = LineConsole(stderr=True)

_MIB = 1 << 20
#: The collector's bearer token, when no --token-file is given.
TOKEN_ENV = "ORCHESTRACE_TOKEN"
#: Headers sent to the --forward target, when no --forward-headers is given (kept off the command line).
FORWARD_HEADERS_ENV = "ORCHESTRACE_FORWARD_HEADERS"
_MAX_FAILURE_ROWS = 50


def _example(*commands: str) -> str:
    """A command's help epilog: how it is typically called."""
    return "Example: " + "  |  ".join(f"orchestrace {command}" for command in commands)


def _fail(message: str) -> typer.Exit:
    errors.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(1)


def _hook(reward: str | None, credit: str) -> EpisodeHook | None:
    if reward is None:
        return None
    from orchestrace_collector.reward_fn import RewardSpecError, load_reward_function, reward_hook

    try:
        return reward_hook(load_reward_function(reward), credit)
    except RewardSpecError as exc:
        raise _fail(str(exc)) from None


def _converter(credit: str) -> Converter:
    try:
        return EpisodeConverter(credit)
    except ValueError as exc:
        raise _fail(str(exc)) from None


CreditOption = Annotated[
    str,
    typer.Option(
        "--credit",
        help="How rewards are credited to turns and events: causal (the work the answer depends on) "
        "or uniform.",
    ),
]
MaxTraceOption = Annotated[
    float,
    typer.Option(
        "--max-trace-mb",
        help="Amplification limit: the most one episode writes (its trace line plus its turns); above it "
        "the turns' messages, then long names, are cut (marked truncated). 0: no limit but names cut to 256.",
        min=0,
    ),
]
OutcomeOption = Annotated[
    str | None,
    typer.Option(
        "--outcome",
        help="The reward channel that is each episode's outcome (e.g. verifier:unit_tests); default: the "
        "sum of its team-unit channels (team, verifier, hybrid).",
    ),
]
RewardOption = Annotated[
    str | None,
    typer.Option(
        "--reward",
        help="module:function given each assembled Trace; returns a dict of rewards to "
        "merge, or a new Trace.",
    ),
]


@app.command(epilog=_example("collect --out traces/", "collect --out traces/ --forward http://localhost:4318"))
def collect(
    out: Annotated[Path, typer.Option("--out", help="Output directory (traces, turns, content, wal).")],
    port: Annotated[int, typer.Option(help="OTLP/HTTP port.", min=0, max=65535)] = 4318,
    grpc_port: Annotated[int, typer.Option("--grpc-port", help="OTLP/gRPC port.", min=0, max=65535)] = 4317,
    host: Annotated[
        str,
        typer.Option(
            help="Address both receivers bind. Not loopback: a token is required (or --insecure-no-auth)."
        ),
    ] = "127.0.0.1",
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="File holding the bearer token senders must present (else the ORCHESTRACE_TOKEN variable), "
            "or one name:token line per sender: an episode's spans are then accepted only from the sender "
            "that opened it.",
        ),
    ] = None,
    annotator: Annotated[
        list[str] | None,
        typer.Option(
            "--annotator",
            help="A --token-file sender that may add spans (rewards) to any episode (repeatable).",
        ),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option("--insecure-no-auth", help="Serve a non-loopback address WITHOUT authentication."),
    ] = False,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="PEM certificate (chain): both receivers use TLS.")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="PEM private key of --tls-cert.")] = None,
    memory_limit_mb: Annotated[
        float,
        typer.Option(
            "--memory-limit-mb",
            help="Above this estimate of held spans, queues and request bodies, answer 503 + Retry-After.",
        ),
    ] = 1024,
    max_open_episodes: Annotated[
        int,
        typer.Option("--max-open-episodes", help="Above this, the oldest open episode is written as it is."),
    ] = 10_000,
    shutdown_timeout: Annotated[
        float,
        typer.Option(
            "--shutdown-timeout",
            help="Seconds to write open episodes at shutdown; the rest stays in the WAL for the next start.",
        ),
    ] = 20.0,
    header_timeout: Annotated[
        float, typer.Option("--header-timeout", help="Seconds a connection may take to send its headers.")
    ] = 10.0,
    keepalive_timeout: Annotated[
        float, typer.Option("--keepalive-timeout", help="Seconds an idle connection is kept open.")
    ] = 30.0,
    max_connections: Annotated[
        int, typer.Option("--max-connections", help="HTTP connections served at once; more are closed.")
    ] = 1024,
    body_timeout: Annotated[
        float, typer.Option("--body-timeout", help="Seconds a request body may take to arrive (else 408).")
    ] = 30.0,
    forward_queue_mb: Annotated[
        float,
        typer.Option("--forward-queue-mb", help="Bytes of batches held for --forward; the oldest go beyond."),
    ] = 256,
    spool_only: Annotated[
        bool,
        typer.Option(
            "--spool-only",
            help="Only keep what arrives (OUT/wal is the spool); assemble later with `convert --engine ray`.",
        ),
    ] = False,
    forward: Annotated[
        str | None,
        typer.Option(
            help="Also send every batch, unchanged, to this OTLP/HTTP "
            "endpoint (e.g. http://localhost:4318 for Jaeger)."
        ),
    ] = None,
    forward_headers: Annotated[
        str | None,
        typer.Option(
            "--forward-headers",
            help="Headers for --forward, as OTEL_EXPORTER_OTLP_HEADERS writes them: key=value,key2=value2 "
            "(else the ORCHESTRACE_FORWARD_HEADERS variable).",
        ),
    ] = None,
    forward_token_file: Annotated[
        Path | None,
        typer.Option(
            "--forward-token-file",
            help="File holding the bearer token the --forward target requires (sent as Authorization).",
        ),
    ] = None,
    forward_ca_file: Annotated[
        Path | None,
        typer.Option("--forward-ca-file", help="PEM CA certificates that verify an https --forward target."),
    ] = None,
    quiet_period: Annotated[
        float,
        typer.Option(
            "--quiet-period",
            help="Seconds without new spans after the root span ended before a trace is written.",
        ),
    ] = 2.0,
    idle_timeout: Annotated[
        float,
        typer.Option(
            "--idle-timeout",
            help="Seconds without new spans after which an unfinished trace is written anyway.",
        ),
    ] = 300.0,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", help="Largest accepted request, after gunzip.")
    ] = 16,
    max_queued_batches: Annotated[
        int, typer.Option("--max-queued-batches", help="Above this backlog, answer 503 + Retry-After.")
    ] = 512,
    fsync: Annotated[
        str,
        typer.Option(
            help="WAL durability: batch (fsync before each acknowledgement; survives power loss), "
            "interval (fsync every 50 ms; survives a collector crash), none (the OS decides)."
        ),
    ] = "batch",
    wal_segment_mb: Annotated[float, typer.Option("--wal-segment-mb", help="WAL segment size.")] = 64,
    wal_max_mb: Annotated[
        float,
        typer.Option(
            "--wal-max-mb",
            help="Above this WAL size, written episodes stop holding segments and the open episodes holding "
            "the oldest one are written as they are, so it can be deleted.",
        ),
    ] = 1024,
    rotate_mb: Annotated[
        float, typer.Option("--rotate-mb", help="Start a new traces/turns file after this.")
    ] = 128,
    max_trace_mb: MaxTraceOption = 64,
    reward: RewardOption = None,
    credit: CreditOption = "causal",
) -> None:
    """Receive OTLP (HTTP and gRPC) and write each orchestration trace when it completes."""
    from orchestrace_collector.collect import CollectorOptions, ExposureError, check_exposure, run_collector
    from orchestrace_collector.http_server import HttpLimits

    if fsync not in FSYNC_POLICIES:
        raise _fail(f"--fsync must be one of {', '.join(FSYNC_POLICIES)}")
    senders = _read_senders(token_file) if token_file is not None else {}
    token = senders.pop(ANY_SENDER, None) or os.environ.get(TOKEN_ENV) or None
    unknown = set(annotator or ()) - set(senders)
    if unknown:
        raise _fail(f"--annotator {sorted(unknown)[0]!r} is no sender of --token-file")
    sent_headers = _forward_headers(forward_headers, forward_token_file)
    if forward_ca_file is not None and not forward_ca_file.is_file():
        raise _fail(f"no such file: --forward-ca-file {forward_ca_file}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = CollectorOptions(
        out=out,
        port=port,
        grpc_port=grpc_port,
        forward=forward,
        quiet_period_s=quiet_period,
        idle_timeout_s=idle_timeout,
        max_body_bytes=int(max_body_mb * _MIB),
        max_queued_batches=max_queued_batches,
        fsync=fsync,
        wal_segment_bytes=int(wal_segment_mb * _MIB),
        wal_max_bytes=int(wal_max_mb * _MIB),
        rotate_bytes=int(rotate_mb * _MIB),
        max_trace_bytes=int(max_trace_mb * _MIB),
        converter=_converter(credit),
        hook=_hook(reward, credit),
        host=host,
        token=token,
        senders=senders or None,
        annotators=tuple(annotator or ()),
        allow_unauthenticated=insecure_no_auth,
        tls_cert=tls_cert,
        tls_key=tls_key,
        memory_limit_bytes=int(memory_limit_mb * _MIB),
        max_open_episodes=max_open_episodes,
        shutdown_timeout_s=shutdown_timeout,
        body_timeout_s=body_timeout,
        spool_only=spool_only,
        forward_queue_bytes=int(forward_queue_mb * _MIB),
        forward_headers=sent_headers,
        forward_ca=forward_ca_file,
        limits=HttpLimits(
            header_timeout_s=header_timeout,
            keepalive_timeout_s=keepalive_timeout,
            max_connections=max_connections,
        ),
    )
    try:
        check_exposure(options)
    except ExposureError as exc:
        raise _fail(str(exc)) from None
    try:
        run_collector(options)
    except OSError as exc:
        raise _fail(f"cannot start the collector: {exc}") from None


def _read_senders(path: Path) -> dict[str, str]:
    """``--token-file``: one token (sender ``any``), or ``name:token`` lines (named senders)."""
    from orchestrace_collector.senders import TokenFileError, parse_tokens

    try:
        return parse_tokens(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _fail(f"cannot read --token-file: {exc}") from None
    except TokenFileError as exc:
        raise _fail(f"--token-file {path}: {exc}") from None


def _read_token(path: Path, option: str) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise _fail(f"cannot read {option}: {exc}") from None
    if not token:
        raise _fail(f"{option} {path} is empty")
    return token


def _forward_headers(spec: str | None, token_file: Path | None) -> dict[str, str]:
    """``--forward-headers`` (else its variable) parsed as OTLP exporters parse ``OTEL_EXPORTER_OTLP_HEADERS``
    (values may be percent-encoded), plus ``Authorization`` from ``--forward-token-file``."""
    from opentelemetry.util.re import parse_env_headers

    spec = spec if spec is not None else os.environ.get(FORWARD_HEADERS_ENV, "")
    headers = dict(parse_env_headers(spec, liberal=True)) if spec.strip() else {}
    if spec.strip() and not headers:
        raise _fail("--forward-headers: expected key=value pairs separated by commas")
    if token_file is not None:
        headers["authorization"] = f"Bearer {_read_token(token_file, '--forward-token-file')}"
    return headers


@app.command(epilog=_example("convert spans.jsonl jaeger.json --out traces/"))
def convert(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            help="OTLP protobuf / OTLP-JSON / JSON lines / Jaeger JSON files or directories of them."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Output directory.")],
    engine: Annotated[str, typer.Option(help="local, or ray for datasets larger than memory.")] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster for --engine ray (default: RAY_ADDRESS, else a local cluster); a cluster "
            "made by `ray start` also needs RAY_AUTH_MODE=token."
        ),
    ] = None,
    max_trace_mb: MaxTraceOption = 64,
    reward: RewardOption = None,
    credit: CreditOption = "causal",
) -> None:
    """Convert span dumps offline into the same output directory that collect writes."""
    from orchestrace_collector.assemble import WRITTEN_INDEX
    from orchestrace_collector.offline import input_files, load_engine
    from orchestrace_collector.output import WAL_DIR

    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise _fail(f"no such file: {', '.join(missing)}")
    if not input_files(inputs):
        raise _fail("no input files")
    if address is not None and engine != "ray":
        raise _fail("--address is for --engine ray")
    if engine == "ray" and (out / WAL_DIR / WRITTEN_INDEX).exists():
        # Ray's engine does not replay what the directory remembers: a late span of an episode written
        # there would become an episode of its own (the one rule, docs/provenance.md, would not hold).
        raise _fail(f"{out} already holds written episodes ({WAL_DIR}/{WRITTEN_INDEX}), which --engine ray "
                    "does not read: use --engine local to add to it, or a new --out")
    try:
        run = load_engine(engine)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    from orchestrace_collector.output import TraceDirWriter
    from orchestrace_collector.wal import LogInUse

    converter = _converter(credit)
    hook = _hook(reward, credit)
    created = not out.exists()  # removed again when there was nothing to convert
    writer = TraceDirWriter(out, max_trace_bytes=int(max_trace_mb * _MIB))
    try:
        result = run(inputs, writer, converter=converter, hook=hook,
                     **({"address": address} if address else {}))
    except LogInUse as exc:
        raise _fail(f"{exc}: convert into another --out, or when it has stopped") from None
    finally:
        writer.close()
    for problem in result.bad_files:
        errors.print(f"[bold red]error:[/] {problem}", highlight=False)
    if result.spans == 0 and not result.bad_files:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise _fail(f"no spans in {', '.join(map(str, inputs))}")
    console.print(
        f"{result.files} files, {result.spans} spans -> {result.written} traces in {out}"
        + (f" ({result.duplicates} spans were already written there)" if result.duplicates else "")
        + (f" ({result.failed} episodes failed to convert, see the log)" if result.failed else "")
    )
    if result.bad_files or result.failed:
        raise typer.Exit(1)


def _traces_in(paths: list[Path]) -> Iterator[tuple[str, Any]]:
    """``(where, object)`` for every trace in the given files/directories; unreadable lines yield an
    exception."""
    from orchestrace_collector.output import iter_jsonl, jsonl_files

    for file in jsonl_files(paths):
        if file.suffix == ".json":  # one trace (or a list of traces) per file
            try:
                obj = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                yield str(file), exc
                continue
            for index, item in enumerate(obj if isinstance(obj, list) else [obj]):
                yield f"{file}[{index}]" if isinstance(obj, list) else str(file), item
            continue
        try:
            for path, number, item in iter_jsonl([file]):
                yield f"{path}:{number}", item
        except (OSError, UnicodeDecodeError) as exc:
            yield str(file), exc


def _file_of(where: str) -> str:
    """The file part of a ``_traces_in`` location (``path:line`` or ``path[index]``)."""
    return where.rsplit(":", 1)[0].split("[", 1)[0]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


@app.command(epilog=_example("validate traces/"))
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Trace files (.jsonl, .json) or output directories.")],
    schema_only: Annotated[
        bool,
        typer.Option(
            "--schema-only",
            help="Only the upstream checks (schema, ids, times, edges, costs), not the contract's vocabulary "
            "(decision values, reward key forms).",
        ),
    ] = False,
) -> None:
    """Check every trace (every revision) against the schema, the referential rules and the contract's
vocabulary, and every content file of an output directory against its name (the sha256 of its bytes); exit 0
if all pass."""
    from orchestrace_collector.validate import content_problems, validate_trace

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise _fail(f"no such file: {', '.join(missing)}")
    per_file: dict[str, list[int]] = {}  # file -> [revisions, invalid]
    episodes: dict[str, set[str]] = {}  # file -> its trace ids (an episode's revisions share one)
    failures = Table(title="invalid traces")
    for column in ("where", "trace_id", "errors"):
        failures.add_column(column, overflow="fold")
    total = invalid = 0
    for where, obj in _traces_in(paths):
        total += 1
        counts = per_file.setdefault(_file_of(where), [0, 0])
        counts[0] += 1
        if isinstance(obj, dict):
            episodes.setdefault(_file_of(where), set()).add(str(obj.get("trace_id")))
        if isinstance(obj, Exception):
            problems = [f"not JSON: {obj}"]
        elif not isinstance(obj, dict):
            problems = ["not a JSON object"]
        else:
            problems = validate_trace(obj, schema_only=schema_only)
        if not problems:
            continue
        invalid += 1
        counts[1] += 1
        if invalid <= _MAX_FAILURE_ROWS:
            trace_id = str(obj.get("trace_id", "?")) if isinstance(obj, dict) else "?"
            more = f"\n... {len(problems) - 5} more" if len(problems) > 5 else ""
            failures.add_row(where, trace_id, "\n".join(problems[:5]) + more)
    if total == 0:
        raise _fail(f"no traces in {', '.join(map(str, paths))}")
    summary = Table(title="orchestrace validate")
    for column in ("file", "episodes", "revisions", "valid", "invalid"):
        summary.add_column(column, justify="left" if column == "file" else "right", overflow="fold")
    for file, (count, bad) in per_file.items():
        summary.add_row(file, str(len(episodes.get(file, ()))), str(count), str(count - bad),
                        f"[red]{bad}[/]" if bad else "0")
    console.print(summary)
    if invalid:
        console.print(failures)
        if invalid > _MAX_FAILURE_ROWS:
            console.print(f"... and {invalid - _MAX_FAILURE_ROWS} more invalid traces")
    episode_count = len(set().union(*episodes.values()))
    counted = f"{_count(episode_count, 'episode')}, {_count(total, 'revision')}"
    console.print(f"{counted}: {total - invalid}/{total} valid")
    bad_content = [problem for path in paths if path.is_dir() for problem in content_problems(path)]
    for problem in bad_content[:_MAX_FAILURE_ROWS]:
        console.print(f"[red]content[/] {problem}", soft_wrap=True)
    if bad_content:
        console.print(f"{len(bad_content)} content files do not hash to their names")
    if invalid or bad_content:
        raise typer.Exit(1)


@app.command(epilog=_example("stats traces/"))
def stats(
    out: Annotated[Path, typer.Argument(help="Output directory (or traces*.jsonl files' directory).")],
    outcome: OutcomeOption = None,
) -> None:
    """Summarize a dataset: traces, events by type, topologies, rewards, costs, and the groups of rollouts
    of each task (rollouts per task, outcome spread within groups)."""
    from orchestrace_collector.outcome import OutcomeKeyError
    from orchestrace_collector.output import latest_traces, latest_turns
    from orchestrace_collector.stats import compute_stats, stats_tables

    if not out.exists():
        raise _fail(f"no such directory: {out}")
    traces = latest_traces([out])
    if not traces:
        raise _fail(f"no traces in {out}")
    turns = sum(len(t) for t in latest_turns(out, traces).values()) if out.is_dir() else 0
    try:
        computed = compute_stats(traces.values(), turns, outcome)
    except OutcomeKeyError as exc:
        raise _fail(str(exc)) from None
    for table in stats_tables(computed):
        console.print(table)


@app.command(epilog=_example("export traces/ --format parquet --to dataset/",
                             "export traces/ --format trl --to trl.parquet"))
def export(
    outs: Annotated[list[Path], typer.Argument(help="Output directories (e.g. one per collector).")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="jsonl | parquet (turns), trl (conversational prompt/completion), tokens (token ids and "
            "masks per agent trajectory), decisions (orchestrator sub-decisions).",
        ),
    ],
    to: Annotated[
        Path,
        typer.Option("--to", help="File to write (Parquet when it ends with .parquet, else JSON lines)."),
    ],
    min_reward: Annotated[
        float | None,
        typer.Option("--min-reward", help="Keep rows of episodes whose outcome is at least this."),
    ] = None,
    max_reward: Annotated[
        float | None,
        typer.Option("--max-reward", help="Keep rows of episodes whose outcome is at most this."),
    ] = None,
    outcome: OutcomeOption = None,
    agent: Annotated[
        list[str] | None, typer.Option("--agent", help="Keep this agent's rows (repeatable).")
    ] = None,
    role: Annotated[
        list[str] | None, typer.Option("--role", help="Keep this role's rows (repeatable).")
    ] = None,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Keep this task's rows (repeatable).")
    ] = None,
    drop_flagged: Annotated[
        bool,
        typer.Option(
            "--drop-flagged",
            help="Drop rows flagged truncated, prompt_incomplete, completion_incomplete (a reply stream left "
            "before its end), error, incomplete (trace) or rejected_rewards.",
        ),
    ] = False,
    pairs: Annotated[
        bool,
        typer.Option("--pairs", help="trl: DPO pairs (matching turns of a task's best and worst rollouts)."),
    ] = False,
    labels: Annotated[
        bool,
        typer.Option("--labels", help="trl: KTO labels (a rollout's outcome against its task group's mean)."),
    ] = False,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            help="tokens: a saved Hugging Face tokenizer with a chat template, for turns without recorded "
            "token ids.",
        ),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="tokens: fail on a trajectory that cannot be built (by default it is skipped and counted).",
        ),
    ] = False,
    include_fixed: Annotated[
        bool,
        typer.Option(
            "--include-fixed",
            help="decisions: also the routes a graph's wiring took by itself (fixed edges, resumes), "
            "marked fixed; by default only choices are rows.",
        ),
    ] = False,
) -> None:
    """Write a training set from the latest revision of every trace: one row per turn, TRL sample, agent
    trajectory or orchestrator decision, in a schema that is the same for every run."""
    try:
        from orchestrace_collector.export import ExportError, Filters
        from orchestrace_collector.export import export as export_rows
    except ImportError as exc:
        raise _fail(f"export needs {exc.name}: pip install 'orchestrace-collector[export]'") from None

    if pairs and labels:
        raise _fail("give at most one of --pairs and --labels")
    skipped: list[str] = []
    filters = Filters(
        min_reward=min_reward,
        max_reward=max_reward,
        agents=tuple(agent or ()),
        roles=tuple(role or ()),
        tasks=tuple(task or ()),
        drop_flagged=drop_flagged,
    )
    try:
        rows = export_rows(
            outs,
            fmt,
            to,
            filters=filters,
            trl_kind="dpo" if pairs else "kto" if labels else "sft",
            tokenizer=tokenizer,
            outcome=outcome,
            strict=strict,
            skipped=skipped,
            include_fixed=include_fixed,
        )
    except ExportError as exc:
        raise _fail(str(exc)) from None
    for reason in skipped[:_MAX_FAILURE_ROWS]:
        errors.print(f"[yellow]skipped:[/] {reason}", highlight=False, soft_wrap=True)
    console.print(f"{rows} rows -> {to}" + (f" ({len(skipped)} trajectories skipped)" if skipped else ""))


@app.command(epilog=_example("annotate traces/ --task-id task-42 --reward 1.0",
                             "annotate traces/ --trace-id ID --reward 0 --family verifier --name tests"))
def annotate(
    out: Annotated[Path, typer.Argument(help="Output directory holding the trace.")],
    reward: Annotated[float, typer.Option(help="Reward value.")],
    family: Annotated[
        str,
        typer.Option(
            help="Reward family, one of the team's: team (also shared, outcome), verifier, hybrid. They add "
            "up to the episode's outcome."
        ),
    ] = "team",
    trace_id: Annotated[str | None, typer.Option("--trace-id", help="Trace to annotate.")] = None,
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Annotate every trace of this task.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="Reward name; the key becomes family:name.")] = None,
    mode: Annotated[
        str,
        typer.Option(help="replace: the reward is the channel's value (an outcome); add: added to it."),
    ] = "replace",
    credit: CreditOption = "causal",
) -> None:
    """Add a late team-unit reward (verifier, human feedback): writes a new revision of the trace."""
    from orchestrace_semconv import OUTCOME_FAMILIES, REWARD_FAMILY_ALIASES

    from orchestrace_collector.annotate import NoSuchTrace
    from orchestrace_collector.annotate import annotate as annotate_traces
    from orchestrace_collector.validate import validate_trace

    if (trace_id is None) == (task_id is None):
        raise _fail("give exactly one of --trace-id and --task-id")
    if family not in OUTCOME_FAMILIES and family not in REWARD_FAMILY_ALIASES:
        raise _fail(f"--family must be one of {', '.join((*OUTCOME_FAMILIES, *REWARD_FAMILY_ALIASES))}")
    if not out.is_dir():
        raise _fail(f"no such directory: {out}")
    try:
        revised = annotate_traces(
            out,
            reward=reward,
            family=family,
            name=name,
            trace_id=trace_id,
            task_id=task_id,
            mode=mode,
            validate=validate_trace,
            strategy=credit,
        )
    except (NoSuchTrace, ValueError) as exc:
        raise _fail(str(exc)) from None
    for trace in revised:
        console.print(
            f"{trace['trace_id']}: revision {int(trace['metrics']['revision'])}, rewards {trace['rewards']}"
        )


@app.command(epilog=_example("view traces/", "view traces/ --export report.html"))
def view(
    out: Annotated[list[Path], typer.Argument(help="Output directories (also one a collector writes to).")],
    host: Annotated[str, typer.Option(help="Address to serve (not loopback: needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port (0: any free port).", min=0, max=65535)] = 8090,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="File holding the token (else ORCHESTRACE_TOKEN).")
    ] = None,
    export: Annotated[Path | None, typer.Option(help="Write one offline HTML file, no server.")] = None,
) -> None:
    """See runs in the browser: episodes by task, timelines, replay, credit, rollouts compared."""
    from orchestrace_collector.view.export import export_html
    from orchestrace_collector.view.serve import ExposureError, serve

    if export is not None:
        console.print(f"{export_html(out, export)} episodes -> {export}")
        return
    token = _read_token(token_file, "--token-file") if token_file is not None else None
    try:
        serve(out, host=host, port=port, token=token or os.environ.get(TOKEN_ENV) or None)
    except (ExposureError, OSError) as exc:
        raise _fail(str(exc)) from None


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
    epilog=_example("proxy --upstream http://127.0.0.1:8000/v1 --port 8010"),
)
def proxy(ctx: typer.Context) -> None:
    """An OpenAI-compatible gateway in front of an engine that records every call as a turn with token ids
    (--upstream URL [--host] [--port] [--token-file] [--collector URL]; --help for more)."""
    # The proxy records through the SDK, which the collector never imports (pyproject's import contracts):
    # it runs as the SDK's own program, in this process's place.
    os.execv(sys.executable, [sys.executable, "-m", "orchestrace.proxy", *ctx.args])


if __name__ == "__main__":
    app()
