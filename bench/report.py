"""``results.md``: the benchmark results as markdown tables, with the machine and versions measured on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _f(value: Any, digits: int = 1) -> str:
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return "n/a" if value is None else str(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]


def _top(summary: dict[str, Any], n: int = 6) -> str:
    items = summary.get("top_self", [])[:n]
    return ", ".join(f"`{i['function']}` {i['self_share']:.0%}" for i in items)


def _inclusive(summary: dict[str, Any], prefix: str, n: int = 8) -> str:
    """Inclusive shares of the functions of one package (what each costs with what it calls)."""
    items = [i for i in summary.get("top_total", []) if i["function"].startswith(prefix)][:n]
    return ", ".join(f"`{i['function']}` {i['total_share']:.0%}" for i in items)


def _packages(summary: dict[str, Any], n: int = 5) -> str:
    items = list(summary.get("self_by_package", {}).items())[:n]
    return ", ".join(f"{name} {share:.0%}" for name, share in items)


def _machine(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    return [
        f"Machine: `nproc` = {m['nproc']}, CPU {m['cpu_model']}, {m['memory_gb']} GiB RAM, {m['os']}, "
        f"Python {m['python']}.",
        "",
        f"Versions: {packages}.",
        "",
    ]


def _sdk(r: dict[str, Any]) -> list[str]:
    us, ratio, added = r["us_per_call"], r["ratio_to_raw_span"], r["added_ratio_to_raw_span"]
    rows = [
        ["undecorated function", _f(us["undecorated"], 2), "", ""],
        ["raw `start_as_current_span` (agent's attributes)", _f(us["raw_span_agent"], 2), "1.00", "1.00"],
        ["`@ot.agent`", _f(us["ot_agent"], 2), _f(ratio["agent"], 2), _f(added["agent"], 2)],
        ["raw `start_as_current_span` (tool's attributes)", _f(us["raw_span_tool"], 2), "1.00", "1.00"],
        ["`@ot.tool`", _f(us["ot_tool"], 2), _f(ratio["tool"], 2), _f(added["tool"], 2)],
    ]
    return [
        f"Exporter: {r['exporter']}. Median of {r['sizes']['rounds']} alternating batches of "
        f"{r['sizes']['calls']:,} calls; the ratios are medians of each round's ratio (its batches run back "
        "to back, so the machine's drift cancels out).",
        "",
        *_table(["call", "µs / call", "× raw span", "× raw span, net of the function"], rows),
        f"Target: decorator ≤ {r['target_ratio']}× the raw span: {_f(r['target_met'])}.",
        "",
        *_sdk_instructions(r.get("instructions", {})),
        f"Profile of `@ot.agent` (self time): {_top(r['profile']['ot_agent'])}.",
        "",
        f"Inclusive time of orchestrace's functions in `@ot.agent`: "
        f"{_inclusive(r['profile']['ot_agent'], 'orchestrace/')}.",
        "",
        f"Self time of `@ot.agent` by package: {_packages(r['profile']['ot_agent'])}; of the raw span: "
        f"{_packages(r['profile']['raw_span_agent'])}.",
        "",
    ]


def _sdk_instructions(r: dict[str, Any]) -> list[str]:
    if "per_call" not in r:
        return [f"Instructions not counted: {r.get('skipped', 'no result')}.", ""]
    per_call, ratio = r["per_call"], r["ratio_to_raw_span"]
    return [
        f"CPU instructions per call (valgrind callgrind, {r['calls']:,} calls each; deterministic): raw span "
        f"{per_call['raw_span_agent'] / 1000:.0f} k, `@ot.agent` {per_call['ot_agent'] / 1000:.0f} k "
        f"({ratio['agent']:.2f}×); raw span {per_call['raw_span_tool'] / 1000:.0f} k, `@ot.tool` "
        f"{per_call['ot_tool'] / 1000:.0f} k ({ratio['tool']:.2f}×). The verdict above stays the timed one.",
        "",
    ]


def _langgraph(r: dict[str, Any]) -> list[str]:
    modes = r["modes"]
    rows = []
    targets = r.get("ratio_targets", {})
    for graph, row in r["graphs"].items():
        cells = [f"`{graph}`"]
        for mode in modes:
            cell = row.get(mode)
            if cell is None:
                cells.append("n/a")
            elif mode == "uninstrumented":
                cells.append(f"{cell['us_per_run'] / 1000:.2f} ms · wall/CPU {cell['wall_per_cpu']:.2f}")
            else:
                met = f", ≤ {targets[mode]}: {_f(cell['ratio_met'])}" if mode in targets else ""
                cells.append(
                    f"{cell['us_per_run'] / 1000:.2f} ms ({cell['paired_ratio']:.2f}×{met}; "
                    f"CPU {cell['paired_cpu_ratio']:.2f}×; mean {cell['mean_ratio']:.2f}×) · wall/CPU "
                    f"{cell['wall_per_cpu']:.2f} · {cell['spans']} spans · {cell['bytes'] / 1024:.1f} KiB"
                )
        target = r["target"].get(graph)
        cells.append(
            f"{target['fraction_of_lighter']:.2f} ({_f(target['met'])}; by group "
            f"{' / '.join(f'{g:.2f}' for g in target['fraction_of_lighter_by_group'])}); by CPU time "
            f"{target['fraction_of_lighter_cpu']:.2f} ({_f(target['met_cpu'])}); capture off "
            f"{target.get('fraction_of_lighter_capture_off', float('nan')):.2f}"
            if target
            else "n/a"
        )
        rows.append(cells)
    sizes = r["sizes"]
    lines = [
        f"Exporter: {r['exporter']}. Each mode in its own process; the processes take turns one graph run "
        f"at a time (a round: every mode once, order rotated), {sizes['rounds']} rounds per graph after "
        f"{sizes['warmup']} warm-up runs, in {sizes['groups']} groups of fresh processes. Cells: median "
        "time per graph run (ratio to uninstrumented: the median over rounds of each round's ratio, by wall "
        "clock, against the target; by the process's CPU time, all threads; and of the mean times, which "
        "count in full the runs in which the exporter's thread sent a batch) · median of each run's wall "
        "time over its CPU time · spans · OTLP protobuf bytes per run. Every instrumentation with its "
        "defaults: orchestrace leaves message content out, the other two record it; `orchestrace_content` is "
        "orchestrace with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`; `spans_only` is the "
        "floor under any instrumentation writing as many spans as orchestrace: the uninstrumented run, then "
        "that many empty OTel spans (a root and its children) through the same exporter. Last column: "
        "orchestrace's added time with content captured (as the peers do by default) over the lighter "
        "peer's, the median over rounds of each round's fraction (a round's runs follow each other within "
        "milliseconds, so the machine's drift cancels out), and that median in each group; then by CPU "
        "time, and with capture off.",
        "",
        *_table(["graph", *modes,
                 f"orchestrace_content overhead ÷ lighter other's (≤ {r.get('peer_fraction_target', 0.5)})"],
                rows),
    ]
    lines += _instructions(r.get("instructions") or {})
    if r.get("errors"):
        lines += [f"Errors: {r['errors']}", ""]
    return lines


def _instructions(r: dict[str, Any]) -> list[str]:
    if not r.get("graphs"):
        return [f"Instruction counts: {r.get('skipped', 'not measured')}.", ""]
    modes = ("uninstrumented", "spans_only", "orchestrace", "orchestrace_content", "openinference",
             "openllmetry")
    rows = []
    for graph, cell in r["graphs"].items():
        per_run, ratio = cell["per_run"], cell["ratio"]
        rows.append(
            [
                f"`{graph}`",
                *(f"{per_run[m] / 1e6:.1f} M ({ratio[m]:.2f}×)" if m in per_run else "n/a" for m in modes),
                _f(cell.get("fraction_of_lighter"), 2),
            ]
        )
    export_rows = [
        [f"`{graph}`", *(f"{_f(cell['export_per_run'][m] / 1e6, 2)} M ({_f(otel[m] / 1e6, 2)} M)"
                         if m in cell.get("export_per_run", {}) and m in otel else "n/a" for m in modes[1:])]
        for graph, cell in r["graphs"].items() for otel in [cell.get("export_otel_per_run", {})]
    ]
    return [
        f"CPU instructions per run (valgrind callgrind, counting only {r['runs']} measured runs per graph "
        "after the warm-up; deterministic, so one process per mode), each run's spans encoded as one OTLP "
        "protobuf request, as the exporter's thread does in the timed runs. Instructions are not time: a "
        "cache miss, a contended lock or a thread switch costs more than its instructions, which is why the "
        "timed verdict above is the one that counts.",
        "",
        *_table(["graph", *modes, "orchestrace_content overhead ÷ lighter other's"], rows),
        "",
        "Of which the OTLP encoding of a run's spans by `ot.configure`'s exporter (it grows with each "
        "attribute and event, whatever its size); in brackets, OTel's own encoder on the same spans (the "
        "same bytes), what an OTel exporter set up by hand pays instead:",
        "",
        *_table(["graph", *modes[1:]], export_rows),
    ]


def _conversion(c: dict[str, Any]) -> list[str]:
    """Offline conversion by stage, compiled with mypyc and pure Python (each in its own process, one run)."""
    modes = c["modes"]
    compiled, pure, speedup = modes["compiled"], modes["pure_python"], modes["speedup"]
    counted = modes["instructions"]
    per_span = counted.get("per_span", {})
    stages = [
        ("decode (OTLP protobuf → spans)", "decode"),
        ("`convert_episode` (spans → trace, turns)", "convert_episode"),
        ("local engine: assemble + convert + write", "local_engine"),
        ("local engine including decode", "local_engine_with_decode"),
    ]
    rows = []
    for title, stage in stages:
        key = f"{stage}_spans_per_s"
        instructions = (
            f"{per_span['compiled'][stage] / 1000:.0f} k / {per_span['pure_python'][stage] / 1000:.0f} k "
            f"({counted['pure_over_compiled'][stage]:.2f}×)"
            if per_span
            else "n/a"
        )
        rows.append([title, _f(compiled[key], 0), _f(pure[key], 0), f"{speedup[key]:.2f}×", instructions])
    cli = f"`orchestrace convert` end to end ({c['spans']:,} spans, start-up included)"
    rows.append([cli, _f(c["cli_convert_spans_per_s"], 0), "", "", ""])
    ran = "compiled" if compiled["ran_compiled"] else "**not compiled: no current build**"
    return [
        *_table(
            [
                "offline conversion (one process)",
                f"spans/s, mypyc ({ran})",
                "spans/s, pure Python",
                "speedup",
                "instructions per span, compiled / pure"
                + (f" ({counted['spans']:,} spans)" if per_span else f": {counted.get('skipped')}"),
            ],
            rows,
        ),
    ]


def _per_run(runs: list[dict[str, Any]], key: str) -> str:
    """``; median of 3 bursts: a, b, c`` when the figure is a median of several runs."""
    if len(runs) < 2:
        return ""
    return f"; median of {len(runs)} bursts: " + ", ".join(_f(run[key], 0) for run in runs)


def _collector(r: dict[str, Any]) -> list[str]:
    i, m, c, t = r["ingest"], r["memory"], r["conversion"], r["targets"]
    return [
        f"Ingest: `orchestrace collect --fsync batch` in its own process; a sender process posts "
        f"{i['spans']:,} spans ({i['traces']:,} traces) back to back as OTLP/HTTP protobuf requests of "
        f"{i['request_spans']} spans from {i['sender_threads']} threads, each burst in a fresh "
        f"collector; then rounds of {i['round_spans']:,} spans, each written before the next, for the "
        f"memory under steady traffic. {r['nproc']} cores "
        "shared by sender and collector.",
        "",
        *_table(
            ["ingest", "value"],
            [
                ["acknowledged (WAL fsync'd) spans/s", _f(i["ack_spans_per_s"], 0)],
                [
                    "acknowledged spans per collector CPU-second (until the last ack, assembly included)",
                    _f(i["ack_spans_per_collector_cpu_s"], 0),
                ],
                ["end to end (until every trace written) spans/s", _f(i["e2e_spans_per_s"], 0)],
                ["collector CPU seconds", _f(i["collector_cpu_s"], 2)],
                [
                    "spans per collector CPU-second (whole pipeline)"
                    + _per_run(i.get("runs", []), "spans_per_collector_cpu_s"),
                    _f(i["spans_per_collector_cpu_s"], 0),
                ],
                [
                    "RSS idle → after each round (MiB)",
                    f"{i['rss_idle_mb']:.0f} → "
                    + ", ".join(f"{v:.0f}" for v in i["rss_after_each_round_mb"]),
                ],
                ["503 retries", _f(i["retries_503"])],
            ],
        ),
        *_table(
            ["memory", "RSS idle (MiB)", "RSS open (MiB)", "peak (MiB)", "per open span"],
            [
                [
                    f"{m['many']['open_traces']:,} traces open ({m['many']['open_spans']:,} spans)",
                    _f(m["many"]["rss_idle_mb"], 0),
                    _f(m["many"]["rss_open_mb"], 0),
                    "",
                    f"{m['many']['kb_per_open_span']:.2f} KiB",
                ],
                [
                    f"one open trace of {m['one_big']['spans']:,} spans",
                    _f(m["one_big"]["rss_idle_mb"], 0),
                    _f(m["one_big"]["rss_open_mb"], 0),
                    _f(m["one_big"]["peak_rss_mb"], 0),
                    f"written {m['one_big']['complete_to_written_s']:.1f} s after its root",
                ],
            ],
        ),
        *_conversion(c),
        f"Targets per core: ingest ≥ {t['ingest_spans_per_core_s']:,} spans/s: acknowledged "
        f"{_f(t['ack_met'])}, whole pipeline per CPU-second {_f(t['ingest_met'])}; conversion ≥ "
        f"{t['convert_spans_per_core_s']:,} spans/s (local engine with decode): {_f(t['convert_met'])}.",
        "",
        f"Profile, collector HTTP handler during ingest ({i['profile'].get('focus_share', 0):.0%} of "
        f"the main thread; self time): {_top(i['profile'])}.",
        "",
        f"Profile, local engine (self time): {_top(c['profile_local_engine'])}.",
        "",
        "Profile, local engine (inclusive): "
        f"{_inclusive(c['profile_local_engine'], 'orchestrace_collector/', 12)}.",
        "",
        f"Profile, decode (self time): {_top(c['profile_decode'])}.",
        "",
    ]


def _scaling(r: dict[str, Any]) -> list[str]:
    rows = [
        [
            _f(p["spans"]),
            f"{p['decode_s'] * 1000:.2f}",
            f"{p['convert_s'] * 1000:.2f}",
            f"{p['convert_us_per_span']:.1f}",
            f"{p['convert_peak_mb']:.2f}",
            f"{p['decoded_spans_mb']:.2f}",
        ]
        for p in r["points"]
    ]
    return [
        *_table(
            ["spans", "decode ms", "convert ms", "convert µs/span", "convert peak MiB", "decoded spans MiB"],
            rows,
        ),
        f"Log-log slopes from {r['slope_from_spans']:,} spans (1.0 = linear): convert time "
        f"{r['convert_time_loglog_slope']:.2f}, decode time {r['decode_time_loglog_slope']:.2f}, "
        f"convert memory {r['convert_memory_loglog_slope']:.2f}.",
        "",
        f"![time and memory per trace]({r['plot']})",
        "",
    ]


def _ray(r: dict[str, Any]) -> list[str]:
    local, ray, cluster = r["local"], r["ray"], r["ray_running_cluster"]

    def row(name: str, run: dict[str, Any], rss: str, cores: str) -> list[str]:
        return [
            name,
            _f(run["seconds"]),
            _f(run["spans_per_s"], 0),
            cores,
            rss,
            _f(run["traces"]),
            _f(run["turns"]),
        ]

    return [
        f"{r['spans']:,} spans in {r['sizes']['traces']:,} traces, {r['sizes']['files']} protobuf dump files "
        f"({r['dump_mb']:.0f} MiB); every engine as `orchestrace convert`, start-up included; "
        f"{r['nproc']} cores. Runs: local, ray starting its own local cluster, ray against a cluster already "
        "running (`ray start --head`, then `--address`), local again. Cores used: the command's CPU seconds "
        "over its wall time (the machine is shared).",
        "",
        *_table(
            ["engine", "seconds", "spans/s", "cores used", "peak RSS (MiB)", "traces", "turns"],
            [
                row(
                    "local (one process; median of the two runs)",
                    local,
                    _f(local["peak_rss_mb"], 0),
                    " / ".join(f"{c:.2f}" for c in local.get("cores_used", [])),
                ),
                row(
                    "ray, own local cluster",
                    ray,
                    f"{ray['peak_rss_tree_mb']:,.0f} (process tree)",
                    f"{ray.get('cores_used', 0):.2f}",
                ),
                row(
                    f"ray, running cluster ({cluster['cluster_cpus']} CPUs, --address)",
                    cluster,
                    f"{cluster['peak_rss_tree_mb']:,.0f} (command + cluster)",
                    f"{cluster.get('cores_used', 0):.2f}",
                ),
            ],
        ),
        f"Same output in every run (trace and turn counts, SHA-256 of the sorted canonical JSON): "
        f"{_f(r['same_output'])}. Speedup over local: {r['speedup']:.2f}× with a cluster started by the "
        f"command; {r['speedup_running_cluster']:.2f}× against a running cluster (started in "
        f"{cluster['cluster_start_s']:.0f} s, not counted).",
        "",
        f"Starting and stopping a cluster of its own cost the command about "
        f"{ray['seconds'] - cluster['seconds']:.1f} s and {ray['cpu_s'] - cluster['cpu_s']:.1f} CPU seconds "
        "(own cluster minus running cluster).",
        "",
        *_ray_estimate(r),
    ]


def _ray_estimate(r: dict[str, Any]) -> list[str]:
    if "estimate" not in r:
        return []
    costs, e = r["stage_costs"], r["estimate"]
    return [
        "Per-stage costs, the engine's stages run in one process (CPU seconds): scan "
        f"{costs['scan_cpu_s']:.1f}, split {costs.get('split_cpu_s', 0.0):.2f}, convert "
        f"{costs['convert_cpu_s']:.1f} (parallel on a cluster); driver: keys and dealing "
        f"{costs['keys_cpu_s']:.2f}, writing {costs['write_cpu_s']:.1f}; the running-cluster run's other CPU "
        f"seconds (overhead): {e['overhead_cpu_s']:.1f}; the local engine: {e['local_cpu_s']:.1f}. Model on "
        "C free cores of a running cluster: T(C) = driver + (parallel + overhead) / C (overhead spreading "
        "over the cores) to driver + parallel / C + overhead / 2 (overhead fixed at its 2-core share). On "
        f"{e['measured_cores']} free cores: {e['seconds_measured_cores']:.1f} s, "
        f"{e['speedup_measured_cores']:.2f}× the local engine. Paper estimate on {e['cores']} cores: "
        f"{e['seconds_optimistic']:.1f} to {e['seconds_pessimistic']:.1f} s, a speedup of "
        f"{e['speedup_optimistic']:.1f}× to {e['speedup_pessimistic']:.1f}× over the local engine.",
        "",
        *_ray_overhead(r),
    ]


def _ray_overhead(r: dict[str, Any]) -> list[str]:
    if "overhead_by_process" not in r:
        return []
    o, workers = r["overhead_by_process"], r["ray_running_cluster"]["workers"]
    names = {
        "driver": "driver, beyond keys and writing (interpreter, imports, `ray.init`, fetching results)",
        "worker_startup": "workers' start-up, before their first task (interpreter, `import ray`)",
        "worker_tasks": "workers' tasks beyond the stages (module import, (de)serialization, object store)",
        "worker_idle": "workers between and after tasks",
        "raylet": "raylet",
        "gcs_server": "gcs_server",
        "other": "other cluster processes (log monitor, agents, `ray start`)",
    }
    return [
        f"The overhead by process (CPU seconds; {workers['count']} worker processes; the tasks seen in their "
        "titles, per worker: "
        f"{'; '.join(sorted(set(workers['tasks'])))}):",
        "",
        *_table(["process", "CPU s"], [[names[k], f"{v:.1f}"] for k, v in o.items()]),
    ]


def _view(r: dict[str, Any]) -> list[str]:
    rows = [[name, *(_f(v[key]) for key in ("events", "turns", "marks", "draw_ms", "page_ms"))]
            for name, v in r.items() if isinstance(v, dict)]
    return [
        "The view's timeline in headless Chromium: the SVG draw, and the whole page (fetch, parse, draw).",
        "",
        *_table(["episode", "events", "turns", "marks + arrows", "draw ms", "page ms"], rows),
        "",
    ]


def _long_episode(r: dict[str, Any]) -> list[str]:
    long = r["long_episode"]
    app, convert = long["app"], long["convert"]
    written = ", ".join(
        f"{path} {w['turns']:,} turns ({w['prompts_whole_length']:,} prompts with every message of the "
        f"history, {w['truncated']:,} with texts cut by the per-episode output limit, `--max-trace-mb`)"
        for path, w in long["written"].items()
    )
    return [
        f"An `@ot.llm` loop whose prompt is the whole history, replies of {r['reply_bytes']:,} bytes. Span "
        "dump size (MB) with the history exported once (now) and with `full_prompt=True` (each call's "
        "whole prompt, as `@ot.llm` exported before):",
        "",
        *_table(
            ["turns", "history once (MB)", "full prompt (MB)"],
            [[_f(row["turns"]), _f(row["once_mb"], 2), _f(row["full_mb"], 2)] for row in r["export_size"]],
        ),
        "",
        f"{long['turns']:,} turns through the OTLP exporter to `orchestrace collect`, `trace_dir` and a "
        f"span dump ({long['dump_mb']:.1f} MB) at once: the app {app['seconds']:.1f} s, "
        f"{app['extra_rss_mib']:.0f} MiB above its RSS before the episode, {app['dropped_spans']} spans "
        f"dropped; offline conversion of the dump {convert['seconds']:.1f} s, "
        f"{convert['extra_rss_mib']:.0f} MiB above its start. Written: {written}.",
        "",
    ]


SECTIONS: dict[str, tuple[str, Callable[[dict[str, Any]], list[str]]]] = {
    "sdk": ("1. SDK decorators", _sdk),
    "langgraph": ("2. LangGraph instrumentations", _langgraph),
    "collector": ("3. Collector", _collector),
    "scaling": ("4. Growth with trace size", _scaling),
    "ray": ("5. Scale-out on Ray", _ray),
    "view": ("6. The view's timeline", _view),
    "long_episode": ("7. A long episode: export size and memory", _long_episode),
}


def markdown(results: dict[str, Any]) -> str:
    lines = ["# orchestrace benchmarks", "", *_machine(results)]
    for key, (title, render) in SECTIONS.items():
        if key not in results:
            continue
        r = results[key]
        lines += [
            f"## {title}",
            "",
            f"_Run {r.get('date', '?')}{' (quick sizes)' if r.get('quick') else ''}, "
            f"{r.get('bench_seconds', '?')} s._",
            "",
        ]
        lines += [f"Not measured: `{r['error']}`", ""] if "error" in r else render(r)
    return "\n".join(lines) + "\n"


#: The README's row for docs/performance.md: its figures come from ``results.json`` (a test compares them).
README_ROW_START = "| [Performance](docs/performance.md) | "
_ORDER = ("chain3", "supervisor3", "fanout8", "fanout64")


def readme_row(results: dict[str, Any]) -> str:
    """The README's performance row: the issue's two LangGraph figures with the floor and both peers beside
    them, and the collector's whole-pipeline figure, from one run's results."""
    lg, collector = results["langgraph"], results["collector"]["ingest"]
    graphs = [g for g in _ORDER if g in lg["graphs"]]

    def ratios(mode: str) -> str:
        return " / ".join(f"{lg['graphs'][g][mode]['paired_ratio']:.2f}x" for g in graphs)

    fractions = " / ".join(f"{lg['target'][g]['fraction_of_lighter']:.2f}" for g in graphs)
    target = lg["ratio_targets"]["orchestrace"]
    return (
        f"{README_ROW_START}LangGraph ({', '.join(graphs)}), capture off: {ratios('orchestrace')} "
        f"uninstrumented (target {target}x; floor {ratios('spans_only')}; OpenInference "
        f"{ratios('openinference')}; OpenLLMetry {ratios('openllmetry')}); capture on: {fractions} of the "
        f"lighter peer's added time (target {lg['peer_fraction_target']}); collector "
        f"{collector['spans_per_collector_cpu_s']:,.0f} spans per CPU-second (target 50,000) |"
    )


def with_readme_row(readme: str, results: dict[str, Any]) -> str:
    """``readme`` with its performance row replaced by ``results``' (unchanged when a figure is missing)."""
    try:
        row = readme_row(results)
    except KeyError:
        return readme
    return "\n".join(row if line.startswith(README_ROW_START) else line for line in readme.split("\n"))
