"""Random graph shapes and hostile node names (``random_graphs``): the written trace agrees with what the run
really did, as each node logged it (its name and the span it ran in), under the documented mapping."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from episodes import run_graph
from orchestrace_collector import convert_spans
from orchestrace_collector.convert import Episode
from orchestrace_collector.inprocess import span_from_readable
from random_graphs import RandomApp, random_app
from span_checks import Spans
from written_traces import convert

SEEDS = range(40)
#: Fields that differ from run to run of one program (times, ids), left out when comparing two runs.
VOLATILE = frozenset({"id", "t", "t_start", "t_end", "span_id", "otel_trace_id", "agent_id", "content_ref"})


async def run(app: RandomApp, spans: Spans) -> tuple[dict[str, Any], Episode]:
    """Run ``app`` once and return its written trace, checking that the run is one valid episode."""
    spans.clear()
    del app.log.executions[:]
    await run_graph(app.graph, {"parts": []}, None, app.mode)
    assert len(convert_spans(span_from_readable(s) for s in spans.all)) == 1  # one episode per invoke
    written, episode = convert(spans.all)  # validates: schema and referential checks
    assert written["metrics"]["incomplete"] == 0
    return written, episode


def runs_per_name(app: RandomApp) -> Counter[str]:
    """How many times each top-level node ran (a subgraph agent: how many times its first inner node ran)."""
    runs: Counter[str] = Counter()
    for x in app.log.executions:
        if x.inner_of is None:
            runs[x.name] += 1
        elif app.first_inner[x.inner_of] == x.name:
            runs[x.inner_of] += 1
    return runs


def ref(event: dict[str, Any], field: str) -> tuple[str, int | None]:
    """The instance an event's ``to`` / ``from`` names: the stable name and its activation."""
    return event[field], event.get(f"{field}_activation")


def check_against_log(app: RandomApp, written: dict[str, Any], episode: Episode, *,
                      spans_logged: bool = True) -> None:
    """``spans_logged``: the spans the nodes logged are ours (not when another library's callback tracer
    made its own span current around the node code: a root of its own trace, not under ours)."""
    events = written["events"]
    first_index: dict[tuple[str, int], int] = {}
    for i, event in enumerate(events):
        if "activation" in event:
            first_index.setdefault((event["agent"], event["activation"]), i)
    instances = set(first_index)

    # Every top-level node execution is one instance of its name; the graph's run is one more (a node may
    # share the graph's name: the mapping numbers them together, the run first).
    expected = runs_per_name(app) + Counter({app.name: 1})
    activations: dict[str, list[int]] = {}
    for name, activation in instances:
        activations.setdefault(name, []).append(activation)
    numbered = {n: list(range(1, k + 1)) for n, k in expected.items()}
    assert {n: sorted(a) for n, a in activations.items()} == numbered

    returns = [e for e in events if e["type"] == "return"]
    assert sorted(Counter((e["agent"], e["activation"]) for e in returns).items()) == \
        sorted((key, 1) for key in instances)  # every activation returns once
    # Numbered in start order, except a Send's workers: in the order their payloads were sent (their
    # threads' start order is a race; convert/actors.py ``_numbering_key``).
    for name in set(activations) - set(app.sends):
        starts = [e["t_start"] for e in sorted((e for e in returns if e["agent"] == name),
                                                key=lambda e: e["activation"])]
        assert starts == sorted(starts), name
    by_span = {e["span_id"]: e for e in returns}
    for x in app.log.executions:
        if x.inner_of is None and spans_logged:  # the return of the very span the node ran in names it
            assert by_span[x.span_id]["agent"] == x.name, x

    # A model call is a turn of the node it ran in (of the agent, in an agent's inner node).
    called = [x for x in app.log.executions if x.called_model]
    assert Counter(t.agent for t in episode.turns) == Counter(x.inner_of or x.name for x in called)
    top_level = Counter((by_span[x.span_id]["agent"], by_span[x.span_id]["activation"])
                        for x in called if x.inner_of is None and spans_logged)
    turns = Counter((t.agent, t.activation) for t in episode.turns)
    assert all(turns[key] == n for key, n in top_level.items()), (turns, top_level)
    tokens = sum((turn.input_tokens or 0) + (turn.output_tokens or 0) for turn in episode.turns)
    assert written["costs"]["tokens"] == tokens == sum(e.get("tokens", 0) for e in events)

    assert [(e["agent"], e["activation"]) for e in returns if "to" not in e] == [(app.name, 1)]  # the answer
    for e in returns:
        assert ref(e, "from") == (e["agent"], e["activation"])
        if (e["agent"], e["activation"]) != (app.name, 1):  # top-level nodes and agents return to the run
            enclosing = app.enclosing.get(e["agent"])  # an agent inside an agent returns to that agent
            assert (ref(e, "to") == (app.name, 1)) if enclosing is None else (e["to"] == enclosing), e

    # Each instance but the run is spawned once, before its first event; so every Send packet is one spawn.
    spawned: Counter[tuple[str, int | None]] = Counter()
    for i, e in enumerate(events):
        if e["type"] in ("spawn", "despawn"):
            assert ref(e, "to") in instances, e
        if e["type"] == "spawn":
            spawned[ref(e, "to")] += 1
            assert i < first_index[e["to"], e["to_activation"]], e
    assert spawned == Counter({key: 1 for key in instances if key != (app.name, 1)})
    for target, packets in app.sends.items():
        assert runs_per_name(app)[target] == packets

    for e in events:  # a decision may name an agent when it chose several of its instances (a fan-out)
        if e["type"] == "orchestrator_decision" and "to" in e:
            assert ref(e, "to") in instances or ("to_activation" not in e and e["to"] in activations), e
        if "from" in e:
            assert ref(e, "from") in instances, e
    handoffs = Counter((e["agent"], e["to"]) for e in events if e.get("handoff"))
    assert handoffs == Counter(app.handoffs.items())  # a Command.PARENT handoff is the agent's own decision
    stops = [e for e in events if e.get("decision") == "stop"]
    assert len(stops) == 1, stops  # every run reaches END once
    # Every shape ends with one top-level node routing to END (a subgraph agent: its inner nodes ran last).
    last = app.log.executions[-1]
    last_name = last.inner_of or last.name
    while last_name in app.enclosing:
        last_name = app.enclosing[last_name]
    if not app.racing_end:
        assert ref(stops[0], "from") == (last_name, max(activations[last_name])), stops


#: Edges that follow the order of a timeline's events (consecutive events; a return -> the parent's next
#: event): where tasks run at once, that order is a race between them, so two runs may differ there.
ORDERED_EDGES = frozenset({"temporal", "return"})


def normalised(written: dict[str, Any], parallel: bool,
               racing_end: bool) -> tuple[Counter[str], Counter[str]]:
    """Events and edges without times and ids, as multisets (events of parallel tasks interleave either
    way). When tasks ran at once, without the edges that depend on that order, and with instances named by
    their agent: activations are numbered in start order, and two parallel tasks that each start an agent of
    one name may start them in either order; and without events' tokens: a turn's tokens go on the first
    event of its owner after it started, and a model call in one of an agent's parallel inner tasks may start
    before or after the agent's next event (their sum is checked against the turns). ``racing_end``: without
    the node the run's stop names."""
    events = {}
    for e in written["events"]:
        fields = {k: v for k, v in e.items() if k not in VOLATILE}
        if racing_end and fields.get("decision") == "stop":
            fields.pop("from")
            fields.pop("from_activation", None)
        if parallel:
            for k in ("activation", "tokens", "to_activation", "from_activation"):
                fields.pop(k, None)
        events[e["id"]] = repr(sorted(fields.items()))
    edges = Counter(f"{e['type']} {events[e['src']]} -> {events[e['dst']]}" for e in written["edges"]
                    if not (parallel and e["type"] in ORDERED_EDGES))
    return Counter(events.values()), edges


@pytest.mark.parametrize("seed", SEEDS)
async def test_random_graph_trace_matches_what_ran(spans: Spans, seed: int) -> None:
    app = random_app(seed)
    first, episode = await run(app, spans)
    check_against_log(app, first, episode)
    again, _ = await run(random_app(seed), spans)
    # The mapping is deterministic: the same program gives the same trace.
    races = app.parallel, app.racing_end
    assert normalised(again, *races) == normalised(first, *races), (app.shape, app.mode)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("seed", SEEDS[:10])
async def test_random_graph_trace_is_the_same_beside_other_instrumentations(spans: Spans, seed: int) -> None:
    """OpenInference's and OpenLLMetry's LangChain instrumentors describe the same runs again: the collector
    sets them aside, so the trace still matches the log and equals the one of ours alone."""
    from openinference.instrumentation.langchain import LangChainInstrumentor as OpenInference
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor as OpenLLMetry
    from test_coexistence import remove_openllmetry_leftovers

    app = random_app(seed)
    alone, _ = await run(app, spans)
    others = [OpenInference(), OpenLLMetry()]
    for other in others:
        other.instrument(tracer_provider=spans.provider)
    try:
        together, episode = await run(app, spans)
    finally:
        for other in reversed(others):  # last in, first out: each unwraps its own patch
            other.uninstrument()
        remove_openllmetry_leftovers()
    assert len(spans.all) > len(spans.ours)  # they did record
    check_against_log(app, together, episode, spans_logged=False)
    races = app.parallel, app.racing_end
    assert normalised(together, *races) == normalised(alone, *races), (app.shape, app.mode)
