"""Conversion of damaged, odd or stitched input: it always yields a valid trace or a clear ValueError."""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from convert_support import Spans, event, ns
from orchestrace import semconv as sc
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.spans import Span
from written_traces import checked, of_type


def test_empty_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least one event"):
        convert_episode([])


def test_model_calls_with_nothing_around_them_are_the_services_samples() -> None:
    """An app calling a model directly (no agent, tool or task span): the calls are still training samples,
    closed by one return of the service's stand-in at the end of the last call."""
    s = Spans()  # service.name "test-app"
    s.chat(1, 2)
    s.chat(3, 5, tokens=(4, 2))
    episode = convert_episode(s.spans)
    trace = checked(episode)
    (ret,) = trace["events"]
    assert (ret["type"], ret["agent"], ret["from"]) == ("return", "test-app", "test-app")
    assert (ret["t_start"], ret["t"], ret["tokens"]) == (0.0, 4.0, 21)
    assert "to" not in ret and trace["edges"] == []
    assert trace["costs"]["tokens"] == 21
    assert [(t.agent, t.input_tokens, t.output_tokens, t.event_ids) for t in episode.turns] == [
        ("test-app", 10, 5, []),
        ("test-app", 4, 2, ["e1"]),
    ]


def test_orphans_attach_to_the_root_and_mark_the_trace_incomplete() -> None:
    s = Spans()
    root = s.agent("lead", 0, 10)
    s.tool("t", 1, 2, root)
    lost = Span(
        trace_id=s.trace_id,
        span_id="f" * 16,
        parent_span_id="e" * 16,
        name="execute_tool orphan",
        start_ns=ns(3),
        end_ns=ns(4),
        attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "orphan"},
    )
    w = checked(convert_episode([*s.spans, lost]))
    orphan_call = next(e for e in of_type(w, "tool_call") if e["tool"] == "orphan")
    assert orphan_call["agent"] == "lead" and orphan_call["incomplete"] is True
    assert w["metrics"]["incomplete"] == 1


def test_all_spans_orphaned_still_converts() -> None:
    s = Spans()
    parent = s.agent("gone", 0, 10)
    s.agent("a", 1, 2, parent)
    s.agent("b", 3, 4, parent)
    w = checked(convert_episode(s.spans[1:]))
    assert {e["agent"] for e in of_type(w, "return")} == {"a", "b"}
    assert w["metrics"]["incomplete"] == 1


def test_duplicate_span_ids_keep_the_first_copy() -> None:
    s = Spans()
    root = s.agent("lead", 0, 10)
    tool = s.tool("t", 1, 2, root)
    copy = Span(
        trace_id=tool.trace_id,
        span_id=tool.span_id,
        parent_span_id=root.span_id,
        name="execute_tool x",
        start_ns=ns(5),
        end_ns=ns(6),
        attributes={sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: "x"},
    )
    w = checked(convert_episode([*s.spans, copy]))
    assert [e["tool"] for e in of_type(w, "tool_call")] == ["t"]


def test_parent_cycles_are_broken() -> None:
    s = Spans()
    a = s.agent("a", 0, 10)
    b = s.agent("b", 1, 9, a)
    a.parent_span_id = b.span_id  # a <-> b
    c = s.agent("c", 2, 3, b)
    c.parent_span_id = c.span_id  # its own parent
    w = checked(convert_episode(s.spans))
    assert {e["agent"] for e in of_type(w, "return")} == {"a", "b", "c"}
    assert w["metrics"]["incomplete"] == 1


def test_end_before_start_and_clock_skew_keep_t_non_negative() -> None:
    s = Spans()
    root = s.agent("lead", 5, 10)
    s.tool("backwards", 7, 6, root)  # ends before it starts
    s.agent("skewed", 1, 2, root)  # another process whose clock is behind: starts before its parent
    root.events.append(event(sc.EVENT_DECISION, -3, **{sc.ORCH_DECISION_KIND: "route"}))
    w = checked(convert_episode(s.spans))
    call, result = of_type(w, "tool_call")[0], of_type(w, "tool_result")[0]
    assert call["t"] == result["t"] and int(call["id"][1:]) < int(result["id"][1:])
    assert min(e["t"] for e in w["events"]) == 0


def test_zero_length_nested_spans_order_start_before_end() -> None:
    s = Spans()
    root = s.agent("lead", 1, 1)
    s.tool("instant", 1, 1, root)
    w = checked(convert_episode(s.spans))
    assert [e["type"] for e in w["events"]] == ["tool_call", "tool_result", "return"]


def test_output_does_not_depend_on_input_order() -> None:
    s = Spans()
    root = s.workflow("g", 0, 10)
    for k in range(5):
        node = s.node("step", k, k + 0.5, root)
        s.tool("t", k + 0.1, k + 0.2, node)
        s.chat(k + 0.2, k + 0.3, node)
    expected = checked(convert_episode(s.spans))
    shuffled = list(s.spans)
    random.Random(7).shuffle(shuffled)
    assert checked(convert_episode(shuffled)) == expected


def test_equal_times_are_ordered_deterministically() -> None:
    s = Spans()
    root = s.agent("lead", 0, 1)
    for name in ("a", "b", "c"):
        s.tool(name, 0.5, 0.5, root)
    w = checked(convert_episode(s.spans))
    assert [(e["type"], e.get("tool")) for e in w["events"][:6]] == [
        ("tool_call", "a"),
        ("tool_result", "a"),
        ("tool_call", "b"),
        ("tool_result", "b"),
        ("tool_call", "c"),
        ("tool_result", "c"),
    ]


def test_an_episode_stitched_from_several_traces_keeps_one_orchestrator() -> None:
    first, resumed = Spans("01" * 16), Spans("02" * 16)
    g1 = first.workflow("graph", 0, 2, **{sc.ORCH_EPISODE_ID: "thread-9"})
    first.node(
        "ask",
        0.5,
        1.5,
        g1,
        events=[event(sc.EVENT_HUMAN_INTERVENTION, 1.4, **{sc.ORCH_HUMAN_KIND: "interrupt"})],
    )
    g2 = resumed.workflow("graph", 100, 103)
    resumed.node("act", 101, 102, g2)
    w = checked(convert_episode([*first.spans, *resumed.spans]))
    assert w["trace_id"] == "thread-9"
    assert [e["agent"] for e in of_type(w, "return")] == ["ask", "act", "graph"]  # one graph instance
    assert {e["otel_trace_id"] for e in w["events"]} == {"01" * 16, "02" * 16}
    assert of_type(w, "return")[-1]["otel_trace_id"] == "02" * 16  # the resumed run closes the graph
    assert w["costs"]["wall_clock_s"] == 5  # active time: 0-2 and 100-103, the wait for the resume is idle
    # Sequential work reads 1: the idle time between the interrupt and the resume counts on neither side.
    assert w["metrics"]["parallelism_efficiency"] == pytest.approx(1.0)


def test_many_instances_of_one_name_are_numbered_in_start_order() -> None:
    s = Spans()
    root = s.agent("lead", 0, 100)
    for k in reversed(range(12)):
        s.agent("w", k, k + 0.5, root, **{sc.GEN_AI_AGENT_ID: f"id-{k}"})
    w = checked(convert_episode(s.spans))
    returns = [e for e in of_type(w, "return") if e["agent"] != "lead"]
    got = [(e["agent"], e["activation"], e["from"], e["from_activation"], e["agent_id"]) for e in returns]
    assert got == [
        ("w", k + 1, "w", k + 1, f"id-{k}") for k in range(12)
    ]


def test_any_names_survive() -> None:
    s = Spans()
    root = s.agent("ågent / with spaces#1", 0, 10)
    s.tool("", 1, 2, root)
    w = checked(convert_episode(s.spans))
    assert of_type(w, "return")[0]["agent"] == "ågent / with spaces#1"
    assert of_type(w, "tool_call")[0]["tool"] == "tool"


def test_deep_nesting_does_not_recurse() -> None:
    s = Spans()
    parent = None
    for k in range(3000):
        parent = s.span(f"layer{k}", k, 10_000 - k, parent)
    s.tool("leaf", 5000, 5001, parent)
    w = checked(convert_episode(s.spans))
    assert of_type(w, "tool_call")[0]["agent"] == "layer0"  # the promoted root owns everything


def test_attribute_values_of_any_type_never_break_the_conversion() -> None:
    """Every attribute conversion reads, ours and other libraries' (``vocabularies``), set to values of any
    type, including ones that name kinds, operations and handoff tools or look like the JSON some carry."""
    from orchestrace_collector.convert import vocabularies
    from orchestrace_collector.convert.vocabularies import genai

    libraries = [m for m in vars(vocabularies).values() if isinstance(m, ModuleType)]

    odd_values: list[object] = [{"a": 1}, ("x", "y"), 7, 2.5, True, "", None, b"bytes"]
    odd_values += [float("nan"), float("inf"), -1, 2**63, ["a", 1], [{"x": 1}]]
    odd_values += ["AGENT", "TOOL", "LLM", "CHAIN", "agent", "tool", "generation", "workflow", "handoff",
                   "ai.toolCall", "ai.generateText", "transfer_to_agent", "handoff_to_agent", "chat",
                   "invoke_agent", "execute_tool", "embeddings", "[{", '[{"toolUse": 1}]', '[{"text": 5}]',
                   '{"agent_name": 5}', '{"agent_name": "w"}', '[{"type": "tool-call"}]', '{"input": "x"}',
                   '[{"role": "tool", "content": [{"type": "tool_result"}]}]', "pending_span"]
    keys = [
        value
        for module in (sc, *libraries)
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, str) and "." in value and not name.startswith("EVENT_")
    ]
    event_names = [sc.EVENT_SPAWN, sc.EVENT_MESSAGE, sc.EVENT_DECISION, sc.EVENT_EVALUATION_RESULT,
                   sc.EVENT_SAFETY, sc.EVENT_HUMAN_INTERVENTION, sc.EVENT_STOP, sc.EVENT_DELEGATE,
                   "gen_ai.choice", "gen_ai.tool.message", "gen_ai.user.message",
                   genai.GEN_AI_DETAILS_EVENT, genai.GEN_AI_PROMPT_EVENT]
    keys += ["content", "message"]
    rng = random.Random(3)
    for round_ in range(300):
        s = Spans()
        root = s.agent("lead", 0, 10)
        spans = [root, s.tool("t", 1, 2, root), s.chat(2, 3, root), s.agent("w", 3, 4, root)]
        for span in spans:
            for key in rng.sample(keys, 30):
                span.attributes[key] = rng.choice(odd_values)
            span.events.append(
                event(rng.choice(event_names), 1.5,
                      **{key: rng.choice(odd_values) for key in rng.sample(keys, 30)})
            )
        try:
            checked(convert_episode(s.spans))
        except ValueError as error:  # only the documented one
            assert "at least one event" in str(error), round_


@pytest.mark.parametrize("count", [float("inf"), float("nan"), -1, "12"])
def test_token_counts_that_are_not_counts_are_left_out(count: object) -> None:
    s = Spans()
    root = s.agent("lead", 0, 10)
    chat = s.chat(2, 3, root)
    chat.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = count
    chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = 5
    episode = convert_episode(s.spans)
    checked(episode)
    (turn,) = episode.turns
    assert turn.input_tokens is None and turn.output_tokens == 5


def test_message_events_and_reply_attributes_of_bytes_still_give_the_turn() -> None:
    """A model call whose messages come as span events (and an AI SDK reply) with bytes values, as an OTLP
    ``bytesValue`` decodes: the turn is written, the bytes as their text."""
    s = Spans()
    root = s.agent("lead", 0, 10)
    call = s.chat(1, 2, root, **{"ai.operationId": "ai.generateText.doGenerate", "ai.response.text": b"hi"})
    call.events.append(event("gen_ai.user.message", 1.1, content=b"raw"))
    call.events.append(event("gen_ai.choice", 1.9, message=b"reply"))
    episode = convert_episode(s.spans)
    checked(episode)
    (turn,) = episode.turns
    assert turn.prompt is not None and turn.prompt[0].content == "b'raw'"


@pytest.mark.parametrize(("value", "counted"), [
    (7, 7), (2**63 - 1, 2**63 - 1), (2**63, None), (-1, None), (True, None), (7.9, 7), (9.2e18, 9.2e18),
    (2.0**63, None), (float("inf"), None), (float("nan"), None), (-0.5, None), ("7", None),
])
def test_a_token_count_is_a_non_negative_int64(value: object, counted: float | None) -> None:
    """Token counts are ints or floats within int64 (a float of 2**63 is not, though it compares equal to
    ``2**63 - 1`` as a C double): compiled and pure Python read them alike."""
    s = Spans()
    s.chat(1, 2, s.agent("lead", 0, 10), **{sc.GEN_AI_USAGE_INPUT_TOKENS: value})
    assert convert_episode(s.spans).turns[0].input_tokens == counted
