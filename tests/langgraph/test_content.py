"""Content: refs always, content only when capture is on, a message history exported once (linear size)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import ScriptedChatModel
from genai_messages import INPUT_MESSAGES, OUTPUT_MESSAGES, problems
from heldout_graphs import tool_loop
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph import END, START, MessagesState, StateGraph
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import format_span_id
from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, set_config
from orchestrace.content import content_ref
from orchestrace.semconv import ORCH_INPUT_MESSAGE_COUNT as INPUT_MESSAGE_COUNT
from orchestrace.semconv import ORCH_PREFIX_LENGTH as PREFIX_LENGTH
from orchestrace.semconv import ORCH_PREFIX_SPAN_ID as PREFIX_SPAN_ID
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_langgraph.content import genai_message, message_ref, messages_ref, prompt_refs
from span_checks import Spans
from written_traces import convert

from examples.supervisor import app as supervisor_app  # the repository root is on sys.path (conftest)


@pytest.fixture
def capture_on() -> Iterator[None]:
    set_config(CaptureConfig(capture_content=True))
    yield
    set_config(None)


def chat_loop(turns: int) -> Any:
    """One node that calls the model with the whole history and appends the reply, ``turns`` times."""
    filler = "lorem ipsum " * 20
    llm = ScriptedChatModel(respond=lambda msgs: AIMessage(f"answer number {len(msgs)} {filler}"))

    def turn(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    def again(state: MessagesState) -> str:
        return "turn" if len(state["messages"]) <= turns else END

    g = StateGraph(MessagesState)
    g.add_node("turn", turn)
    g.add_edge(START, "turn")
    g.add_conditional_edges("turn", again, ["turn", END])
    return g.compile(name="loop")


def exported_bytes(spans: list[ReadableSpan]) -> int:
    return len(encode_spans(spans).SerializeToString())


def rebuild_prompt(span: ReadableSpan, by_id: dict[str, ReadableSpan]) -> list[dict[str, Any]]:
    """The documented reconstruction: prompt(s) = (prompt(p) + completion(p))[:prefix_length] + input(s)."""
    own = json.loads(str(span.attributes[sc.GEN_AI_INPUT_MESSAGES]))
    prefix_id = span.attributes.get(PREFIX_SPAN_ID)
    if prefix_id is None:
        return list(own)
    earlier = by_id[str(prefix_id)]
    # A completion's finish_reason belongs to the reply, not to the message a later prompt holds.
    completion = [{k: v for k, v in m.items() if k != "finish_reason"}
                  for m in json.loads(str(earlier.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))]
    full = rebuild_prompt(earlier, by_id) + completion
    return full[: int(span.attributes[PREFIX_LENGTH])] + own


def test_history_is_exported_once_and_rebuildable(spans: Spans, capture_on: None) -> None:
    chat_loop(6).invoke({"messages": [HumanMessage("start the rebuild test")]}, {"recursion_limit": 100})
    chats = sorted(spans.named("chat scripted-model"), key=lambda s: s.start_time or 0)
    assert len(chats) == 6
    by_id = {format_span_id(s.context.span_id): s for s in chats}
    for i, chat in enumerate(chats):
        exported = json.loads(str(chat.attributes[sc.GEN_AI_INPUT_MESSAGES]))
        assert len(exported) == (1 if i == 0 else 0)  # only the first call has a message no call exported
        prompt = rebuild_prompt(chat, by_id)
        assert len(prompt) == chat.attributes[INPUT_MESSAGE_COUNT] == i + 1
        assert content_ref(prompt) == chat.attributes[sc.ORCH_INPUT_REF]  # the ref checks the rebuilt prompt
    assert PREFIX_SPAN_ID not in chats[0].attributes
    assert chats[3].attributes[PREFIX_SPAN_ID] == format_span_id(chats[2].context.span_id)


def test_growth_is_linear(spans: Spans, capture_on: None) -> None:
    sizes = {}
    for turns in (10, 50):
        spans.clear()
        start = f"start of the {turns}-step run"  # distinct, so no run reuses another's history
        out = chat_loop(turns).invoke({"messages": [HumanMessage(start)]}, {"recursion_limit": 200})
        assert len(out["messages"]) == turns + 1
        assert len(spans.named("chat scripted-model")) == turns
        sizes[turns] = exported_bytes(spans.all)
    print("exported bytes (OTLP protobuf) by steps:", sizes)
    assert sizes[50] / sizes[10] < 7, sizes  # O(n); the whole history at every step would be about 25x


def test_capture_off_keeps_refs_only(spans: Spans) -> None:
    chat_loop(2).invoke({"messages": [HumanMessage("secret prompt")]})
    for s in spans.all:
        for value in s.attributes.values():
            assert "secret" not in str(value) and "lorem" not in str(value)
    chat = spans.named("chat scripted-model")[0]
    assert str(chat.attributes[sc.ORCH_INPUT_REF]).startswith("sha256:")
    assert str(chat.attributes[sc.ORCH_OUTPUT_REF]).startswith("sha256:")
    assert sc.GEN_AI_INPUT_MESSAGES not in chat.attributes


def test_captured_content_is_truncated(spans: Spans) -> None:
    set_config(CaptureConfig(capture_content=True, max_content_bytes=64))
    try:
        chat_loop(1).invoke({"messages": [HumanMessage("long " * 100)]})
    finally:
        set_config(None)
    chat = spans.one("chat scripted-model")
    assert chat.attributes[sc.ORCH_CONTENT_TRUNCATED] is True
    assert len(str(chat.attributes[sc.GEN_AI_INPUT_MESSAGES]).encode()) < 200
    json.loads(str(chat.attributes[sc.GEN_AI_INPUT_MESSAGES]))  # still valid JSON


def test_completion_models_get_a_span(spans: Spans) -> None:
    from langchain_core.language_models.fake import FakeListLLM

    llm = FakeListLLM(responses=["forty-two"])
    assert llm.invoke("what is six times seven?") == "forty-two"
    (span,) = [s for s in spans.ours if s.name.startswith("text_completion")]
    assert span.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_TEXT_COMPLETION
    assert span.attributes[sc.ORCH_OUTPUT_REF] == content_ref({"role": "assistant", "parts": [
        {"type": "text", "content": "forty-two"}]})


def test_history_references_stay_within_a_trace(spans: Spans, capture_on: None) -> None:
    graph = chat_loop(1)
    for _ in range(2):  # two runs with the same first message: two traces
        graph.invoke({"messages": [HumanMessage("shared system-like prompt")]})
    first, second = sorted(spans.named("chat scripted-model"), key=lambda s: s.start_time or 0)
    assert first.context.trace_id != second.context.trace_id
    assert PREFIX_SPAN_ID not in second.attributes  # its own trace has the whole prompt
    assert len(json.loads(str(second.attributes[sc.GEN_AI_INPUT_MESSAGES]))) == 1


_MESSAGES: list[Any] = [
    HumanMessage("hi"), HumanMessage(""), SystemMessage("sys"), AIMessageChunk(content="chunk"),
    AIMessage('é "quoted" \\ back\nslash\t\u2028 \x00 \ud800 lone surrogate'),
    AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"}]),
    ToolMessage("result", tool_call_id="c1"), ChatMessage(role="critic", content="hmm"),
    HumanMessage(content=[{"type": "text", "text": "a"}, "b"]), "a plain string", "",
    AIMessage("x" * (1 << 20)), AIMessage("y" * ((1 << 20) + 1)),
    # Tool calls and results as agents exchange them, and the shapes that are converted instead.
    AIMessage("let me", tool_calls=[{"name": "f", "args": {"b": "é\n", "a": None, "c": True, "d": -3},
                                      "id": "c2", "type": "tool_call"},
                                     {"name": "g", "args": {}, "id": None, "type": "tool_call"}]),
    AIMessage("", tool_calls=[{"name": "f", "args": {"nested": {"x": [1, 2.5]}}, "id": "c3"}]),
    AIMessage("", tool_calls=[{"name": "f", "args": {"big": 10**40, "f": 0.1}, "id": "c4"}]),
    AIMessageChunk(content="", tool_calls=[{"name": "h", "args": {"q": "x"}, "id": "c5"}]),
    ToolMessage("", tool_call_id="c2"), ToolMessage(["a", {"type": "text", "text": "b"}], tool_call_id="c3"),
    ToolMessage('{"ok": true} \ud800', tool_call_id="c4", name="f", status="error"),
]
#: Written directly (no conversion to GenAI dicts, no size walk, no JSON encoder): what an agent loop's prompt
#: is made of.
_WRITTEN_DIRECTLY: list[Any] = [_MESSAGES[5], _MESSAGES[6], _MESSAGES[13], _MESSAGES[16], _MESSAGES[17],
                                _MESSAGES[19]]


@pytest.mark.parametrize("message", _MESSAGES, ids=range(len(_MESSAGES)))
def test_message_refs_written_directly_equal_the_refs_of_converted_messages(message: Any) -> None:
    assert message_ref(message) == content_ref(genai_message(message))


def test_tool_calls_and_results_are_written_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrace import messages

    def unexpected(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("converted")

    monkeypatch.setattr(messages, "to_message", unexpected)
    monkeypatch.setattr(messages, "content_ref", unexpected)
    refs = prompt_refs(_WRITTEN_DIRECTLY)
    assert refs.converted is None
    monkeypatch.undo()
    assert refs.whole == content_ref([genai_message(m) for m in _WRITTEN_DIRECTLY])


@pytest.mark.parametrize("messages", [[], _MESSAGES[:5], _MESSAGES, _WRITTEN_DIRECTLY,
                                      [AIMessage("z" * 600_000)] * 2])
def test_prompt_refs_written_directly_equal_the_refs_of_converted_prompts(messages: list[Any]) -> None:
    assert messages_ref(messages) == content_ref([genai_message(m) for m in messages])
    refs = prompt_refs(messages)  # the capture path: the same refs, each message serialized once
    assert refs.whole == messages_ref(messages)
    assert refs.each == [content_ref(genai_message(m)) for m in messages]
    # Kept when the refs needed them, so that capture at the call's end does not convert again.
    assert refs.converted is None or refs.converted == [genai_message(m) for m in messages]
    assert prompt_refs(_MESSAGES).converted is not None  # these are not all plain texts


@pytest.mark.parametrize("message", _MESSAGES, ids=range(len(_MESSAGES)))
def test_captured_messages_written_directly_equal_the_captured_converted_messages(message: Any) -> None:
    from orchestrace.messages import capture_messages, captured_message_json, message_json

    capture = CaptureConfig(capture_content=True, max_content_bytes=1 << 23)
    direct = captured_message_json(message)
    if message_json(message) is not None:  # every message written directly for its ref, for capture too
        assert direct is not None
    if direct is not None:
        assert f"[{direct}]" == capture_messages([genai_message(message)], capture).text  # type: ignore[union-attr]


def test_captured_replies_written_directly_equal_the_captured_reply_messages() -> None:
    from orchestrace.messages import capture_messages, captured_reply_json
    from orchestrace.replies import Reply, ToolCall, normalize

    capture = CaptureConfig(capture_content=True, max_content_bytes=1 << 23)
    replies = [normalize(m) for m in _MESSAGES if isinstance(m, AIMessage)]
    replies += [Reply(), Reply(text="t", reasoning="r \ud800", finish_reason="length"),
                Reply(tool_calls=[ToolCall("c", "f", '{"a": 1}'), ToolCall(None, "g", None),
                                  ToolCall(7, "h", {"k": "v", "a": [1]})]),
                Reply(tool_calls=[ToolCall("c", "f", {"b": 1, "a": "é"})], finish_reason="stop")]
    written = 0
    for reply in replies:
        assert reply is not None
        direct = captured_reply_json(reply)
        if direct is not None:
            written += 1
            assert f"[{direct}]" == capture_messages([reply.message()], capture).text  # type: ignore[union-attr]
    # All but four: a text over a MB, and calls with nested, float or over-long integer arguments.
    assert written == len(replies) - 4


def test_captured_lists_are_written_directly_only_when_nothing_is_cut_or_redacted() -> None:
    from orchestrace.messages import capture_messages, captured_list, captured_message_json

    forms = [captured_message_json(m) for m in _WRITTEN_DIRECTLY]
    texts = [form for form in forms if form is not None]
    assert len(texts) == len(forms)
    size = sum(map(len, texts))
    whole = CaptureConfig(capture_content=True, max_content_bytes=4 * size)
    assert captured_list(texts, whole) == capture_messages([genai_message(m) for m in _WRITTEN_DIRECTLY],
                                                           whole).text  # type: ignore[union-attr]
    assert captured_list([], whole) == "[]"
    assert captured_list([*texts, None], whole) is None  # one message not written directly: all converted
    assert captured_list(texts, CaptureConfig(capture_content=True, max_content_bytes=4 * size - 1)) is None
    assert captured_list(texts, CaptureConfig(capture_content=True, redact=lambda text: text)) is None


def test_chat_spans_follow_the_genai_schemas_and_turns_get_tools_and_request(
    spans: Spans, capture_on: None
) -> None:
    """Every LangGraph chat span's messages validate (output messages with their finish_reason); the tools
    and sampling parameters bound to the model reach the turn."""
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                "parameters": {"type": "object", "properties": {}}}}
    llm = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[{"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}]),
        AIMessage("sunny"),
    ])
    bound = llm.bind(tools=[weather], temperature=0.3)

    def agent(state: MessagesState) -> dict[str, Any]:
        reply = bound.invoke(state["messages"])
        if reply.tool_calls:
            return {"messages": [reply, ToolMessage("24C", tool_call_id="c1")]}
        return {"messages": [reply]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", lambda s: "agent" if len(s["messages"]) < 4 else END, ["agent", END])
    g.compile(name="weather").invoke({"messages": [HumanMessage("weather in Paris?")]})

    chats = sorted(spans.named("chat scripted-model"), key=lambda s: s.start_time or 0)
    assert len(chats) == 2
    for chat in chats:
        assert problems(INPUT_MESSAGES, json.loads(str(chat.attributes[sc.GEN_AI_INPUT_MESSAGES]))) == []
        assert problems(OUTPUT_MESSAGES, json.loads(str(chat.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))) == []
    turns = convert_episode([span_from_readable(s) for s in spans.all]).turns
    assert [t.finish_reason for t in turns] == ["stop", "stop"]  # what the scripted model says
    assert all(t.request == {"temperature": 0.3} for t in turns)
    assert all(t.tools is not None and [x.model_dump() for x in t.tools] == [weather] for t in turns)
    assert turns[1].prompt is not None and [m.role for m in turns[1].prompt] == ["user", "assistant", "tool"]


def test_a_model_called_with_other_parameters_or_capture_gets_its_own_request_attributes(
    spans: Spans,
) -> None:
    """What a model's calls share is made once per model (``chat_spec``) and reused while its parameters and
    the capture setting stay the same: a call with other bound parameters, or after capture is turned on,
    carries its own sampling parameters and tools, never the previous call's."""
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                "parameters": {"type": "object", "properties": {}}}}
    llm = ScriptedChatModel(replies=[AIMessage("ok")])
    calls = [llm.bind(temperature=0.1), llm.bind(temperature=0.1), llm.bind(temperature=0.9), llm,
             llm.bind(tools=[weather], temperature=0.9)]
    for index, model in enumerate([*calls, calls[-1]]):
        if index == len(calls):
            set_config(CaptureConfig(capture_content=True))
        try:
            model.invoke([HumanMessage("hi")])
        finally:
            set_config(None)
    chats = sorted(spans.named("chat scripted-model"), key=lambda s: s.start_time or 0)
    temperatures = [chat.attributes.get(sc.GEN_AI_REQUEST_TEMPERATURE) for chat in chats]
    assert temperatures == [0.1, 0.1, 0.9, None, 0.9, 0.9]
    tools = [chat.attributes.get(sc.GEN_AI_TOOL_DEFINITIONS) for chat in chats]
    assert tools[:5] == [None] * 5 and [t["name"] for t in json.loads(str(tools[5]))] == ["get_weather"]
    assert {chat.attributes[sc.GEN_AI_REQUEST_MODEL] for chat in chats} == {"scripted-model"}


@pytest.mark.parametrize("broken", ["messages_ref", "normalize"])
def test_an_internal_error_at_a_model_calls_start_or_end_never_reaches_the_caller(
    spans: Spans, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, broken: str
) -> None:
    """The handler's start and end each run under one guard (``ChatSpec.begin``, ``ChatCall.finish``
    unguarded inside it): orchestrace failing at a call's start (its prompt ref) or end (reading the reply)
    is logged once, the call's span is not written, and the model's reply reaches the caller unchanged."""
    import orchestrace.chat as chat
    from orchestrace_langgraph.chat_models import configure_hook

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("internal")

    monkeypatch.setattr(chat, broken, fail)
    llm = ScriptedChatModel(replies=[AIMessage("fine")])
    for _ in range(2):
        assert llm.invoke([HumanMessage("hi")]).content == "fine"
    assert spans.named("chat scripted-model") == []
    handler = configure_hook.get()
    assert handler is not None and handler._calls == {}  # nothing left behind for a call that failed
    logged = [r for r in caplog.records if r.name == "orchestrace" and "KeyError" in str(r.exc_info)]
    assert len(logged) == 1


# --- full_prompt: the whole prompt on every chat span, for backends that show one span at a time ----------
#: What differs between two runs of one app whatever the option: ids of spans, traces and runs, and times.
_RUN_SPECIFIC = frozenset({"trace_id", "task_id", "span_id", "otel_trace_id", "turn_id", "agent_id",
                           "response_id", "t", "t_start", "t_end", "wall_clock_s",
                           "parallelism_efficiency"})


def collected(spans: list[ReadableSpan]) -> Any:
    """The collector's written trace and turns of one run, as JSON, with events in a canonical order: parallel
    tool calls run in threads, so which of them comes first in time differs from run to run."""
    written, episode = convert(spans)
    return {"trace": canonical(written), "turns": [json.loads(t.model_dump_json()) for t in episode.turns]}


def canonical(trace: dict[str, Any]) -> dict[str, Any]:
    """Stable-sorts each run of consecutive tool events by what they hold, renumbers, and maps the edges."""

    def content(event: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in event.items() if k not in _RUN_SPECIFIC | {"id"}}, sort_keys=True)

    events: list[dict[str, Any]] = []
    for is_tool, group in itertools.groupby(trace["events"], key=lambda e: e["type"].startswith("tool_")):
        run = list(group)
        events += sorted(run, key=content) if is_tool else run
    new_id = {e["id"]: f"e{i}" for i, e in enumerate(events, 1)}
    edges = sorted(({**e, "src": new_id[e["src"]], "dst": new_id[e["dst"]]} for e in trace["edges"]),
                   key=lambda e: (e["src"], e["dst"], e["type"]))
    return {**trace, "events": [{**e, "id": new_id[e["id"]]} for e in events], "edges": edges}


def differences(a: Any, b: Any, path: str = "") -> set[str]:
    """Paths where two collector outputs differ, but for the keys that are specific to a run."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = (set(a) | set(b)) - _RUN_SPECIFIC
        return {d for k in keys for d in differences(a.get(k), b.get(k), f"{path}/{k}")}
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return {f"{path}#len"}
        pairs = enumerate(zip(a, b, strict=True))
        return {d for i, (x, y) in pairs for d in differences(x, y, f"{path}[{i}]")}
    return set() if a == b else {path}


FULL_PROMPT_APPS: dict[str, tuple[Any, Any]] = {
    "chat_loop": (lambda: chat_loop(5), {"messages": [HumanMessage("start the full prompt test")]}),
    "tool_loop": (tool_loop, {"messages": [HumanMessage("bolts?")]}),
    # several agents (subgraphs) with their own model loops and tool calls, handing off to each other
    "supervisor": (supervisor_app.build_graph, {"messages": [HumanMessage(supervisor_app.QUESTION)]}),
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # langgraph-supervisor's own create_react_agent
@pytest.mark.parametrize("app", sorted(FULL_PROMPT_APPS))
def test_full_prompt_exports_every_message_and_the_collector_output_is_unchanged(
    spans: Spans, app: str
) -> None:
    """With ``full_prompt`` every chat span holds its whole prompt; the collector writes what it writes
    without the option: the two differ nowhere two runs without it agree."""
    build, graph_input = FULL_PROMPT_APPS[app]
    outputs = []
    for full in (False, False, True):
        spans.clear()
        set_config(CaptureConfig(capture_content=True, full_prompt=full))
        try:
            build().invoke(graph_input, {"recursion_limit": 100})
        finally:
            set_config(None)
        chats = sorted((s for s in spans.ours if s.name.startswith("chat ")), key=lambda s: s.start_time or 0)
        by_id = {format_span_id(s.context.span_id): s for s in chats}
        for chat in chats:
            exported = json.loads(str(chat.attributes[sc.GEN_AI_INPUT_MESSAGES]))
            whole = rebuild_prompt(chat, by_id)
            assert len(whole) == chat.attributes[INPUT_MESSAGE_COUNT]
            assert content_ref(whole) == chat.attributes[sc.ORCH_INPUT_REF]
            if full:  # the span alone holds its whole prompt
                assert PREFIX_SPAN_ID not in chat.attributes and PREFIX_LENGTH not in chat.attributes
                assert exported == whole
        if not full and app == "chat_loop":  # (the default really stores history once)
            assert any(PREFIX_SPAN_ID in chat.attributes for chat in chats)
        outputs.append(collected(spans.all))
    off, off_again, on = outputs
    assert on["trace"]["events"] and on["turns"]
    assert all(turn["prompt"] for turn in on["turns"])
    between_runs = differences(off, off_again)
    # Only ids LangChain draws per run (of messages, of handoff tool calls) and the refs of what holds them
    # differ from run to run.
    per_run = ("/content_ref", "/input_ref", "/output_ref", "/id", "/tool_call_id")
    assert all(path.endswith(per_run) for path in between_runs), between_runs
    assert differences(on, off) <= between_runs


def test_full_prompt_from_configure_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import orchestrace as ot
    from orchestrace.config import get_config

    monkeypatch.setenv("ORCHESTRACE_FULL_PROMPT", "true")
    assert CaptureConfig.from_env().full_prompt is True
    monkeypatch.setenv("ORCHESTRACE_FULL_PROMPT", "span_only")  # a content-capture value, not a switch
    assert CaptureConfig.from_env().full_prompt is False
    monkeypatch.delenv("ORCHESTRACE_FULL_PROMPT")
    assert CaptureConfig().full_prompt is False  # off by default
    handle = ot.configure(exporter="memory", tracer_provider=TracerProvider(), full_prompt=True)
    try:
        assert get_config().full_prompt is True
        ot.configure(capture_content=True)  # a later call keeps what it does not name
        assert get_config().full_prompt is True and get_config().capture_content is True
    finally:
        handle.shutdown()
        set_config(None)
