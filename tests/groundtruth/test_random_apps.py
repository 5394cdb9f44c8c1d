"""Random multi-agent apps (``random_apps``): what was written, in-process, offline and through ``collect``,
against what each app did by construction."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import orchestrace as ot
import pytest
from collector_fixtures import RunningCollector
from ground_truth_apps import WAYS, convert, run_three_ways, written
from opentelemetry.sdk.trace import TracerProvider
from orchestrace_collector.export import ExportError, Filters, export
from orchestrace_collector.output import latest_traces, read_content
from orchestrace_collector.stats import compute_stats
from random_apps import (
    RELAY_LEAD,
    Choice,
    GraphApp,
    Group,
    Rollout,
    Step,
    Truth,
    draw,
    draw_graph,
    draw_group,
    draw_late,
    draw_relay,
    relay_truth,
    run,
    run_graph_app,
    run_group,
    run_late,
    run_relay,
    token_rows_truth,
    truth,
)

#: A committed dump of a real framework's run (AutoGen), unrelated to any app here.
UNRELATED = Path(__file__).parents[1] / "collector" / "golden" / "autogen_spans.jsonl"


def _pairs(events: list[dict[str, Any]], kind: str) -> Counter[tuple[str, str]]:
    """(parent, child) agent names of the spawns, or of the returns to a parent."""
    if kind == "spawn":
        return Counter((e["agent"], e["to"]) for e in events if e["type"] == "spawn")
    return Counter((e["to"], e["agent"]) for e in events if e["type"] == "return" and e.get("to"))


def _captured_text(out: Path, ref: str) -> str | None:
    """The text stored for ``ref``: a message's content as it is; an agent's output, captured as one GenAI
    output message, the text of its parts."""
    stored = read_content(out, ref)
    if stored is None or not stored.startswith("[{"):
        return stored
    (message,) = json.loads(stored)
    assert message["role"] == "assistant", stored
    return "".join(part["content"] for part in message["parts"])


def check_handed_back(want: Truth, events: list[dict[str, Any]], out: Path) -> None:
    """What each agent handed back to its caller, against what it returned and said by construction: the
    ``return`` event's content ref and its stored text, and each message to the caller (ref and text)."""
    task = events[0]["agent"]
    returns = Counter((e["agent"], e["to"] if e.get("to") != task else None, e.get("content_ref"))
                      for e in events if e["type"] == "return" and e["agent"] != task)
    assert returns == want.returns
    said = Counter((e["agent"], e["to"], e.get("content_ref")) for e in events
                   if e["type"] == "message" and e.get("to") != "peer")
    assert said == want.said
    for ref, text in want.texts.items():
        assert _captured_text(out, ref) == text, ref


@pytest.mark.parametrize("seed", range(30))
def test_a_random_app_is_written_as_it_ran(tmp_path: Path, collector: RunningCollector, seed: int) -> None:
    app = draw(seed)
    want = truth(app)
    outputs = run_three_ways(tmp_path, collector, lambda: run(app, f"random-{seed}"), capture_content=True)
    written = {}
    for way in WAYS:
        trace, turns = outputs[way].only()
        tokens: Counter[str] = Counter()
        for turn in turns:
            tokens[turn["agent"]] += turn.get("input_tokens", 0) + turn.get("output_tokens", 0)
        assert +tokens == want.tokens, way
        assert len(turns) == want.turns, way
        assert sum(turn.get("cache_read_input_tokens", 0) for turn in turns) == want.cached, way
        assert sum(bool(turn.get("completion_incomplete")) for turn in turns) == want.incomplete, way
        whole = {t["turn_id"] for t in turns if not t.get("completion_incomplete")}
        if whole:  # (an export that keeps no row is an error)
            exported = tmp_path / f"{way}-kept.jsonl"
            export([outputs[way].out], "jsonl", exported, filters=Filters(drop_flagged=True))
            assert {json.loads(line)["turn_id"] for line in exported.read_text().splitlines()} == whole, way
        costs = trace["costs"]
        assert (costs["tokens"], costs["tool_calls"], costs["messages"]) == (
            sum(want.tokens.values()), want.tool_calls, want.messages), way
        assert trace["rewards"].get("individual", 0) == pytest.approx(want.individual), way
        credited = sum((turn.get("credit") or {}).get("individual", 0) for turn in turns)
        assert credited == pytest.approx(want.individual), way
        events = trace["events"]
        assert sum(e["type"] == "aggregate" for e in events) == want.aggregates, way
        task = events[0]["agent"]
        spawns = _pairs(events, "spawn")
        returns = _pairs(events, "return")
        assert {pair: n for pair, n in spawns.items() if pair[0] != task} == want.children, way
        assert {pair: n for pair, n in returns.items() if pair[0] != task} == want.children, way
        replies = Counter((e["agent"], e["to"]) for e in events
                          if e["type"] == "message" and e.get("to") != "peer")
        assert +replies == want.replies, way
        check_handed_back(want, events, outputs[way].out)
        assert sum(e["type"] == "safety_event" for e in events) == want.safety_events, way
        assert sum(e["type"] == "human_intervention" for e in events) == want.human_interventions, way
        metrics = {k: v for k, v in trace["metrics"].items() if k != "revision"}
        written[way] = json.dumps({**trace, "metrics": metrics}, sort_keys=True)
    assert written["trace_dir"] == written["convert"] == written["collect"]


_RELAY_STEPS = {("tool_call", "web_fetch"): "fetch_call", ("tool_result", "web_fetch"): "fetch_result",
                ("tool_call", "vault"): "vault_call", ("tool_result", "vault"): "vault_result",
                ("tool_call", "act"): "act_call", ("tool_result", "act"): "act_result"}


def _relay_steps(events: list[dict[str, Any]]) -> dict[str, Step]:
    """Each hop's events by (hop, step): the hops run one after another, each after the lead's spawn."""
    steps: dict[str, Step] = {}
    hop = -1
    for e in events:
        if e["type"] == "spawn" and e["agent"] == RELAY_LEAD:
            hop += 1
        elif e["agent"] == RELAY_LEAD and e["type"] == "return":
            break
        elif hop >= 0 and e["agent"] != RELAY_LEAD and e["type"] in ("tool_call", "tool_result"):
            steps[e["id"]] = (hop, _RELAY_STEPS[(e["type"], e["tool"])])
        elif hop >= 0 and e["agent"] != RELAY_LEAD and e["type"] in ("message", "return"):
            steps[e["id"]] = (hop, e["type"])
    return steps


@pytest.mark.parametrize("seed", range(12))
def test_untrusted_content_is_followed_from_agent_to_agent(tmp_path: Path, collector: RunningCollector,
                                                          seed: int) -> None:
    """A relay of agents passing pages, secrets, model replies or notes on by message: which events are
    untrusted, which edges are ``safety_flow`` and which model calls read untrusted content, as built."""
    hops = draw_relay(seed)
    want = relay_truth(hops)
    outputs = run_three_ways(tmp_path, collector, lambda: run_relay(hops, f"relay-{seed}"),
                             capture_content=True)
    for way in WAYS:
        trace, turns = outputs[way].only()
        steps = _relay_steps(trace["events"])
        assert len(steps) == len({*steps.values()}), way  # every step once
        assert {steps[e["id"]] for e in trace["events"] if e.get("trusted") is False} == want.untrusted, way
        flows = {(steps[x["src"]], steps[x["dst"]]) for x in trace["edges"] if x["type"] == "safety_flow"}
        assert flows == want.flows, way
        assert [bool(t.get("tainted")) for t in turns] == want.tainted, way


# --- rollout groups: the exports against the outcome of each rollout ------------------------------------


def _rows(out: Path, fmt: str, to: Path, **options: Any) -> list[dict[str, Any]]:
    try:
        export([out], fmt, to, **options)
    except ExportError as exc:  # nothing to write (no pair, no label, no trajectory) is an error
        assert str(exc).startswith(f"no {fmt} rows"), exc
        return []
    return [json.loads(line) for line in to.read_text().splitlines()]


def _expected_pairs(best: Rollout, worst: Rollout) -> list[tuple[str, str, str]]:
    """(agent, chosen answer, rejected answer): each call of the best rollout against the worst's call of
    the same agent with the same prompt, else the same agent's call at the same position."""
    theirs = worst.turns()
    used: set[int] = set()
    pairs = []
    mine = best.turns()
    for k, (agent, prompt, answer) in enumerate(mine):
        same_prompt = [i for i, t in enumerate(theirs) if t[:2] == (agent, prompt) and i not in used]
        position = sum(t[0] == agent for t in mine[:k])
        of_agent = [i for i, t in enumerate(theirs) if t[0] == agent]
        if same_prompt:
            match = same_prompt[0]
        elif position < len(of_agent) and of_agent[position] not in used:
            match = of_agent[position]
        else:
            continue
        used.add(match)
        if answer != theirs[match][2]:
            pairs.append((agent, answer, theirs[match][2]))
    return pairs


def check_rollout_exports(out: Path, groups: list[Group], work: Path) -> None:
    turns = _rows(out, "jsonl", work / "turns.jsonl")
    rollout_of: dict[str, Rollout] = {}  # trace id -> the rollout, told apart by its first answer
    for row in turns:
        group = next(g for g in groups if g.task_id == row["task_id"])
        for rollout in group.rollouts:
            if row["completion"][0]["content"] == rollout.turns()[0][2]:
                rollout_of[row["trace_id"]] = rollout
    assert len(rollout_of) == sum(len(g.rollouts) for g in groups)
    trace_of = {id(r): t for t, r in rollout_of.items()}
    traces = latest_traces([out])
    for trace_id, rollout in rollout_of.items():
        written = [(r["agent"], [{"role": m["role"], "content": m["content"]} for m in r["prompt"]],
                    r["completion"][0]["content"]) for r in turns if r["trace_id"] == trace_id]
        assert written == rollout.turns()
        want = rollout.outcome()
        for row in turns:
            if row["trace_id"] == trace_id:
                assert row["episode_reward"] == (pytest.approx(want) if want is not None else None)
        rewards = traces[trace_id]["rewards"]
        for reward in rollout.rewards:
            if reward.team:
                assert rewards[reward.channel] == [r.value for r in rollout.rewards
                                                   if r.channel == reward.channel][-1]
            else:
                assert reward.channel in rewards  # credited to its unit, not to the outcome
        assert "rejected_rewards" not in traces[trace_id]["metrics"]
    stats = compute_stats(traces.values())
    for group in groups:
        assert sorted(stats.groups[group.task_id], key=str) == sorted(
            (r.outcome() for r in group.rollouts), key=str)

    pairs = Counter((p["agent"], p["chosen"][0]["content"], p["rejected"][0]["content"],
                     p["chosen_trace_id"], p["rejected_trace_id"])
                    for p in _rows(out, "trl", work / "dpo.jsonl", trl_kind="dpo"))
    labels = Counter((r["trace_id"], r["completion"][0]["content"], r["label"])
                     for r in _rows(out, "trl", work / "kto.jsonl", trl_kind="kto"))
    want_pairs: Counter[tuple[str, str, str, str, str]] = Counter()
    want_labels: Counter[tuple[str, str, bool]] = Counter()
    for group in groups:
        rewarded = [r for r in group.rollouts if r.outcome() is not None]
        if len(rewarded) < 2:
            continue
        # Equal outcomes: the first by trace id ranks lowest, as the export reads the traces in that order.
        ranked = sorted(sorted(rewarded, key=lambda r: trace_of[id(r)]), key=lambda r: r.outcome() or 0.0)
        worst, best = ranked[0], ranked[-1]
        if not math.isclose(best.outcome() or 0.0, worst.outcome() or 0.0):
            want_pairs.update((agent, chosen, rejected, trace_of[id(best)], trace_of[id(worst)])
                              for agent, chosen, rejected in _expected_pairs(best, worst))
        mean = statistics.fmean(r.outcome() or 0.0 for r in rewarded)
        for rollout in rewarded:
            outcome = rollout.outcome() or 0.0
            if not math.isclose(outcome, mean, abs_tol=1e-12):
                want_labels.update((trace_of[id(rollout)], answer, outcome > mean)
                                   for _, _, answer in rollout.turns())
    assert pairs == want_pairs
    assert labels == want_labels

    skipped: list[str] = []
    tokens = _rows(out, "tokens", work / "tokens.jsonl", skipped=skipped)
    want_skipped = 0
    for trace_id, rollout in rollout_of.items():
        want_rows, not_built = token_rows_truth(rollout)
        want_skipped += not_built
        mine = [r for r in tokens if r["trace_id"] == trace_id]
        assert sorted((r["agent"], r["input_ids"]) for r in mine) == sorted(want_rows)
        assert [r["episode_reward"] for r in mine] == [rollout.outcome()] * len(mine)
    assert len(skipped) == want_skipped


@pytest.mark.parametrize("seed", range(8))
def test_rollout_groups_are_exported_by_their_outcome(tmp_path: Path, collector: RunningCollector,
                                                      seed: int) -> None:
    groups = [draw_group(seed * 2 + k, f"group {seed}/{k}") for k in range(2)]
    outputs = run_three_ways(tmp_path, collector, lambda: [run_group(g) for g in groups],
                             capture_content=True)
    for way in WAYS:
        (tmp_path / f"exports-{way}").mkdir()
        check_rollout_exports(outputs[way].out, groups, tmp_path / f"exports-{way}")


def check_graph_app(app: GraphApp, trace: dict[str, Any], turns: list[dict[str, Any]], out: Path,
                    work: Path) -> None:
    """One run of a random LangGraph graph against what it did: one name per node and its activations, the
    Send reducers' aggregates, and the decisions dataset (choices only by default, fixed routes marked)."""
    events = trace["events"]
    names = set(app.runs) | {app.name} | {"human"}  # the resume's actor: the human (``humans`` below)
    for e in events:  # every name field is a stable name: the activation is a field of its own
        fields = ("to", "from") if e["type"] == "tool_result" else ("agent", "to", "from")  # a tool's name
        assert {e[k] for k in fields if k in e} <= names, e
    ran = Counter(e["agent"] for e in events if e["type"] == "return")
    assert ran == app.runs + Counter({app.name: 1})
    instances = {(e["agent"], e["activation"]) for e in events if e["type"] == "return"}
    for e in events:
        if e["type"] == "spawn":
            assert (e["to"], e["to_activation"]) in instances, e
    assert sum(e["type"] == "aggregate" for e in events) == app.aggregates
    # What each node handed back: the ref of the output it was built to return (none when interrupted); a
    # plain node's state update is not stored as content, an agent's (a subgraph's state) is.
    nodes = [e for e in events if e["type"] == "return" and e["agent"] != app.name]
    assert {e["to"] for e in nodes} <= {app.name}
    assert Counter((e["agent"], e.get("content_ref")) for e in nodes if e["agent"] not in app.opaque) == \
        app.returns
    for e in nodes:
        ref = e.get("content_ref")
        if ref is not None:
            assert (read_content(out, ref) is not None) == (e["agent"] in app.agents), e
    assert {e["agent"] for e in nodes if e["agent"] in app.opaque and e.get("content_ref")} == app.opaque
    # An agent handing the run on: its output is the update it handed over, its handoff a decision of its own.
    handed = {e["agent"]: _captured_text(out, e["content_ref"]) for e in nodes if e["agent"] in app.handed}
    assert handed == {name: json.dumps(update, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
                      for name, update in app.handed.items()}
    assert Counter((e["agent"], e["to"]) for e in events if e.get("handoff")) == Counter(
        (name, choice.choice) for choice in app.choices for name in app.handed if choice.decider == name)
    humans = Counter((e["agent"], e["label"]) for e in events if e["type"] == "human_intervention")
    assert humans == app.humans
    # Active time: what the invocations took at most; the human's pauses before the resumes are idle.
    assert len(app.invocations) == app.resumes + 1
    assert trace["costs"]["wall_clock_s"] <= sum(app.invocations), (trace["costs"], app.invocations)

    def choices(rows: list[dict[str, Any]]) -> Counter[Choice]:
        return Counter(Choice(r["agent"], r["activation"], r["choice"], r["choice_activation"],
                              tuple(r["options"]) if r["options"] is not None else None) for r in rows)

    rows = _rows(out, "decisions", work / "decisions.jsonl")
    assert choices(rows) == Counter(app.choices)
    assert not any(r["fixed"] for r in rows)
    every = _rows(out, "decisions", work / "every.jsonl", include_fixed=True)
    fixed = [r for r in every if r["fixed"]]
    assert len(every) == len(rows) + len(fixed)
    assert all(r["agent"] == app.name and r["turn_id"] is None for r in fixed)  # the graph's wiring


def _check_graph_three_ways(tmp_path: Path, collector: RunningCollector, app: GraphApp) -> None:
    """Run ``app`` through trace_dir, convert and collect, and check each one episode against its truth."""
    provider = TracerProvider(shutdown_on_exit=False)
    outputs = run_three_ways(tmp_path, collector, lambda: run_graph_app(app, provider), provider=provider,
                             capture_content=True)
    for way in WAYS:
        trace, turns = outputs[way].only()
        (tmp_path / f"exports-{way}").mkdir()
        check_graph_app(app, trace, turns, outputs[way].out, tmp_path / f"exports-{way}")


@pytest.mark.parametrize("seed", range(16))
def test_a_random_graph_is_written_as_it_ran(tmp_path: Path, collector: RunningCollector, seed: int) -> None:
    _check_graph_three_ways(tmp_path, collector, draw_graph(seed))


@pytest.mark.parametrize("seed", range(8))
def test_a_graph_that_asks_a_human_is_one_episode_across_its_resumes(
        tmp_path: Path, collector: RunningCollector, seed: int) -> None:
    """A random graph with at least one node calling ``interrupt()`` (once or twice, maybe after a model
    call that runs again on every resume), run with a checkpointer and resumed with ``Command(resume=...)``
    after a human's pause until it ends: one episode, each question and answer a human intervention, the
    asking node's reruns its activations and turns, the pauses not active time."""
    _check_graph_three_ways(tmp_path, collector, draw_graph(1000 + seed, asks=True))


@pytest.mark.parametrize("seed", range(8))
def test_a_graph_handing_off_is_written_with_what_it_handed_on(
        tmp_path: Path, collector: RunningCollector, seed: int) -> None:
    """A random graph with an agent (a subgraph) whose last step hands the run on to the next node with
    ``Command.PARENT`` and an update: its return carries the update it handed on, its handoff is a decision
    to that node, and the graph's other nodes are written as they ran."""
    app = draw_graph(2000 + seed, hands_off=True)
    _check_graph_three_ways(tmp_path, collector, app)
    assert app.handed


@pytest.mark.parametrize("seed", range(4))
def test_a_late_span_joins_its_episode_and_idle_time_is_not_counted(
        tmp_path: Path, collector: RunningCollector, seed: int) -> None:
    """A straggler's model call ends ``gap`` seconds after its task: every way writes one episode holding it
    (the collector as a new revision, a single-pass convert at once), with the task's id; its costs and
    metrics count active time only; the task's own model calls are its root agent's (the service's name,
    the same for every task), not the task id's. A straggler in a dump of its own, converted after the main
    one into the same output, makes that episode's next revision, the same trace; converting either dump
    again adds nothing."""
    app = draw_late(seed)
    episodes: list[str] = []
    dump = tmp_path / "spans.jsonl"
    cut: list[int] = []  # where the straggler's own dump begins
    outputs = run_three_ways(tmp_path, collector, lambda: episodes.append(
        run_late(app, f"late-{seed}", lambda: cut.append(dump.stat().st_size))))
    written_as = {}
    for way in WAYS:
        trace, turns = outputs[way].only()
        assert (trace["trace_id"], trace["task_id"]) == (episodes[0], f"late-{seed}"), way
        assert len(turns) == app.direct + len(app.busy) + 1, way  # the late call is one of its turns
        service = trace["system"]  # the resource's service name, the same for every task
        assert Counter(t["agent"] for t in turns) == {service: app.direct + 1, "lead": len(app.busy)}, way
        # Active time: at least what ran, far less than the idle gap it would be with it.
        assert app.active <= trace["costs"]["wall_clock_s"] < app.active + app.gap / 2, (way, app)
        assert 0.9 <= trace["metrics"]["parallelism_efficiency"] <= 1.1, (way, trace["metrics"])
        written_as[way] = _without_revision(trace)
    assert written_as["trace_dir"] == written_as["convert"] == written_as["collect"]
    # Every span of the run, converted into the stopped collector's output: all written there already.
    spans = outputs["collect"].only()[0]["metrics"]["spans"]
    assert f"-> 0 traces in {collector.out} ({spans} spans were already written there)" in convert(
        [dump], collector.out)
    if not app.another_input:
        return
    data = dump.read_bytes()
    (tmp_path / "main.jsonl").write_bytes(data[:cut[0]])
    (tmp_path / "straggler.jsonl").write_bytes(data[cut[0]:])
    out = tmp_path / "convert-later"
    assert "1 spans -> 1 traces" in convert([tmp_path / "straggler.jsonl"], tmp_path / "alone")
    assert written(tmp_path / "alone").only()[0]["task_id"] != f"late-{seed}"  # alone, it says no task
    convert([tmp_path / "main.jsonl"], out)
    assert "1 spans -> 1 traces" in convert([tmp_path / "straggler.jsonl"], out)
    for again in ("straggler.jsonl", "main.jsonl"):
        printed = convert([tmp_path / again], out)
        assert "-> 0 traces" in printed and "spans were already written there" in printed, printed
    later = written(out)
    trace, turns = later.only()
    assert trace["metrics"]["revision"] == 1 and trace["metrics"]["spans"] == outputs["convert"].only()[0][
        "metrics"]["spans"]
    assert _without_revision(trace) == written_as["convert"]
    assert sorted(t["turn_id"] for t in turns) == sorted(t["turn_id"] for t in outputs["convert"].only()[1])
    assert len((out / "traces-00000.jsonl").read_text().splitlines()) == 2  # revisions 0 and 1, nothing else
    # A dump of another run (a real framework's) into the same output: its own episodes, as written alone.
    convert([UNRELATED], out)
    convert([UNRELATED], tmp_path / "unrelated")
    alone = written(tmp_path / "unrelated").traces
    assert alone and {k: v for k, v in written(out).traces.items() if k != episodes[0]} == alone


@pytest.mark.parametrize("seed", [0, 1])
def test_a_straggler_written_by_a_later_trace_dir_makes_the_next_revision(tmp_path: Path, seed: int) -> None:
    """The task's process writes its episode into ``trace_dir`` and stops; the straggler's span is written
    into the same directory by a trace_dir started after that: one episode, its next revision, the trace a
    single-pass convert of everything writes."""
    app = draw_late(seed)
    assert app.another_input
    out, dump = tmp_path / "traces", tmp_path / "spans.jsonl"

    def configure() -> ot.TracingHandle:
        return ot.configure("ground-truth", exporter=f"file:{dump}", trace_dir=out,
                            tracer_provider=TracerProvider(shutdown_on_exit=False))

    handles = [configure()]

    def restart() -> None:  # the task's process ends; the straggler's starts
        handles[0].shutdown()
        assert written(out).only()[0]["metrics"]["revision"] == 0
        handles.append(configure())

    try:
        episode = run_late(app, f"late-{seed}", restart)
    finally:
        handles[-1].shutdown()
    convert([dump], tmp_path / "convert")
    trace, turns = written(out).only()
    once, once_turns = written(tmp_path / "convert").only()
    assert (trace["trace_id"], trace["task_id"], trace["metrics"]["revision"]) == (episode, f"late-{seed}", 1)
    assert _without_revision(trace) == _without_revision(once)
    assert sorted(t["turn_id"] for t in turns) == sorted(t["turn_id"] for t in once_turns)


def _without_revision(trace: dict[str, Any]) -> str:
    metrics = {k: v for k, v in trace["metrics"].items() if k != "revision"}
    return json.dumps({**trace, "metrics": metrics}, sort_keys=True)
