"""One name per policy: a node that runs several times is one agent name everywhere (events' ``agent``,
``to`` and ``from``, turns, reward and credit keys), its activation a field of its own, in every mode."""

from __future__ import annotations

import pytest
from episodes import MODES, run_graph
from heldout_graphs import drafter_critic
from langchain_core.messages import HumanMessage
from span_checks import Spans
from written_traces import convert, of_type


@pytest.mark.parametrize("mode", MODES)
async def test_a_node_that_runs_three_times_is_one_name_with_three_activations(
    spans: Spans, mode: str
) -> None:
    await run_graph(drafter_critic(reward=1.0), {"messages": [HumanMessage("write")]}, None, mode)
    written, episode = convert(spans.all)
    events = written["events"]
    names = {"essay", "drafter", "critic"}
    for e in events:
        assert {e[k] for k in ("agent", "to", "from") if k in e} <= names, e
    returns = [(e["from"], e["from_activation"], e.get("to"), e.get("to_activation"))
               for e in of_type(written, "return")]
    assert sorted(returns) == sorted(
        [(n, k, "essay", 1) for n in ("drafter", "critic") for k in (1, 2, 3)] + [("essay", 1, None, None)])
    assert [(e["to"], e["to_activation"]) for e in of_type(written, "spawn")] == [
        (n, k) for k in (1, 2, 3) for n in ("drafter", "critic")]
    # The critic's choice of the next draft names the activation it led to; the last critic stops.
    chose = [(e["agent"], e["activation"], e.get("to"), e.get("to_activation"), e.get("from_activation"))
             for e in of_type(written, "orchestrator_decision") if e["agent"] == "critic"]
    assert chose == [("critic", 1, "drafter", 2, None), ("critic", 2, "drafter", 3, None),
                     ("critic", 3, None, None, 3)]
    assert sorted((t.agent, t.activation) for t in episode.turns) == sorted(
        (n, k) for n in ("drafter", "critic") for k in (1, 2, 3))
    credit = {k: v for k, v in written["rewards"].items() if k.startswith("credit:")}
    assert set(credit) == {"credit:agent:drafter", "credit:agent:critic"}
    assert sum(credit.values()) == pytest.approx(written["rewards"]["team"]) == pytest.approx(1.0)
    # One activation's part: the credit of its turns.
    by_activation = {(t.agent, t.activation): t.reward or 0.0 for t in episode.turns}
    assert sum(v for (n, _), v in by_activation.items() if n == "drafter") == pytest.approx(
        credit["credit:agent:drafter"])
