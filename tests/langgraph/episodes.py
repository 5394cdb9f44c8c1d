"""Spans of a test converted to the written trace (validated), and the execution modes graphs run in."""

from __future__ import annotations

from typing import Any

from written_traces import convert as convert  # the folder's tests also import it from here
from written_traces import of_type

MODES = ("invoke", "ainvoke", "stream", "astream", "batch", "abatch", "astream_events")


async def run_graph(graph: Any, graph_input: Any, config: dict[str, Any] | None, mode: str) -> None:
    """Run ``graph`` once in ``mode`` (every public way: they reach LangGraph's loop differently)."""
    if mode == "invoke":
        graph.invoke(graph_input, config)
    elif mode == "ainvoke":
        await graph.ainvoke(graph_input, config)
    elif mode == "stream":
        list(graph.stream(graph_input, config, stream_mode="updates"))
    elif mode == "astream":
        [_ async for _ in graph.astream(graph_input, config, stream_mode="values")]
    elif mode == "batch":
        graph.batch([graph_input], [config] if config else None)
    elif mode == "abatch":
        await graph.abatch([graph_input], [config] if config else None)
    elif mode == "astream_events":
        [_ async for _ in graph.astream_events(graph_input, config, version="v2")]
    else:
        raise ValueError(mode)


def decisions(written: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every decision as (agent, activation, decision, target name, reason, handoff)."""
    return [
        (e["agent"], e.get("activation"), e.get("decision"), e.get("to"), e.get("reason"),
         e.get("handoff"))
        for e in of_type(written, "orchestrator_decision")
    ]


def check_causality(written: dict[str, Any]) -> None:
    """Every spawn carries out a decision (a ``spawn`` edge into it) whose ``to`` names what it started, and
    every decision that spawned names that target (and its activation, unless it chose several); each agent
    name's activations are numbered 1..n."""
    by_id = {e["id"]: e for e in written["events"]}
    into: dict[str, list[str]] = {}
    for edge in written["edges"]:
        if edge["type"] == "spawn":
            into.setdefault(edge["dst"], []).append(edge["src"])
    for spawn in of_type(written, "spawn"):
        sources = into.get(spawn["id"], [])
        assert sources, f"spawn {spawn} carries out no decision"
        for src in sources:
            decision = by_id[src]
            assert decision["type"] == "orchestrator_decision"
            assert decision.get("to") == spawn.get("to"), (decision, spawn)
            assert decision.get("to_activation") in (None, spawn["to_activation"]), (decision, spawn)
    seen: dict[str, set[int]] = {}
    for e in written["events"]:
        if "activation" in e:
            seen.setdefault(e["agent"], set()).add(e["activation"])
    for name, activations in seen.items():
        assert activations == set(range(1, len(activations) + 1)), (name, activations)
