"""One test per mapping rule, on spans built directly (see convert/README.md for the table)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from convert_support import Spans, event
from orchestrace import semconv as sc
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.spans import STATUS_ERROR, SpanLink
from written_traces import checked, edges_of, of_type


def ids(written: dict[str, Any], type_: str, **match: Any) -> list[str]:
    return [e["id"] for e in of_type(written, type_) if all(e.get(k) == v for k, v in match.items())]


def test_nested_agent_is_a_delegation_with_decision_spawn_and_return() -> None:
    s = Spans()
    boss = s.agent("boss", 0, 10, role="lead")
    s.chat(0.5, 1, boss)
    s.agent("worker", 2, 5, boss, role="analyst")
    s.tool("lookup", 6, 7, boss)
    w = checked(convert_episode(s.spans))

    decision, spawn = of_type(w, "orchestrator_decision")[0], of_type(w, "spawn")[0]
    assert (decision["agent"], decision["decision"], decision["to"]) == ("boss", "delegate", "worker")
    assert (spawn["agent"], spawn["to"], spawn["role"]) == ("boss", "worker", "analyst")
    worker_return = of_type(w, "return")[0]
    assert worker_return == {
        **worker_return,
        "agent": "worker",
        "from": "worker",
        "to": "boss",
        "trusted": True,
    }
    assert (decision["id"], spawn["id"]) in edges_of(w, "spawn")
    assert (spawn["id"], worker_return["id"]) in edges_of(
        w, "causal"
    )  # the worker's first event is its return
    tool_call = of_type(w, "tool_call")[0]
    assert (worker_return["id"], tool_call["id"]) in edges_of(w, "return")  # back to the parent's next event
    assert not of_type(w, "despawn")  # a delegation is a call with a return, not a spawned instance
    assert w["topology"] == "centralized"


@pytest.mark.parametrize("b_first", [False, True])
def test_a_fan_outs_payload_goes_to_the_worker_that_took_it_whichever_started_first(b_first: bool) -> None:
    s = Spans()
    sends = [event(sc.EVENT_SPAWN, 1, **{sc.ORCH_TARGET_AGENT: "work", sc.ORCH_CONTENT_REF: f"sha256:{x}"})
             for x in "ab"]
    run = s.workflow("run", 0, 4)
    s.agent("plan", 0.5, 1, run, events=sends)  # sends a then b; the workers are the run's, as in LangGraph
    starts = {"a": 2.2 if b_first else 2.1, "b": 2.1 if b_first else 2.2}
    for x in "ab":
        s.agent("work", starts[x], 3, run, **{sc.ORCH_INPUT_REF: f"sha256:{x}"})
    w = checked(convert_episode(s.spans))
    label = {e["t_start"]: (e["from"], e["from_activation"])
             for e in of_type(w, "return") if e["agent"] == "work"}
    given = {e["content_ref"]: (e["to"], e["to_activation"])
             for e in of_type(w, "spawn") if "content_ref" in e}
    assert given == {f"sha256:{x}": label[starts[x]] for x in "ab"}
    # Numbered in the order the payloads were sent, whichever worker's thread started first.
    assert given == {"sha256:a": ("work", 1), "sha256:b": ("work", 2)}


def test_explicit_spawn_event_is_matched_to_the_child_and_despawned_at_its_end() -> None:
    s = Spans()
    target = {sc.ORCH_TARGET_AGENT: "helper", sc.ORCH_TARGET_ROLE: "scout"}
    boss = s.agent(
        "boss",
        0,
        10,
        events=[
            event(sc.EVENT_SPAWN, 1, **target),
            event(sc.EVENT_SPAWN, 1.5, **target),
            event(sc.EVENT_SPAWN, 8, **{sc.ORCH_TARGET_AGENT: "remote"}),
        ],
    )
    s.agent("helper", 2, 3, boss)
    s.agent("helper", 4, 5, boss)
    w = checked(convert_episode(s.spans))

    spawns = of_type(w, "spawn")
    # the earliest unmatched explicit spawn goes to the first helper, the next to the second
    assert [(e["t"], e["to"], e.get("to_activation"), e.get("role")) for e in spawns] == [
        (1, "helper", 1, "scout"),
        (1.5, "helper", 2, "scout"),
        (8, "remote", None, None),
    ]
    decisions = of_type(w, "orchestrator_decision")
    assert [d["decision"] for d in decisions] == ["spawn", "spawn", "spawn"]  # no synthesized delegate
    despawns = of_type(w, "despawn")
    assert [(d["agent"], d["to"], d["to_activation"], d["t"]) for d in despawns] == [
        ("boss", "helper", 1, 3),
        ("boss", "helper", 2, 5),
    ]
    returns = {(e["from"], e["from_activation"]): e for e in of_type(w, "return")}
    assert (returns["helper", 1]["id"], despawns[0]["id"]) in edges_of(w, "return")


def test_spawn_after_the_child_started_does_not_match_it() -> None:
    s = Spans()
    boss = s.agent("boss", 0, 10, events=[event(sc.EVENT_SPAWN, 5, **{sc.ORCH_TARGET_AGENT: "helper"})])
    s.agent("helper", 2, 3, boss)
    w = checked(convert_episode(s.spans))
    decisions = of_type(w, "orchestrator_decision")
    assert [(d["decision"], d["t"]) for d in decisions] == [("delegate", 2), ("spawn", 5)]


def test_langgraph_send_fan_out_matches_explicit_spawns_to_sibling_nodes() -> None:
    s = Spans()
    graph = s.workflow("graph", 0, 10)
    fan = [
        event(sc.EVENT_SPAWN, 1.9, **{sc.ORCH_TARGET_AGENT: "work", sc.ORCH_REASON: "Send"}) for _ in range(3)
    ]
    s.node("plan", 1, 2, graph, events=fan)
    for k in range(3):
        s.node("work", 2 + k * 0.1, 4 + k * 0.1, graph, **{sc.ORCH_NODE_ID: f"task-{k}"})
    s.node("merge", 5, 6, graph)
    w = checked(convert_episode(s.spans))

    spawns = {(e["to"], e["to_activation"]): e for e in of_type(w, "spawn")}
    assert {spawns["work", k]["agent"] for k in (1, 2, 3)} == {"plan"}  # the dispatching node spawned them
    assert (
        spawns["plan", 1]["agent"] == spawns["merge", 1]["agent"] == "graph"
    )  # the others were scheduled by the graph
    returns = {(e["from"], e["from_activation"]): e for e in of_type(w, "return")}
    assert all(returns["work", k]["to"] == "graph" for k in (1, 2, 3))
    assert returns["work", 2]["agent_id"] == "task-1"
    assert len(of_type(w, "despawn")) == 3


def test_tool_call_and_untrusted_result_with_dependency_and_safety_flow() -> None:
    s = Spans()
    agent = s.agent(
        "solver", 0, 10, events=[event(sc.EVENT_DECISION, 0.5, **{sc.ORCH_DECISION_KIND: "plan"})]
    )
    s.chat(1, 2, agent)
    s.tool(
        "search",
        2,
        3,
        agent,
        **{sc.ORCH_INPUT_REF: "sha256:q", sc.ORCH_OUTPUT_REF: "sha256:r", sc.GEN_AI_TOOL_CALL_ID: "call-1"},
    )
    s.tool("search", 2.1, 3.5, agent)
    s.chat(4, 5, agent)
    s.tool("calc", 5, 6, agent, **{sc.ORCH_TOOL_TRUSTED: True})
    s.chat(7, 8, agent)
    w = checked(convert_episode(s.spans))

    calls, results = of_type(w, "tool_call"), of_type(w, "tool_result")
    assert calls[0] == {
        **calls[0],
        "agent": "solver",
        "tool": "search",
        "trusted": True,
        "content_ref": "sha256:q",
        "t_end": 3,
    }
    assert results[0] == {
        **results[0],
        "agent": "search",
        "tool": "search",
        "trusted": False,
        "content_ref": "sha256:r",
    }
    assert results[2]["trusted"] is True
    assert {(c["id"], r["id"]) for c, r in zip(calls, results, strict=True)} <= edges_of(w, "return")
    decision = of_type(w, "orchestrator_decision")[0]
    assert decision["label"] == "plan" and "decision" not in decision
    # both parallel calls depend on the decision before them, not on each other
    assert {(decision["id"], calls[0]["id"]), (decision["id"], calls[1]["id"])} <= edges_of(
        w, "tool_dependency"
    )
    # No prompt was captured: the next model call is taken to have read the untrusted results, so what it
    # asked for (the calc call) is untrusted; the last call received nothing new, so the return is not.
    ret = of_type(w, "return")[0]
    flows = edges_of(w, "safety_flow")
    assert flows == {(results[0]["id"], calls[2]["id"]), (results[1]["id"], calls[2]["id"])}
    assert calls[2]["trusted"] is False and ret["trusted"] is True
    assert not any(src == results[2]["id"] for src, _ in flows)  # a trusted result taints nothing


def test_message_event_and_edge_to_the_recipients_next_event() -> None:
    s = Spans()
    root = s.agent("lead", 0, 10)
    a = s.agent(
        "alice",
        1,
        6,
        root,
        events=[
            event(
                sc.EVENT_MESSAGE,
                2,
                **{sc.ORCH_FROM: "alice", sc.ORCH_TO: "bob", sc.ORCH_CONTENT_REF: "sha256:m"},
            )
        ],
    )
    b = s.agent("bob", 1, 6, root)
    s.tool("read", 3, 4, b)
    assert a.span_id != b.span_id
    w = checked(convert_episode(s.spans))
    message = of_type(w, "message")[0]
    assert message == {**message, "agent": "alice", "from": "alice", "to": "bob", "content_ref": "sha256:m"}
    bob_call = of_type(w, "tool_call")[0]
    assert (message["id"], bob_call["id"]) in edges_of(w, "message")
    assert w["costs"]["messages"] == 1


@pytest.mark.parametrize("kind", sc.DECISION_KINDS)
def test_decision_kinds_of_the_five_become_decision(kind: str) -> None:
    s = Spans()
    s.agent(
        "lead",
        0,
        2,
        events=[
            event(
                sc.EVENT_DECISION,
                1,
                **{sc.ORCH_DECISION_KIND: kind, sc.ORCH_REASON: "because", sc.ORCH_TARGET_AGENT: "x"},
            )
        ],
    )
    w = checked(convert_episode(s.spans))
    decision = of_type(w, "orchestrator_decision")[0]
    assert (decision["decision"], decision["reason"], decision["to"]) == (kind, "because", "x")


def test_stop_is_a_stop_decision_and_the_final_event_for_credit() -> None:
    s = Spans()
    lead = s.agent(
        "lead",
        0,
        10,
        events=[
            event(sc.EVENT_STOP, 5, **{sc.ORCH_REASON: "done"}),
            event(
                sc.EVENT_EVALUATION_RESULT,
                9.9,
                **{sc.GEN_AI_EVALUATION_SCORE_VALUE: 1.0, sc.ORCH_REWARD_UNIT: "team"},
            ),
        ],
    )
    s.tool("late", 6, 7, lead)
    w = checked(convert_episode(s.spans))
    stop = of_type(w, "orchestrator_decision")[0]
    assert (stop["decision"], stop["reason"]) == ("stop", "done")


def test_stop_recorded_for_the_node_that_decided_names_it() -> None:
    s = Spans()
    graph = s.workflow("pipeline", 0, 10)
    s.node("draft", 1, 3, graph)
    s.node("review", 4, 8, graph)
    graph.events.append(event(sc.EVENT_STOP, 9, **{sc.ORCH_REASON: "no_next_node", sc.ORCH_FROM: "review"}))
    w = checked(convert_episode(s.spans))
    (stop,) = [e for e in of_type(w, "orchestrator_decision") if e.get("decision") == "stop"]
    assert (stop["agent"], stop["from"], stop["reason"]) == ("pipeline", "review", "no_next_node")


@pytest.mark.parametrize("as_agent", [False, True])
def test_a_graphs_only_node_named_like_the_graph_is_its_own_instance(as_agent: bool) -> None:
    """Graph ``x`` whose one node ``x`` ran (a plain node, or an agent node running a subgraph): the node is a
    step of the run, not a wrapper of it; it is spawned, returns, and is the one the run's stop names."""
    s = Spans()
    graph = s.workflow("x", 0, 10)
    if as_agent:
        node = s.agent("x", 1, 8, graph, **{sc.LANGGRAPH_NODE: "x"})
        s.node("inner", 2, 7, s.workflow("sub", 1.5, 7.5, node))
    else:
        s.node("x", 1, 8, graph)
    graph.events.append(event(sc.EVENT_STOP, 9, **{sc.ORCH_REASON: "no_next_node", sc.ORCH_FROM: "x"}))
    w = checked(convert_episode(s.spans))
    assert [(e["agent"], e["to"], e["to_activation"]) for e in of_type(w, "spawn")] == [("x", "x", 2)]
    assert [(e["from"], e["from_activation"], e.get("to"), e.get("to_activation"))
            for e in of_type(w, "return")] == [("x", 2, "x", 1), ("x", 1, None, None)]
    (stop,) = [e for e in of_type(w, "orchestrator_decision") if e.get("decision") == "stop"]
    assert (stop["agent"], stop["activation"], stop["from"], stop["from_activation"]) == ("x", 1, "x", 2)
    assert {e["agent"] for e in w["events"]} == {"x"}  # the agent's subgraph stays its inner working


def test_aggregate_span_with_links_gets_aggregate_edges_from_linked_results() -> None:
    s = Spans()
    lead = s.agent("lead", 0, 10)
    w1 = s.agent("w", 1, 2, lead)
    s.agent("w", 1, 3, lead)
    t = s.tool("fetch", 1, 2.5, lead)
    links = [
        SpanLink(s.trace_id, w1.span_id, {sc.ORCH_LINK_TYPE: sc.LINK_AGGREGATE_INPUT}),
        SpanLink(s.trace_id, t.span_id, {sc.ORCH_LINK_TYPE: sc.LINK_AGGREGATE_INPUT}),
    ]
    s.span(
        "aggregate lead",
        4,
        5,
        lead,
        {sc.ORCH_OPERATION: sc.OPERATION_AGGREGATE, sc.ORCH_OUTPUT_REF: "sha256:a"},
        links=links,
    )
    w = checked(convert_episode(s.spans))
    agg = of_type(w, "aggregate")[0]
    assert (agg["agent"], agg["content_ref"], agg["t_end"]) == ("lead", "sha256:a", 5)
    w1_return = ids(w, "return", **{"from": "w", "from_activation": 1})[0]
    result = of_type(w, "tool_result")[0]["id"]
    assert {src for src, dst in edges_of(w, "aggregate") if dst == agg["id"]} == {w1_return, result}


def test_aggregate_without_links_takes_the_returns_since_the_previous_aggregate() -> None:
    s = Spans()
    lead = s.agent("lead", 0, 20)
    for k in range(2):
        s.agent("w", 1 + k, 2 + k, lead)
    s.span("aggregate lead", 5, 6, lead, {sc.ORCH_OPERATION: sc.OPERATION_AGGREGATE})
    s.agent("w", 7, 8, lead)
    s.span("aggregate lead", 9, 10, lead, {sc.ORCH_OPERATION: sc.OPERATION_AGGREGATE})
    w = checked(convert_episode(s.spans))
    first, second = ids(w, "aggregate")
    into = {dst: set() for dst in (first, second)}
    for src, dst in edges_of(w, "aggregate"):
        into[dst].add(src)
    def returned(k: int) -> str:
        return ids(w, "return", **{"from": "w", "from_activation": k})[0]

    assert into[first] == {returned(1), returned(2)}
    assert into[second] == {returned(3)}


def test_actor_span_with_aggregate_links_is_an_aggregate_at_its_start() -> None:
    s = Spans()
    graph = s.workflow("g", 0, 10)
    a = s.node("a", 1, 2, graph)
    b = s.node("b", 1, 3, graph)
    links = [SpanLink(s.trace_id, x.span_id, {sc.ORCH_LINK_TYPE: sc.LINK_AGGREGATE_INPUT}) for x in (a, b)]
    s.span(
        "reduce",
        4,
        5,
        graph,
        {sc.ORCH_OPERATION: sc.OPERATION_NODE, sc.ORCH_NODE_NAME: "reduce"},
        links=links,
    )
    w = checked(convert_episode(s.spans))
    agg = of_type(w, "aggregate")[0]
    assert (agg["agent"], agg["t"]) == ("reduce", 4)
    assert {src for src, _ in edges_of(w, "aggregate")} == {
        ids(w, "return", agent="a")[0],
        ids(w, "return", agent="b")[0],
    }


def test_human_intervention_and_safety_event_with_source() -> None:
    s = Spans()
    lead = s.agent(
        "lead",
        0,
        10,
        events=[
            event(
                sc.EVENT_HUMAN_INTERVENTION,
                1,
                **{sc.ORCH_HUMAN_KIND: "approve", sc.ORCH_HUMAN_ACTOR: "reviewer"},
            ),
            event(
                sc.EVENT_SAFETY,
                5,
                **{
                    sc.ORCH_SAFETY_CATEGORY: "prompt_injection",
                    sc.ORCH_SAFETY_ACTION: "blocked",
                    sc.ORCH_SAFETY_SOURCE: "call-7",
                    sc.ORCH_SAFETY_SEVERITY: "high",
                    sc.ORCH_TARGET_AGENT: "helper",
                },
            ),
        ],
    )
    s.tool("browse", 2, 3, lead, **{sc.GEN_AI_TOOL_CALL_ID: "call-7", sc.ORCH_TOOL_TRUSTED: True})
    s.agent("helper", 4, 6, lead)
    w = checked(convert_episode(s.spans))
    human = of_type(w, "human_intervention")[0]
    assert (human["agent"], human["label"]) == ("reviewer", "approve")
    safety = of_type(w, "safety_event")[0]
    assert (safety["agent"], safety["label"], safety["reason"]) == ("lead", "prompt_injection", "blocked")
    assert (safety["severity"], safety["source"], safety["to"]) == ("high", "call-7", "helper")
    assert (of_type(w, "tool_result")[0]["id"], safety["id"]) in edges_of(w, "safety_flow")


def test_temporal_edges_follow_each_instance_in_time_order() -> None:
    s = Spans()
    lead = s.agent("lead", 0, 10)
    s.tool("a", 1, 2, lead)
    s.tool("b", 3, 4, lead)
    w = checked(convert_episode(s.spans))
    chain = [e["id"] for e in w["events"]]  # lead's own timeline: call a, result a, call b, result b, return
    linked = (
        edges_of(w, "temporal")
        | edges_of(w, "return")
        | edges_of(w, "tool_dependency")
        | edges_of(w, "safety_flow")
    )
    assert all((x, y) in linked for x, y in itertools.pairwise(chain))
    assert [e["t"] for e in w["events"]] == sorted(e["t"] for e in w["events"])
    assert chain == [f"e{k}" for k in range(1, len(chain) + 1)]


def test_turns_link_events_until_the_next_turn_and_carry_tokens_and_chat() -> None:
    s = Spans()
    agent = s.agent("solver", 0, 10)
    messages_in = json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "2+2?"}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c", "response": "4"}]},
        ]
    )
    messages_out = json.dumps(
        [
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "content": "Let me "},
                    {"type": "tool_call", "name": "calc", "arguments": {}},
                    {"type": "text", "content": "check."},
                ],
            }
        ]
    )
    first = s.chat(
        1,
        2,
        agent,
        tokens=(30, 7),
        **{
            sc.GEN_AI_INPUT_MESSAGES: messages_in,
            sc.GEN_AI_OUTPUT_MESSAGES: messages_out,
            sc.ORCH_INPUT_REF: "sha256:in",
        },
    )
    s.tool("calc", 2, 3, agent)
    s.chat(4, 5, agent, tokens=(50, 3), **{sc.GEN_AI_INPUT_MESSAGES: [{"role": "user", "content": "plain"}]})
    episode = convert_episode(s.spans)
    w = checked(episode)
    t1, t2 = episode.turns
    assert t1.turn_id == first.span_id and t1.agent == "solver" and t1.model == "fake-model"
    assert t1.event_ids == [e["id"] for e in w["events"] if e["type"].startswith("tool_")]
    assert t2.event_ids == ids(w, "return")
    assert of_type(w, "tool_call")[0]["tokens"] == 37 and of_type(w, "return")[0]["tokens"] == 53
    assert w["costs"]["tokens"] == 90
    # Written with exclude_none: plain messages stay {role, content}; tool calls and their ids are kept.
    assert [m.model_dump(exclude_none=True) for m in t1.prompt or []] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "tool", "content": "4", "tool_call_id": "c"},
    ]
    assert [m.model_dump(exclude_none=True) for m in t1.completion or []] == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {}}}],
        }
    ]
    assert [m.model_dump(exclude_none=True) for m in t2.prompt or []] == [
        {"role": "user", "content": "plain"}
    ]
    assert t1.input_ref == "sha256:in" and episode.contents["sha256:in"] == messages_in


def test_tool_answers_sent_as_one_user_message_become_one_tool_message_each() -> None:
    """PydanticAI's shape: the answers to two parallel calls and a retry prompt, in one ``user`` message."""
    s = Spans()
    agent = s.agent("solver", 0, 10)
    answers = {"role": "user", "parts": [
        {"type": "tool_call_response", "id": "c1", "name": "add", "result": "4"},
        {"type": "tool_call_response", "id": "c2", "name": "mul", "result": 6},
        {"type": "text", "content": "Now answer."},
    ]}
    s.chat(1, 2, agent, tokens=(5, 1), **{sc.GEN_AI_INPUT_MESSAGES: json.dumps([answers])})
    (turn,) = convert_episode(s.spans).turns
    assert [m.model_dump(exclude_none=True) for m in turn.prompt or []] == [
        {"role": "tool", "content": "4", "tool_call_id": "c1", "name": "add"},
        {"role": "tool", "content": "6", "tool_call_id": "c2", "name": "mul"},
        {"role": "user", "content": "Now answer."},
    ]


def test_openinference_flattened_messages_and_token_counts() -> None:
    s = Spans()
    root = s.span("graph", 0, 5, None, {"openinference.span.kind": "CHAIN"})
    s.span(
        "ChatModel",
        1,
        2,
        root,
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "m1",
            "llm.token_count.prompt": 4,
            "llm.token_count.completion": 2,
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "hi",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "hello",
        },
    )
    s.span(
        "search",
        2,
        3,
        root,
        {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "q", "output.value": "r"},
    )
    episode = convert_episode(s.spans)
    w = checked(episode)
    turn = episode.turns[0]
    assert (turn.agent, turn.model, turn.input_tokens, turn.output_tokens) == ("graph", "m1", 4, 2)
    assert [m.content for m in turn.prompt or []] == ["hi"] and [
        m.content for m in turn.completion or []
    ] == ["hello"]
    call = of_type(w, "tool_call")[0]
    assert call["tool"] == "search" and episode.contents[call["content_ref"]] == "q"


def test_rewards_land_on_events_and_keys_by_family_and_unit() -> None:
    s = Spans()

    def reward(t: float, value: Any, **attrs: Any) -> Any:
        return event(sc.EVENT_EVALUATION_RESULT, t, **{sc.GEN_AI_EVALUATION_SCORE_VALUE: value, **attrs})

    root = s.workflow("task", 0, 10)
    lead = s.agent(
        "lead",
        0.1,
        9.9,
        root,
        role="lead",
        events=[
            reward(9, 1.0),
            reward(9, 0.5, **{sc.ORCH_REWARD_UNIT: "agent", sc.ORCH_REWARD_TARGET: "helper"}),
            reward(9, 0.25, **{sc.ORCH_REWARD_UNIT: "role"}),
            reward(9, 0.2, **{sc.ORCH_REWARD_FAMILY: "verifier"}),
            reward(9, "n/a"),
        ],
    )
    s.agent("helper", 1, 2, lead)
    s.tool("search", 3, 4, lead).events.append(reward(3.5, -0.1, **{sc.ORCH_REWARD_UNIT: "tool"}))
    chat = s.chat(5, 6, lead)
    chat.events.append(reward(5.5, 0.3))
    episode = convert_episode(s.spans)
    w = checked(episode)
    r = w["rewards"]
    assert (r["team"], r["individual"], r["role"], r["verifier"], r["tool"], r["process"]) == (
        1.0,
        0.5,
        0.25,
        0.2,
        -0.1,
        0.3,
    )
    assert (r["agent:helper"], r["role:lead"], r["tool:search"]) == (0.5, 0.25, -0.1)
    assert r[f"turn:{chat.span_id}"] == 0.3
    assert w["metrics"]["rejected_rewards"] == 1 and w["metrics"]["rejected_rewards:not_a_number"] == 1
    returns = {e["agent"]: e for e in of_type(w, "return")}
    assert "reward" not in returns["lead"]  # team, role and verifier rewards are the team's and the role's
    assert returns["helper"]["reward"] == 0.5
    assert of_type(w, "tool_result")[0]["reward"] == -0.1
    # The one model call carries every channel: the helper made none, so its reward goes to the lead's turns.
    (turn,) = episode.turns
    assert turn.credit == pytest.approx(
        {"team": 1.0, "individual": 0.5, "role": 0.25, "verifier": 0.2, "tool": -0.1, "process": 0.3})
    assert turn.reward == pytest.approx(2.15)


def test_credit_strategies_split_the_team_reward() -> None:
    s = Spans()
    lead = s.agent(
        "lead",
        0,
        10,
        events=[event(sc.EVENT_EVALUATION_RESULT, 9, **{sc.GEN_AI_EVALUATION_SCORE_VALUE: 1.0})],
    )
    s.chat(0.5, 1, lead)
    s.agent("useful", 1, 2, lead)
    s.span("aggregate lead", 8, 8.5, lead, {sc.ORCH_OPERATION: sc.OPERATION_AGGREGATE})
    stray = s.agent("stray", 1, 9.95, lead)  # ends after the answer was aggregated
    assert stray
    uniform = checked(convert_episode(s.spans, credit="uniform"))
    n = len(uniform["events"])
    assert all(e["credit"] == pytest.approx(1 / n) for e in uniform["events"])

    episode = convert_episode(s.spans, credit="causal")
    causal = checked(episode)
    credited = {e["id"] for e in causal["events"] if e["credit"] > 0}
    assert sum(e["credit"] for e in causal["events"]) == pytest.approx(1.0)
    stray_return = ids(causal, "return", agent="stray")[0]
    assert stray_return not in credited and ids(causal, "return", agent="useful")[0] in credited
    r = causal["rewards"]
    # Agent totals follow the turns: only the lead made a model call.
    assert "credit:agent:stray" not in r and r["credit:agent:lead"] == pytest.approx(1.0)
    assert causal["metrics"]["agent_utilization"] == pytest.approx(2 / 3)
    assert episode.turns[0].reward == pytest.approx(1.0)  # the only model call carries the whole reward


def test_a_late_reward_recredits_and_replaces_earlier_credit() -> None:
    from orchestrace_collector.annotations import make_annotation

    s = Spans()
    lead = s.agent("lead", 0, 4)
    s.chat(0.5, 1, lead)
    s.tool("t", 1, 2, lead)
    episode = convert_episode(s.spans)
    assert all(e.credit is None for e in episode.trace.events)  # no team reward yet
    late = episode.trace.model_copy(deep=True)
    turns = make_annotation(late.trace_id, "team", 2.0, "replace", "uniform").apply(late, episode.turns)
    assert sum(e.credit or 0 for e in late.events) == pytest.approx(2.0)
    assert late.rewards["credit:agent:lead"] == pytest.approx(2.0)
    turns = make_annotation(late.trace_id, "team", 2.0, "replace", "causal").apply(late, turns)
    assert late.rewards["credit:agent:lead"] == pytest.approx(2.0)  # replaced, not added
    assert sum(e.credit or 0 for e in late.events) == pytest.approx(2.0)
    assert turns[0].reward == pytest.approx(2.0) and turns[0].credit == {"team": 2.0}
    turns = make_annotation(late.trace_id, "team", 0.5, "add", "causal").apply(late, turns)
    assert late.rewards["team"] == 2.5 and turns[0].credit == {"team": 2.5}
    with pytest.raises(ValueError, match="credit strategy"):
        make_annotation(late.trace_id, "team", 1.0, "replace", "shapley")
    with pytest.raises(ValueError, match="family"):
        make_annotation(late.trace_id, "bonus", 1.0, "replace", "causal")


def test_a_late_rewards_agent_credit_is_per_name_and_per_activation_in_the_turns() -> None:
    from orchestrace_collector.annotations import make_annotation

    s = Spans()
    lead = s.agent("lead", 0, 10)
    for start in (1, 4):
        writer = s.agent("writer", start, start + 2, lead)
        s.chat(start + 0.5, start + 1, writer)
    episode = convert_episode(s.spans)
    trace = episode.trace.model_copy(deep=True)
    make_annotation(trace.trace_id, "team", 1.0, "replace", "uniform").apply(trace, episode.turns)
    credit = {k: v for k, v in trace.rewards.items() if k.startswith("credit:agent:")}
    assert credit == pytest.approx({"credit:agent:writer": 1.0})  # keys name the policy
    turns = make_annotation(trace.trace_id, "team", 1.0, "replace", "uniform").apply(trace, episode.turns)
    assert [(t.agent, t.activation, t.reward) for t in turns] == [("writer", 1, 0.5), ("writer", 2, 0.5)]


def test_an_agent_named_with_a_hash_is_a_name_of_its_own() -> None:
    """``writer#2`` (one instance) beside two ``writer``s: two names, two credit keys; ``to`` names the
    agent, ``to_activation`` the instance."""
    from orchestrace_collector.annotations import make_annotation

    s = Spans()
    lead = s.agent("lead", 0, 10)
    for name, start in (("writer", 1), ("writer#2", 3), ("writer", 5)):
        writer = s.agent(name, start, start + 1.5, lead)
        s.chat(start + 0.5, start + 1, writer)
    episode = convert_episode(s.spans)
    w = checked(episode)
    spawned = [(e["to"], e["to_activation"]) for e in of_type(w, "spawn")]
    assert spawned == [("writer", 1), ("writer#2", 1), ("writer", 2)]
    assert {(e["agent"], e["activation"]) for e in of_type(w, "return")} == {("lead", 1), *spawned}
    trace = episode.trace.model_copy(deep=True)
    make_annotation(trace.trace_id, "team", 1.0, "replace", "uniform").apply(trace, episode.turns)
    credit = {k: v for k, v in trace.rewards.items() if k.startswith("credit:agent:")}
    assert credit == pytest.approx({"credit:agent:writer": 2 / 3, "credit:agent:writer#2": 1 / 3})


def test_metrics_and_costs() -> None:
    s = Spans()
    lead = s.agent(
        "lead",
        0,
        10,
        events=[
            event(sc.EVENT_MESSAGE, 1, **{sc.ORCH_TO: "lead", sc.ORCH_CONTENT_REF: "sha256:x"}),
            event(sc.EVENT_MESSAGE, 2, **{sc.ORCH_TO: "lead", sc.ORCH_CONTENT_REF: "sha256:x"}),
        ],
        **{sc.ORCH_TASK_SUCCESS: True},
    )
    s.tool("a", 2, 8, lead)
    s.tool("b", 2, 8, lead)  # in parallel: the lead's own 4 s + 2 x 6 s of tools, in 10 s
    w = checked(convert_episode(s.spans))
    m = w["metrics"]
    assert m["parallelism_efficiency"] == pytest.approx(1.6)
    assert m["message_redundancy"] == 0.5
    assert m["task_success"] == 1.0 and m["incomplete"] == 0
    # orchestration: 2 messages + 1 return; work: 2 calls + 2 results
    assert m["protocol_overhead"] == pytest.approx(3 / 7)
    assert m["critical_steps"] >= 4
    assert w["costs"] == {"tokens": 0, "wall_clock_s": 10, "tool_calls": 2, "messages": 2}


def test_critical_steps_counts_the_longest_chain() -> None:
    s = Spans()
    lead = s.agent("lead", 0, 10)
    s.tool("a", 1, 2, lead)
    w = checked(convert_episode(s.spans))
    assert w["metrics"]["critical_steps"] == 3  # call -> result -> return


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        ("declared", "debate"),
        ("flat", "centralized"),
        ("nested", "hierarchical"),
        ("handoff", "swarm"),
        ("hub_handoffs", "centralized"),
        ("pec", "planner_executor_critic"),
        ("debate", "debate"),
        ("nested_handoff", "mixed"),
        ("single", "unknown"),
    ],
)
def test_topology(build: str, expected: str) -> None:
    s = Spans()
    attrs = {sc.ORCH_TOPOLOGY: "debate"} if build == "declared" else {}
    root = s.agent("lead", 0, 100, **attrs)
    if build in ("flat", "declared"):
        s.agent("w", 1, 2, root)
    elif build in ("nested", "nested_handoff"):
        mid = s.agent("manager", 1, 10, root)
        s.agent("w", 2, 3, mid)
    if build in ("handoff", "nested_handoff", "hub_handoffs"):
        # Peers hand control to each other (swarm); or one hub hands work out and gets it back (centralized).
        second, back = ("b", "a") if build != "hub_handoffs" else ("a", "c")
        for k, (me, to) in enumerate((("a", "b"), (second, back))):
            s.agent(
                me,
                20 + 10 * k,
                30 + 10 * k,
                root,
                events=[event(
                    sc.EVENT_DELEGATE, 29 + 10 * k, **{sc.ORCH_TARGET_AGENT: to, sc.ORCH_HANDOFF: True},
                )],
            )
        s.agent(back, 40, 50, root)
    elif build == "pec":
        for k, role in enumerate(("planner", "executor", "critic")):
            s.agent(f"agent{k}", 1 + k, 2 + k, root, role=role)
    elif build == "debate":
        for k, (me, other) in enumerate((("pro", "con"), ("con", "pro"))):
            s.agent(
                me,
                1,
                10,
                root,
                events=[event(sc.EVENT_MESSAGE, 2 + r + k / 2, **{sc.ORCH_TO: other}) for r in range(2)],
            )
        s.span("aggregate lead", 11, 12, root, {sc.ORCH_OPERATION: sc.OPERATION_AGGREGATE})
    elif build == "single":
        s.tool("t", 1, 2, root)
    assert checked(convert_episode(s.spans))["topology"] == expected


def test_task_attributes_and_explicit_task_id() -> None:
    s = Spans()
    s.workflow("task", 0, 1, **{sc.ORCH_TASK_ID: "from-span", sc.ORCH_SYSTEM: "my-system"})
    w = checked(convert_episode(s.spans))
    assert (w["task_id"], w["system"], w["trace_id"]) == ("from-span", "my-system", s.trace_id)
    assert checked(convert_episode(s.spans, task_id="given"))["task_id"] == "given"


def test_models_are_built_with_every_field_of_the_output_models() -> None:
    from orchestrace_collector.model import Edge, Event, Turn

    s = Spans()
    agent = s.agent("lead", 0, 2)
    s.chat(0.5, 1, agent)
    s.tool("t", 1, 1.5, agent)
    episode = convert_episode(s.spans)
    assert all(list(vars(e)) == list(Event.model_fields) for e in episode.trace.events)
    assert all(list(vars(e)) == list(Edge.model_fields) for e in episode.trace.edges)
    assert all(list(vars(t)) == list(Turn.model_fields) for t in episode.turns)
    assert episode.trace.model_dump()["events"][0]["id"] == "e1"


def test_a_routing_decision_followed_by_spawns_is_their_one_decision() -> None:
    s = Spans()
    graph = s.workflow("graph", 0, 10)
    route = event(sc.EVENT_DECISION, 1.8, **{sc.ORCH_DECISION_KIND: "spawn", sc.ORCH_TARGET_AGENT: "work"})
    sends = [
        event(sc.EVENT_SPAWN, 1.9, **{sc.ORCH_TARGET_AGENT: "work", sc.ORCH_CONTENT_REF: f"sha256:{k}"})
        for k in range(2)
    ]
    s.node("plan", 1, 2, graph, events=[route, *sends])
    s.node("work", 2, 3, graph)
    s.node("work", 2, 3.5, graph)
    w = checked(convert_episode(s.spans))
    plan_decisions = [e for e in of_type(w, "orchestrator_decision") if e["agent"] == "plan"]
    assert len(plan_decisions) == 1 and plan_decisions[0]["to"] == "work"
    spawns = [e for e in of_type(w, "spawn") if e["agent"] == "plan"]
    assert [(e["to"], e["to_activation"], e["content_ref"]) for e in spawns] == [
        ("work", 1, "sha256:0"), ("work", 2, "sha256:1")]
    assert {(plan_decisions[0]["id"], e["id"]) for e in spawns} <= edges_of(w, "spawn")


def test_a_single_routed_spawn_keeps_the_instance_label_on_its_decision() -> None:
    s = Spans()
    lead = s.agent(
        "lead",
        0,
        10,
        events=[
            event(sc.EVENT_DECISION, 1, **{sc.ORCH_DECISION_KIND: "delegate", sc.ORCH_TARGET_AGENT: "w"}),
            event(sc.EVENT_DELEGATE, 1.5, **{sc.ORCH_TARGET_AGENT: "w"}),
        ],
    )
    s.agent("w", 2, 3, lead)
    s.agent("w", 4, 5, lead)
    w = checked(convert_episode(s.spans))
    decisions = of_type(w, "orchestrator_decision")
    assert [(d["t"], d["to"], d["to_activation"]) for d in decisions] == [(1, "w", 1), (4, "w", 2)]


def test_create_agent_span_is_an_explicit_spawn_of_that_agent() -> None:
    s = Spans()
    lead = s.agent("lead", 0, 10)
    s.span(
        "create_agent helper",
        1,
        1.2,
        lead,
        {sc.GEN_AI_OPERATION_NAME: sc.OP_CREATE_AGENT, sc.GEN_AI_AGENT_NAME: "helper"},
    )
    s.agent("helper", 2, 3, lead)
    w = checked(convert_episode(s.spans))
    decision, spawn = of_type(w, "orchestrator_decision")[0], of_type(w, "spawn")[0]
    assert (decision["decision"], decision["t"], spawn["to"]) == ("spawn", 1, "helper")
    assert [d["to"] for d in of_type(w, "despawn")] == ["helper"]


def test_message_to_an_unknown_agent_keeps_its_name_and_has_no_edge() -> None:
    s = Spans()
    s.agent("lead", 0, 2, events=[event(sc.EVENT_MESSAGE, 1, **{sc.ORCH_TO: "outside"})])
    w = checked(convert_episode(s.spans))
    assert of_type(w, "message")[0]["to"] == "outside" and not edges_of(w, "message")


def test_tools_without_any_actor_belong_to_the_service() -> None:
    s = Spans(resource={"service.name": "billing-bot"})
    s.tool("charge", 0, 1)
    s.tool("refund", 2, 3)
    w = checked(convert_episode(s.spans))
    assert {e["agent"] for e in of_type(w, "tool_call")} == {"billing-bot"}
    assert w["system"] == "billing-bot" and w["topology"] == "unknown"


def test_embeddings_and_retrieval_are_no_turns() -> None:
    # A model used without generating: not a sample for the agent's policy, though it names a model and
    # reports usage (which made it a model-like call).
    s = Spans()
    agent = s.agent("rag", 0, 10)
    usage = {sc.GEN_AI_REQUEST_MODEL: "e-1", sc.GEN_AI_USAGE_INPUT_TOKENS: 50}
    for start, op in ((1, "embeddings"), (2, "retrieval")):
        s.span(f"{op} e-1", start, start + 1, agent, attrs={sc.GEN_AI_OPERATION_NAME: op, **usage})
    # OpenLLMetry's older embedding spans: no operation name, a request type.
    embed = s.span("openai.embeddings", 3, 4, agent, attrs={"llm.request.type": "embedding", **usage})
    # The same call told again by a second instrumentation inside the first: counted once.
    s.span("embeddings e-1", 3.1, 3.9, embed, attrs={sc.GEN_AI_OPERATION_NAME: "embeddings", **usage})
    # Langfuse's embedding observation, usage as a JSON object.
    s.span("embed", 4, 5, agent, attrs={"langfuse.observation.type": "embedding",
                                        "langfuse.observation.usage_details": '{"input": 20}'})
    s.chat(5, 6, agent)
    episode = convert_episode(s.spans)
    w = checked(episode)
    assert [(t.model, t.input_tokens, t.output_tokens) for t in episode.turns] == [("fake-model", 10, 5)]
    assert w["costs"]["tokens"] == 15
    assert w["costs"]["embedding_tokens"] == 3 * 50 + 20


@pytest.mark.parametrize("key", ["messaging.operation", "messaging.operation.type", "messaging.system"])
def test_a_root_messaging_span_belongs_to_the_service(key: str) -> None:
    # A runtime's delivery of one message, named after a topic made for the run: no orchestrator name.
    s = Spans(resource={"service.name": "team-app"})
    root = s.span("process writer_topic_3f2a", 0, 4, attrs={key: "process"})
    s.agent("writer", 1, 3, root)
    w = checked(convert_episode(s.spans))
    assert [(e["agent"], e["to"]) for e in of_type(w, "spawn")] == [("team-app", "writer")]
    assert {e["agent"] for e in w["events"]} == {"team-app", "writer"}


def test_messaging_spans_alone_are_the_services_run() -> None:
    # A runtime's acknowledgement in a trace of its own (no agent in it): written, not dropped for lack of
    # an event, closed by the service's stand-in.
    s = Spans(resource={"service.name": "team-app"})
    root = s.span("ack topic_3f2a", 0, 2, attrs={"messaging.operation": "ack"})
    s.span("publish topic_3f2a", 1, 2, root, attrs={"messaging.operation": "publish"})
    w = checked(convert_episode(s.spans))
    assert [(e["type"], e["agent"]) for e in w["events"]] == [("return", "team-app")]


def test_system_instructions_and_older_flattened_prompts_become_chat_lists() -> None:
    s = Spans()
    agent = s.agent("a", 0, 5)
    s.chat(
        1,
        2,
        agent,
        **{
            sc.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": "Be terse."}]),
            sc.GEN_AI_INPUT_MESSAGES: json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
            ),
        },
    )
    s.chat(
        3,
        4,
        agent,
        **{
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "old",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "style",
        },
    )
    first, second = convert_episode(s.spans).turns
    assert [(m.role, m.content) for m in first.prompt or []] == [("system", "Be terse."), ("user", "hi")]
    assert first.completion is None
    assert [(m.role, m.content) for m in second.prompt or []] == [("user", "old")]
    assert [(m.role, m.content) for m in second.completion or []] == [("assistant", "style")]


def _react_agent(s: Spans, name: str, start: float, parent: Any, *, tools: int = 2) -> Any:
    """A prebuilt ReAct agent as the LangGraph integration records it: ``invoke_agent`` around its graph run,
    a ``model`` node that routes its tool calls to ``tools`` nodes (Send), and a last ``model`` node whose
    conditional edge ends the inner graph."""
    agent = s.agent(name, start, start + 10, parent)
    graph = s.workflow(name, start + 0.1, start + 9.9, agent)
    sends = [event(sc.EVENT_SPAWN, start + 1.5, **{sc.ORCH_TARGET_AGENT: "tools"}) for _ in range(tools)]
    first = s.node(
        "model", start + 1, start + 2, graph,
        events=[
            event(sc.EVENT_DECISION, start + 1.5, **{
                sc.ORCH_DECISION_KIND: sc.DECISION_SPAWN, sc.ORCH_TARGET_AGENT: "tools",
                sc.ORCH_DECISION_OPTIONS: ("tools",),
            }),
            *sends,
        ],
    )
    s.chat(start + 1.1, start + 1.4, first)
    for k in range(tools):
        node = s.node(
            "tools", start + 3, start + 4 + k, graph,
            events=[event(sc.EVENT_DECISION, start + 4 + k, **{
                sc.ORCH_DECISION_KIND: sc.DECISION_DELEGATE, sc.ORCH_TARGET_AGENT: "model",
            })],
        )
        s.tool("lookup", start + 3.1, start + 3.5 + k, node)
    last = s.node(
        "model", start + 7, start + 9, graph,
        events=[event(sc.EVENT_STOP, start + 8.5, **{sc.ORCH_REASON: "edge", sc.ORCH_FROM: "model"})],
    )
    s.chat(start + 7.1, start + 8, last)
    return last


def test_graph_nodes_inside_an_agent_are_its_inner_working_not_actors() -> None:
    s = Spans()
    team = s.workflow("team", 0, 40)
    boss = s.agent("boss", 1, 12, team, events=[
        event(sc.EVENT_DELEGATE, 11, **{sc.ORCH_TARGET_AGENT: "worker", sc.ORCH_HANDOFF: True}),
    ])
    s.chat(2, 3, boss)
    last = _react_agent(s, "worker", 12, team)
    # Explicit calls from inside an inner node are kept, and attributed to the agent.
    last.events += [
        event(sc.EVENT_STOP, 20.6, **{sc.ORCH_REASON: "done"}),
        event(sc.EVENT_MESSAGE, 20.7, **{sc.ORCH_TO: "boss"}),
        event(sc.EVENT_SAFETY, 20.8, **{sc.ORCH_SAFETY_CATEGORY: "pii"}),
        event(sc.EVENT_DECISION, 20.9, **{sc.ORCH_DECISION_KIND: "escalate", sc.ORCH_TARGET_AGENT: "boss"}),
    ]
    w = checked(convert_episode(s.spans))
    episode = convert_episode(s.spans)

    assert {e["agent"] for e in w["events"]} == {"team", "boss", "worker", "lookup"}
    assert [(e["agent"], e["to"]) for e in of_type(w, "spawn")] == [("team", "boss"), ("boss", "worker")]
    assert [e["agent"] for e in of_type(w, "tool_call")] == ["worker", "worker"]
    assert [e["agent"] for e in of_type(w, "return")] == ["boss", "worker", "team"]
    decisions = [(e["agent"], e.get("decision") or e.get("label"), e.get("to"), e.get("reason"))
                 for e in of_type(w, "orchestrator_decision")]
    assert decisions == [
        ("team", "delegate", "boss", None),
        ("boss", "delegate", "worker", None),
        ("worker", "stop", None, "done"),  # the user's stop; the inner graph's END is not one
        ("worker", "escalate", "boss", None),
    ]
    assert [(e["agent"], e["to"]) for e in of_type(w, "message")] == [("worker", "boss")]
    assert [e["agent"] for e in of_type(w, "safety_event")] == ["worker"]
    assert not of_type(w, "despawn") and not of_type(w, "aggregate")
    assert [t.agent for t in episode.turns] == ["boss", "worker", "worker"]
    assert w["topology"] == "centralized"  # handoffs from one agent only: a hub, not a swarm


def test_nodes_of_a_graph_that_is_not_an_agent_stay_actors() -> None:
    s = Spans()
    graph = s.workflow("map_reduce", 0, 10)
    plan = s.node("plan", 1, 2, graph, events=[
        event(sc.EVENT_DECISION, 1.9, **{
            sc.ORCH_DECISION_KIND: sc.DECISION_SPAWN, sc.ORCH_TARGET_AGENT: "work",
        }),
        *[event(sc.EVENT_SPAWN, 1.9, **{sc.ORCH_TARGET_AGENT: "work"}) for _ in range(2)],
    ])
    s.chat(1.1, 1.5, plan)
    for k in range(2):
        s.chat(3.1, 3.5, s.node("work", 3, 4 + k, graph))
    w = checked(convert_episode(s.spans))
    assert [(e["agent"], e["to"], e["to_activation"]) for e in of_type(w, "spawn")] == [
        ("map_reduce", "plan", 1), ("plan", "work", 1), ("plan", "work", 2),
    ]
    assert [(e["agent"], e["activation"]) for e in of_type(w, "return")] == [
        ("plan", 1), ("work", 1), ("work", 2), ("map_reduce", 1),
    ]


def test_a_team_subgraph_inside_an_agent_belongs_to_it_and_its_agents_stay_agents() -> None:
    s = Spans()
    top = s.workflow("top", 0, 50)
    s.chat(0.2, 0.8, s.node("top_supervisor", 0.1, 0.9, top))
    team = s.agent("team", 1, 40, top)
    graph = s.workflow("team_graph", 1.1, 39, team)
    sup = s.node("team_supervisor", 2, 3, graph, events=[
        event(sc.EVENT_DECISION, 2.9, **{
            sc.ORCH_DECISION_KIND: sc.DECISION_DELEGATE, sc.ORCH_TARGET_AGENT: "searcher",
        }),
    ])
    s.chat(2.1, 2.5, sup)
    _react_agent(s, "searcher", 4, graph, tools=1)
    s.node("team_supervisor", 20, 21, graph, events=[
        event(sc.EVENT_STOP, 20.9, **{sc.ORCH_REASON: "conditional_edge", sc.ORCH_FROM: "team_supervisor"}),
    ])
    w = checked(convert_episode(s.spans))
    assert {e["agent"] for e in w["events"]} == {"top", "top_supervisor", "team", "searcher", "lookup"}
    decisions = [(e["agent"], e["to"]) for e in of_type(w, "orchestrator_decision")]
    # The subgraph's routing is the team's: its one decision, which the delegation carries out.
    assert decisions == [("top", "top_supervisor"), ("top", "team"), ("team", "searcher")]
    (chose,) = [e for e in of_type(w, "orchestrator_decision") if e["to"] == "searcher"]
    (spawn,) = [e for e in of_type(w, "spawn") if e["to"] == "searcher"]
    assert (chose["id"], spawn["id"]) in edges_of(w, "spawn")
    assert [e["agent"] for e in of_type(w, "return")] == ["top_supervisor", "searcher", "team", "top"]
    assert w["topology"] == "hierarchical"


def test_flattened_tool_calls_and_tool_messages_are_kept() -> None:
    s = Spans()
    root = s.agent("solver", 0, 5)
    oi = "llm.input_messages."
    gp = "gen_ai.prompt."
    s.chat(1, 2, root, **{
        f"{oi}0.message.role": "assistant",
        f"{oi}0.message.tool_calls.0.tool_call.id": "call_1",
        f"{oi}0.message.tool_calls.0.tool_call.function.name": "add",
        f"{oi}0.message.tool_calls.0.tool_call.function.arguments": '{"a": 2}',
        f"{oi}0.message.tool_calls.1.tool_call.function.name": "echo",
        f"{oi}0.message.tool_calls.1.tool_call.function.arguments": "not json",
        f"{oi}1.message.role": "tool",
        f"{oi}1.message.content": "4",
        f"{oi}1.message.tool_call_id": "call_1",
        f"{oi}1.message.name": "add",
    })
    s.chat(3, 4, root, **{
        f"{gp}0.role": "assistant",
        f"{gp}0.tool_calls.0.id": "call_2",
        f"{gp}0.tool_calls.0.name": "mul",
        f"{gp}0.tool_calls.0.arguments": '{"b": 3}',
        f"{gp}1.role": "tool",
        f"{gp}1.content": "9",
        f"{gp}1.tool_call_id": "call_2",
    })
    t1, t2 = convert_episode(s.spans).turns
    assert [m.model_dump(exclude_none=True) for m in t1.prompt or []] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"a": 2}}},
                {"type": "function", "function": {"name": "echo", "arguments": "not json"}},
            ],
        },
        {"role": "tool", "content": "4", "tool_call_id": "call_1", "name": "add"},
    ]
    assert [m.model_dump(exclude_none=True) for m in t2.prompt or []] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": "mul", "arguments": {"b": 3}}},
            ],
        },
        {"role": "tool", "content": "9", "tool_call_id": "call_2"},
    ]


def test_plain_openai_and_langchain_tool_calls_are_kept() -> None:
    s = Spans()
    root = s.agent("solver", 0, 5)
    messages = [
        {"role": "assistant", "content": None,
         "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
         ]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "name": "g", "args": {"y": 2}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "f"},
    ]
    s.chat(1, 2, root, **{sc.GEN_AI_INPUT_MESSAGES: json.dumps(messages)})
    (turn,) = convert_episode(s.spans).turns
    assert [m.model_dump(exclude_none=True) for m in turn.prompt or []] == [
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "f"},
    ]


def test_tool_call_and_tool_result_content_parts_are_kept() -> None:
    """Tool calls and answers as parts of a plain message's content: Anthropic's ``tool_use`` /
    ``tool_result`` (answers sent in a ``user`` message beside text) and the AI SDK's ``tool-call`` /
    ``tool-result`` (``output`` as ``{"type", "value"}``; older releases ``args`` / ``result``)."""
    s = Spans()
    root = s.agent("solver", 0, 5)
    messages = [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "a1", "name": "f", "input": {"x": 1}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a1", "content": [{"type": "text", "text": "one"}]},
            {"type": "text", "text": "Go on."},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "v1", "toolName": "g", "input": {"y": 2}},
            {"type": "tool-call", "toolCallId": "v2", "toolName": "h", "args": '{"z": 3}'},
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "v1", "toolName": "g",
             "output": {"type": "json", "value": {"r": 2}}},
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "v2", "toolName": "h", "result": "three"},
        ]},
        {"role": "user", "content": [{"type": [], "text": "unhashable type"}, {"type": "tool_result"}]},
    ]
    s.chat(1, 2, root, **{sc.GEN_AI_INPUT_MESSAGES: json.dumps(messages)})
    (turn,) = convert_episode(s.spans).turns
    assert [m.model_dump(exclude_none=True) for m in turn.prompt or []] == [
        {"role": "assistant", "content": "Checking.",
         "tool_calls": [{"id": "a1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "tool", "content": "one", "tool_call_id": "a1"},
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "v1", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}},
            {"id": "v2", "type": "function", "function": {"name": "h", "arguments": {"z": 3}}},
        ]},
        {"role": "tool", "content": '{"r": 2}', "tool_call_id": "v1", "name": "g"},
        {"role": "tool", "content": "three", "tool_call_id": "v2", "name": "h"},
        {"role": "tool", "content": ""},
        {"role": "user", "content": ""},
    ]


def test_spans_that_ended_in_error_mark_their_closing_event() -> None:
    s = Spans()
    root = s.agent("lead", 0, 10)
    worker = s.agent("worker", 1, 5, root, **{sc.ERROR_TYPE: "TimeoutError"})
    worker.status_code = STATUS_ERROR
    failed = s.tool("fetch", 2, 3, worker)
    failed.status_code = STATUS_ERROR
    failed.events.append(event(sc.EVENT_EXCEPTION, 2.9, **{sc.EXCEPTION_TYPE: "ValueError"}))
    s.tool("fetch", 6, 7, root)  # fine: no error fields
    w = checked(convert_episode(s.spans))
    results = of_type(w, "tool_result")
    assert (results[0].get("error"), results[0].get("error_type")) == (True, "ValueError")
    assert "error" not in results[1] and "error_type" not in results[1]
    returns = {e["agent"]: e for e in of_type(w, "return")}
    assert (returns["worker"].get("error"), returns["worker"].get("error_type")) == (True, "TimeoutError")
    assert "error" not in returns["lead"]


def test_a_failed_model_call_marks_its_turn() -> None:
    s = Spans()
    root = s.agent("solver", 0, 10)
    failed = s.chat(1, 2, root, **{sc.ERROR_TYPE: "RateLimitError"})
    failed.status_code = STATUS_ERROR
    s.chat(3, 4, root)
    episode = convert_episode(s.spans)
    checked(episode)
    first, second = (t.model_dump(exclude_none=True) for t in episode.turns)
    assert (first.get("error"), first.get("error_type")) == (True, "RateLimitError")
    assert "error" not in second and "error_type" not in second


def test_the_outer_graphs_routing_on_an_agents_own_span_is_kept() -> None:
    s = Spans()
    team = s.workflow("team", 0, 40)
    _react_agent(s, "worker", 1, team)
    worker = next(span for span in s.spans if span.name == "invoke_agent worker")
    # The team graph routes from its worker node to its own node named like one of the worker's inner nodes.
    worker.events.append(event(sc.EVENT_DECISION, 10.5, **{
        sc.ORCH_DECISION_KIND: sc.DECISION_DELEGATE, sc.ORCH_TARGET_AGENT: "model",
    }))
    worker.events.append(event(sc.EVENT_STOP, 10.6, **{sc.ORCH_FROM: "worker"}))
    s.node("model", 12, 13, team)
    w = checked(convert_episode(s.spans))
    decisions = [(e["agent"], e.get("decision"), e.get("to")) for e in of_type(w, "orchestrator_decision")]
    assert ("worker", "delegate", "model") in decisions and ("worker", "stop", None) in decisions


def _batch_edges(second_call_start: float) -> tuple[list[str], set[tuple[str, str, str]]]:
    """A child's first model call asks for tools a (runs 2-3) and b (starts at ``second_call_start``)."""
    s = Spans()
    agent = s.agent("solver", 0.5, 10, s.agent("lead", 0, 11))
    s.chat(1, 2, agent)
    s.tool("a", 2, 3, agent, **{sc.ORCH_TOOL_TRUSTED: True})
    s.tool("b", second_call_start, second_call_start + 1, agent, **{sc.ORCH_TOOL_TRUSTED: True})
    s.chat(6, 7, agent)
    s.tool("c", 7, 8, agent, **{sc.ORCH_TOOL_TRUSTED: True})
    w = checked(convert_episode(s.spans))
    name = {e["id"]: f"{e['type']}:{e.get('tool') or e['agent']}" for e in w["events"]}
    return [name[e["id"]] for e in w["events"]], {
        (name[e["src"]], name[e["dst"]], e["type"]) for e in w["edges"]
    }


def test_parallel_calls_of_one_model_call_give_the_same_edges_however_their_threads_raced() -> None:
    overlapping_order, overlapping = _batch_edges(2.5)  # b starts before a returns
    serial_order, serial = _batch_edges(4)  # b's thread was scheduled after a had returned
    assert overlapping_order != serial_order  # the events are in time order ...
    assert overlapping == serial  # ... but no edge follows the race inside the batch
    assert ("tool_result:a", "tool_call:b", "tool_dependency") not in serial
    # the solver opens with the batch: its spawn starts each call, whichever came first
    assert {("spawn:lead", "tool_call:a", "causal"), ("spawn:lead", "tool_call:b", "causal")} <= serial
    # the next model call read both results: its tool depends on each, whichever came last
    assert {
        ("tool_result:a", "tool_call:c", "tool_dependency"),
        ("tool_result:b", "tool_call:c", "tool_dependency"),
    } <= serial


def _fan_out_trace(first: str, second: str, late_start: float, second_step: int = 2) -> dict[str, Any]:
    """A lead's model call, then two fan-outs: x and y (x starts first), then ``first`` and ``second`` (the
    latter starting at ``late_start``: while the former runs, or after it returned), then a model call."""
    s = Spans()
    lead = s.agent("lead", 0, 20)
    s.chat(0.2, 0.5, lead, tokens=(10, 5))
    message = event(sc.EVENT_MESSAGE, 3, **{sc.ORCH_TO: "lead", sc.ORCH_CONTENT_REF: "sha256:m"})
    s.agent("x", 1, 4, lead, events=[message])
    s.agent("y", 1.5, 4.5, lead)
    s.agent(first, 5, 6, lead, **{sc.LANGGRAPH_STEP: 2})
    s.agent(second, late_start, late_start + 1, lead, **{sc.LANGGRAPH_STEP: second_step})
    s.chat(10, 11, lead, tokens=(3, 4))
    return checked(convert_episode(s.spans))


def _named_edges(w: dict[str, Any]) -> set[tuple[str, str, str]]:
    """Edges between events named ``type:tool-or-agent>to`` (the same in any run, whatever the ids)."""
    name = {e["id"]: f"{e['type']}:{e.get('tool') or e['agent']}>{e.get('to')}" for e in w["events"]}
    return {(name[e["src"]], name[e["dst"]], e["type"]) for e in w["edges"]}


@pytest.mark.parametrize("late_start", [5.5, 6.5])  # overlapping, or the same LangGraph step run one by one
def test_agents_started_at_once_give_the_same_trace_whichever_started_first(late_start: float) -> None:
    c_first = _fan_out_trace("c", "d", late_start)
    d_first = _fan_out_trace("d", "c", late_start)
    order = [(e["type"], e.get("to")) for e in c_first["events"]]
    assert order != [(e["type"], e.get("to")) for e in d_first["events"]]  # the events are in time order ...
    edges = _named_edges(c_first)
    assert edges == _named_edges(d_first)  # ... but no edge follows the race inside a fan-out
    assert not {edge for edge in edges if {edge[0], edge[1]} <= {"spawn:lead>c", "spawn:lead>d",
                                                                   "orchestrator_decision:lead>c",
                                                                   "orchestrator_decision:lead>d"}
                and edge[2] == "temporal"}
    # each child of the first fan-out returns (and a message arrives) into each start of the second, ...
    for start in ("c", "d"):
        for child in ("x", "y"):
            assert (f"return:{child}>lead", f"orchestrator_decision:lead>{start}", "return") in edges
        assert ("message:x>lead", f"orchestrator_decision:lead>{start}", "message") in edges
    # ... whose starts each follow the first fan-out's starts and lead to the lead's return (a join)
    for start in ("c", "d"):
        assert ("spawn:lead>x", f"orchestrator_decision:lead>{start}", "temporal") in edges
        assert (f"spawn:lead>{start}", "return:lead>None", "temporal") in edges
    assert ("spawn:lead>x", "orchestrator_decision:lead>y", "temporal") not in edges
    # the first model call's tokens count on the first start by target, not on the first to start
    for w in (c_first, d_first):
        holders = {(e["type"], e.get("to")): e["tokens"] for e in w["events"] if e.get("tokens")}
        assert holders == {("orchestrator_decision", "x"): 15, ("return", None): 7}


def test_agents_started_one_after_another_are_no_fan_out() -> None:
    edges = _named_edges(_fan_out_trace("c", "d", 7, second_step=3))  # d starts after c returned
    assert ("spawn:lead>c", "orchestrator_decision:lead>d", "temporal") in edges
    assert ("return:c>lead", "orchestrator_decision:lead>d", "return") in edges
    assert ("spawn:lead>x", "orchestrator_decision:lead>d", "temporal") not in edges


@pytest.mark.parametrize("b_first", [False, True])
def test_agents_called_as_tools_follow_their_own_tool_call(b_first: bool) -> None:
    """An agent run inside a tool call (an agent used as a tool, e.g. the OpenAI Agents SDK's ``as_tool``):
    its start follows that call, not whichever of the batch's calls came first."""
    s = Spans()
    editor = s.agent("editor", 0, 20)
    s.chat(0.5, 1, editor)
    starts = {"a": 1.2 if b_first else 1.1, "b": 1.1 if b_first else 1.2}
    for x in "ab":
        call = s.tool(f"ask_{x}", starts[x], 9, editor)
        s.agent(f"expert_{x}", starts[x] + 0.5, 8, call)  # after both calls started, as in a batch
    s.chat(10, 11, editor)
    edges = _named_edges(checked(convert_episode(s.spans)))
    into = {x: {(src, kind) for src, dst, kind in edges if dst == f"orchestrator_decision:editor>expert_{x}"}
            for x in "ab"}
    assert into == {x: {(f"tool_call:ask_{x}>None", "causal")} for x in "ab"}


def test_without_model_calls_only_overlapping_calls_are_a_batch() -> None:
    s = Spans()
    lead = s.agent("lead", 0, 10)
    s.tool("a", 1, 3, lead)
    s.tool("b", 2, 4, lead)  # overlaps a: one batch
    s.tool("c", 5, 6, lead)  # after both returned: depends on what came before it
    w = checked(convert_episode(s.spans))
    name = {e["id"]: f"{e['type']}:{e.get('tool') or e['agent']}" for e in w["events"]}
    edges = {(name[e["src"]], name[e["dst"]], e["type"]) for e in w["edges"]}
    assert ("tool_call:a", "tool_call:b", "temporal") not in edges
    assert ("tool_result:b", "tool_call:c", "tool_dependency") in edges
    assert ("tool_result:a", "tool_call:c", "tool_dependency") in edges


@pytest.mark.parametrize("late_start", [2.5, 4])  # overlapping, or scheduled after the first ended
def test_a_model_calls_tokens_count_on_the_same_one_of_its_parallel_calls_whichever_started_first(
    late_start: float,
) -> None:
    s = Spans()
    agent = s.agent("solver", 0, 10)
    s.chat(1, 2, agent, tokens=(10, 5))
    s.tool("zeta", 2, 3, agent)  # started first, but "alpha" comes first by name
    s.tool("alpha", late_start, late_start + 1, agent)
    s.chat(6, 7, agent, tokens=(3, 4))
    w = checked(convert_episode(s.spans))
    tokens = {e.get("tool") or e["type"]: e.get("tokens") for e in w["events"] if e["type"] == "tool_call"}
    assert tokens == {"alpha": 15, "zeta": None}
    assert sum(e.get("tokens", 0) for e in w["events"]) == 15 + 7 == w["costs"]["tokens"]


@pytest.mark.parametrize("backward", [False, True])
def test_the_causal_path_is_the_same_whatever_order_the_edges_come_in(backward: bool) -> None:
    from orchestrace_collector.convert.credit import causal_path

    types = ["orchestrator_decision", "spawn", "return", "aggregate", "message", "message"]
    decisions = ["spawn", None, None, None, None, None]
    # The answer is the aggregate (3): it depends on its named input (4) and what led to that (0), not on
    # the child's return into it (2), nor on what only led to that return (1).
    edges = [(0, 1, "spawn"), (0, 4, "causal"), (1, 2, "causal"), (2, 3, "return"), (4, 3, "aggregate")]
    expected = {0, 3, 4}
    if backward:  # an edge to an earlier event (not what build_edges makes, but a written trace may hold it)
        edges.append((5, 4, "message"))
        expected.add(5)
    for order in (sorted(edges), sorted(edges, reverse=True), edges[::2] + edges[1::2]):
        assert causal_path(order, types, decisions) == expected


def _model_like(s: Spans, start: float, end: float, parent: Any = None, tokens: tuple[int, int] = (6, 2),
                name: str = "call_llm") -> Any:
    """A model call as an instrumentation that sets no operation name records it (ADK's ``call_llm``)."""
    return s.span(name, start, end, parent, {sc.GEN_AI_REQUEST_MODEL: "m-1", sc.GEN_AI_SYSTEM: "vendor",
                                             sc.GEN_AI_USAGE_INPUT_TOKENS: tokens[0],
                                             sc.GEN_AI_USAGE_OUTPUT_TOKENS: tokens[1]})


def _turns(episode: Any) -> list[tuple[str, str | None, int | None, int | None]]:
    return [(t.agent, t.model, t.input_tokens, t.output_tokens) for t in episode.turns]


def test_a_span_naming_a_model_and_its_usage_is_a_model_call() -> None:
    s = Spans()
    lead = s.agent("lead", 0, 10)
    _model_like(s, 1, 2, lead)
    s.tool("search", 3, 4, lead)
    episode = convert_episode(s.spans)
    trace = checked(episode)
    assert _turns(episode) == [("lead", "m-1", 6, 2)]
    assert trace["costs"]["tokens"] == 8


def test_a_model_like_wrapper_counts_the_call_inside_it_once() -> None:
    """ADK's ``call_llm`` around a ``generate_content`` span (both with usage); a chat span around an HTTP
    span with the model and usage: one turn each time, the inner one's in the first, the chat's in the
    second."""
    s = Spans()
    lead = s.agent("lead", 0, 10)
    wrapper = _model_like(s, 1, 3, lead, tokens=(100, 100))
    s.span("generate_content m-1", 1.1, 2.9, wrapper,
           {sc.GEN_AI_OPERATION_NAME: sc.OP_GENERATE_CONTENT, sc.GEN_AI_REQUEST_MODEL: "m-1",
            sc.GEN_AI_USAGE_INPUT_TOKENS: 6, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 2})
    chat = s.chat(4, 6, lead)
    _model_like(s, 4.1, 5.9, chat, tokens=(100, 100), name="POST /v1/chat")
    episode = convert_episode(s.spans)
    checked(episode)
    assert _turns(episode) == [("lead", "m-1", 6, 2), ("lead", "fake-model", 10, 5)]


def test_model_like_spans_alone_are_the_services_samples_and_around_an_agent_a_run() -> None:
    s = Spans()
    _model_like(s, 1, 2)
    episode = convert_episode(s.spans)
    trace = checked(episode)
    assert [(e["type"], e["agent"]) for e in trace["events"]] == [("return", "test-app")]
    assert _turns(episode) == [("test-app", "m-1", 6, 2)]

    s = Spans()
    run = _model_like(s, 0, 10, name="pipeline")  # reports the total of what ran inside it
    worker = s.agent("worker", 1, 9, run)
    s.chat(2, 3, worker)
    episode = convert_episode(s.spans)
    trace = checked(episode)
    assert [(e["type"], e["agent"]) for e in of_type(trace, "return")] == [("return", "worker"),
                                                                          ("return", "pipeline")]
    assert _turns(episode) == [("worker", "fake-model", 10, 5)]


def test_messages_recorded_on_span_events_become_chat_lists() -> None:
    """The GenAI details event, and the older prompt and completion events, carry the messages instead of the
    span's attributes: the turn has them, and the refs of that content."""
    s = Spans()
    agent = s.agent("a", 0, 5)
    details = event("gen_ai.client.inference.operation.details", 1.9, **{
        sc.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps([{"type": "text", "content": "Be terse."}]),
        sc.GEN_AI_INPUT_MESSAGES: json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
        ),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}], "finish_reason": "stop"}]
        ),
    })
    s.span("chat m", 1, 2, agent, {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}, events=[details])
    older = [
        event("gen_ai.content.prompt", 3.1,
              **{"gen_ai.prompt": json.dumps([{"role": "user", "content": "old"}])}),
        event("gen_ai.content.completion", 3.9,
              **{"gen_ai.completion": json.dumps([{"role": "assistant", "content": "style"}])}),
    ]
    s.span("chat m", 3, 4, agent, {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT}, events=older)
    episode = convert_episode(s.spans)
    checked(episode)
    first, second = episode.turns
    assert [(m.role, m.content) for m in first.prompt or []] == [("system", "Be terse."), ("user", "hi")]
    assert [(m.role, m.content) for m in first.completion or []] == [("assistant", "hello")]
    assert [(m.role, m.content) for m in second.prompt or []] == [("user", "old")]
    assert [(m.role, m.content) for m in second.completion or []] == [("assistant", "style")]
    assert first.input_ref and first.output_ref and second.input_ref and second.output_ref
    assert len({first.input_ref, first.output_ref, second.input_ref, second.output_ref}) == 4


def test_a_tool_call_told_twice_is_one_call_and_a_tool_calling_another_is_two() -> None:
    """An MCP client's ``tools/call search`` span (an ``execute_tool`` too) inside the framework's
    ``execute_tool search``: one call. A tool ``plan`` that runs the tool ``search`` itself: two."""
    s = Spans()
    lead = s.agent("lead", 0, 10)
    outer = s.tool("search", 1, 3, lead)
    s.span("tools/call search", 1.1, 2.9, outer,
           {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "search"})
    plan = s.tool("plan", 4, 8, lead)
    s.tool("search", 5, 6, plan)
    trace = checked(convert_episode(s.spans))
    assert [e["tool"] for e in of_type(trace, "tool_call")] == ["search", "plan", "search"]
    assert trace["costs"]["tool_calls"] == 3


def test_a_span_naming_a_tool_is_a_tool_call() -> None:
    """A tool span without an operation name (older PydanticAI's ``running tool``)."""
    s = Spans()
    lead = s.agent("lead", 0, 10)
    s.span("running tool", 1, 2, lead, {sc.GEN_AI_TOOL_NAME: "search", sc.GEN_AI_TOOL_CALL_ID: "c1"})
    trace = checked(convert_episode(s.spans))
    assert [(e["agent"], e["tool"]) for e in of_type(trace, "tool_call")] == [("lead", "search")]
    assert len(of_type(trace, "tool_result")) == 1


@pytest.mark.parametrize("ours", [False, True])
def test_an_agent_named_like_the_run_it_is_in_is_that_run_unless_the_run_is_a_task(ours: bool) -> None:
    """Another library's run named after its root agent (ADK), with the root agent and a sub-agent side by
    side in it: one ``boss``, which spawns ``helper``. An orchestrace task named like the agent it calls
    twice keeps the two calls as activations of their own."""
    s = Spans()
    run = s.workflow("boss", 0, 10, **({sc.ORCH_TASK_ID: "boss"} if ours else {}))
    s.agent("boss", 1, 4, run)
    s.agent("helper" if not ours else "boss", 5, 9, run)
    w = checked(convert_episode(s.spans))
    spawns = [(e["agent"], e["to"], e["to_activation"]) for e in of_type(w, "spawn")]
    assert spawns == ([("boss", "boss", 2), ("boss", "boss", 3)] if ours else [("boss", "helper", 1)])


def test_names_of_openinference_crewai_runs_are_the_same_every_rollout() -> None:
    """OpenInference's CrewAI spans: the crew's run is ``Crew_<uuid>.kickoff`` (a new uuid every run) and an
    agent's ``<role>._execute_core`` with the role in ``graph.node.id``. The run is ``Crew.kickoff`` and the
    agents their roles; a node id the span's name does not start with is not taken for a name."""
    s = Spans()
    chain = {"openinference.span.kind": "CHAIN"}
    run = s.span("Crew_ff2f457c-bb1f-4d04-bbd7-03fb25cccc75.kickoff", 0, 10, attrs=chain)
    agent = {"openinference.span.kind": "AGENT"}
    s.span("Researcher._execute_core", 1, 4, run, attrs={**agent, "graph.node.id": "Researcher"})
    s.span("Writer._execute_core", 5, 9, run, attrs={**agent, "graph.node.id": "0b8f1c2e"})
    w = checked(convert_episode(s.spans))
    assert [(e["agent"], e["to"]) for e in of_type(w, "spawn")] == [
        ("Crew.kickoff", "Researcher"), ("Crew.kickoff", "Writer._execute_core")]


def test_an_agent_beside_its_caller_in_the_run_is_the_callers_when_called_as_a_tool() -> None:
    """OpenLLMetry's Agents SDK spans put an agent called as a tool beside its caller in the run. An agent
    that runs the whole time of a tool call named after it is that caller's; one that merely runs meanwhile
    (another name) stays the run's."""
    s = Spans()
    run = s.workflow("team", 0, 20)
    lead = s.agent("lead", 1, 15, run)
    s.tool("ask_helper", 2, 10, lead)
    s.agent("helper", 3, 9, run)
    s.agent("bystander", 4, 8, run)
    w = checked(convert_episode(s.spans))
    assert sorted((e["agent"], e["to"]) for e in of_type(w, "spawn")) == [
        ("lead", "helper"), ("team", "bystander"), ("team", "lead")]
    returns = {(e["agent"], e.get("to")) for e in of_type(w, "return")}
    assert returns >= {("helper", "lead"), ("bystander", "team")}


@pytest.mark.parametrize(("read_key", "write_key"), [
    (sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
    (sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, sc.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS),
    ("gen_ai.usage.cache_read_input_tokens", "gen_ai.usage.cache_creation_input_tokens"),
    ("gen_ai.usage.cache_read_input_tokens", "gen_ai.usage.cache_write_input_tokens"),
    ("llm.token_count.prompt_details.cache_read", "llm.token_count.prompt_details.cache_write"),
], ids=["genai", "genai-latest", "openllmetry", "strands", "openinference"])
def test_a_turn_keeps_the_cached_parts_of_its_prompt_in_every_vocabulary(read_key: str,
                                                                         write_key: str) -> None:
    s = Spans()
    agent = s.agent("a", 0, 5)
    s.chat(1, 2, agent, tokens=(1210, 3), **{read_key: 1000, write_key: 200})
    s.chat(3, 4, agent)
    episode = convert_episode(s.spans)
    checked(episode)
    cached, plain = episode.turns
    assert (cached.input_tokens, cached.cache_read_input_tokens, cached.cache_creation_input_tokens) == (
        1210, 1000, 200)
    assert (plain.cache_read_input_tokens, plain.cache_creation_input_tokens) == (None, None)
