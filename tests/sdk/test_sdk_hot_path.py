"""What every decorated call does, kept cheap without changing what it records: content-ref fast paths,
random ids, the result index, and no serialization for spans that do not record."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from enum import IntEnum
from typing import Any

import orchestrace as ot
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanContext, TraceFlags
from orchestrace import invocation, results
from orchestrace import semconv as sc
from orchestrace.config import set_config
from orchestrace_semconv import refs
from sdk_spans import Spans


def _canonical(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Level(IntEnum):
    HIGH = 3


@pytest.mark.parametrize("value", [3, -1.5, 10**30, True, False, None, float("nan"), Level.HIGH])
def test_scalars_have_their_canonical_json_digest(value: Any) -> None:
    assert ot.content_ref(value) == _canonical(value)


def test_strings_and_bytes_hash_their_utf8_bytes_whatever_their_size() -> None:
    # Short data and long data are hashed by different SHA-256 implementations: both sides of the threshold.
    around_short = [c * n for c in "zé" for n in range(refs._SHORT // len(c.encode()) - 2,
                                                       refs._SHORT // len(c.encode()) + 3)]
    for text in ["", "paris", "é\ud800", *around_short, "x" * (1 << 20), "y" * ((1 << 20) + 5)]:
        expected = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        assert ot.content_ref(text) == "sha256:" + expected
    for data in [b"\xff\x00", bytes(range(256)) * 3, b"a" * refs._SHORT, b"a" * (refs._SHORT + 1)]:
        assert ot.content_ref(data) == "sha256:" + hashlib.sha256(data).hexdigest()
    assert ot.content_ref(bytearray(b"ab")) == ot.content_ref(b"ab") == ot.content_ref(memoryview(b"ab"))


@pytest.mark.parametrize(("value", "small"), [
    ([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}], True),  # hashed in one piece
    ({"k" * 600_000: "v" * 600_000}, False),  # keys count towards the size: streamed
    (["x" * 700_000, ("y" * 400_000,)], False),  # strings deeper down too
    (list(range(3000)), False),  # many items
    ({"a": [{"b": (1, 2)}, None, 1.5, True]}, True),
])
def test_containers_small_or_streamed_have_their_canonical_json_digest(value: Any, small: bool) -> None:
    assert (refs._walk(value) is not False) is small  # plain (orjson) or small: in one piece
    assert ot.content_ref(value) == _canonical(value)


def test_an_int_too_long_for_json_still_gets_a_ref() -> None:
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", ot.content_ref(10**5000))


def test_ids_have_their_documented_shape_and_ignore_the_apps_seed(spans: Spans) -> None:
    @ot.agent(name="planner")
    def plan() -> None:
        return None

    @ot.tool
    def search() -> None:
        return None

    for _ in range(2):
        random.seed(7)  # an app seeding ``random`` for reproducibility
        plan()
        search()
    agent_ids = [str(s.attributes[sc.GEN_AI_AGENT_ID]) for s in spans.named("invoke_agent planner")]
    call_ids = [str(s.attributes[sc.GEN_AI_TOOL_CALL_ID]) for s in spans.named("execute_tool search")]
    assert all(re.fullmatch(r"planner-[0-9a-f]{12}", agent_id) for agent_id in agent_ids)
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", call_id) for call_id in call_ids)
    assert len(set(agent_ids)) == 2 and len(set(call_ids)) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_repeat_the_parents_ids() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, then exit without running any cleanup of the test process
        os.write(write_end, invocation._ids.randbytes(6))
        os._exit(0)
    os.close(write_end)
    child_id = os.read(read_end, 6)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert len(child_id) == 6
    assert child_id != invocation._ids.randbytes(6)


def _span_context(n: int) -> SpanContext:
    return SpanContext(trace_id=1, span_id=n, is_remote=False, trace_flags=TraceFlags(1))


def test_result_index_keeps_the_newest_producers_of_recent_refs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results, "MAX_ENTRIES", 50)
    for n in range(800):  # 40 refs, 20 results each: more records than wait before reaching the index
        results.record(f"ref-{n % 40}", _span_context(n + 1))
    # Each ref keeps its newest 16 producers, oldest first; the lookup makes ref-0 the most recently used.
    assert [c.span_id - 1 for c in results.producers("ref-0")] == list(range(160, 800, 40))
    for k in range(11):  # 51 refs: the least recently used one is forgotten
        results.record(f"new-{k}", _span_context(1))
    assert results.producers("ref-1") == []
    assert len(results.producers("ref-0")) == 16
    assert [c.span_id - 1 for c in results.producers("ref-2")] == list(range(162, 800, 40))


def test_inputs_are_not_serialized_for_spans_that_do_not_record() -> None:
    dumps: list[str] = []

    class Query:
        def model_dump(self, mode: str) -> dict[str, str]:
            dumps.append(mode)
            return {"q": "x"}

    @ot.agent
    def answer(query: Query) -> str:
        return "ok"

    provider = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    handle = ot.configure(exporter="memory", tracer_provider=provider, batch=False, capture_content=False)
    try:
        assert answer(Query()) == "ok"
        assert dumps == []
        assert list(handle.get_finished_spans()) == []
    finally:
        handle.shutdown()
        set_config(None)


def test_reply_fields_of_pydantic_models_are_read_as_getattr_reads_them_without_raising(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A field a reply lacks (a LangChain message's ``model``, ``usage``) is read without pydantic's
    # ``__getattr__``, whose raised AttributeError cost more than the rest of reading the reply.
    from langchain_core.messages import AIMessage
    from orchestrace.fields import field_of
    from pydantic import BaseModel, PrivateAttr, computed_field

    class Reply(BaseModel, extra="allow"):
        text: str = "t"
        _secret: str = PrivateAttr(default="s")

        @computed_field  # type: ignore[prop-decorator]
        @property
        def shout(self) -> str:
            return self.text.upper()

        def method(self) -> str:
            return "m"

    raised: list[str] = []
    original = BaseModel.__getattr__

    def counting(self: BaseModel, item: str) -> Any:
        raised.append(item)
        return original(self, item)

    counting.__qualname__, counting.__module__ = original.__qualname__, original.__module__
    monkeypatch.setattr(BaseModel, "__getattr__", counting)
    replies = [Reply(), Reply(model="m-1"), Reply.model_construct(), AIMessage("hi", model="m-2"),
               AIMessage("x")]
    for reply in replies:
        for key in ("text", "model", "usage", "shout", "_secret", "method", "__class__"):
            expected = getattr(reply, key, "default")
            assert field_of(reply, key, "default") == expected, (reply, key)
    assert [field_of(r, "model") for r in replies] == [None, "m-1", None, "m-2", None]
    raised.clear()
    for reply in replies:
        field_of(reply, "usage")
        field_of(reply, "model")
    assert raised == []


def test_a_langchain_reply_read_without_content_states_the_same_metadata() -> None:
    # A model call through callbacks with capture off reads only the reply's metadata (usage, model, id,
    # finish reason): the same as the whole read, every text and tool call left out.
    from langchain_core.messages import AIMessage, AIMessageChunk
    from orchestrace.replies import Reply, normalize

    call = {"name": "lookup", "args": {"q": "x"}, "id": "call-1", "type": "tool_call"}
    usage = {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19}
    cached = {**usage, "input_token_details": {"cache_read": 4, "cache_creation": 2}}
    messages = [
        AIMessage("plain"),
        AIMessage("hi", id="msg-1", usage_metadata=usage),  # type: ignore[arg-type]
        AIMessage("", tool_calls=[call], usage_metadata=cached,  # type: ignore[arg-type, list-item]
                  response_metadata={"finish_reason": "tool_calls", "model_name": "m-1", "id": "resp-1"}),
        AIMessage("stop", response_metadata={"stop_reason": "end_turn", "model_name": "m-2"}),
        AIMessage("own", model="m-3", response_metadata={"model_name": "m-4", "finish_reason": ""}),
        AIMessage([{"type": "thinking", "thinking": "why"}, {"type": "text", "text": "so"}],
                  additional_kwargs={"reasoning_content": "r"}),
        AIMessageChunk(content="chunk", response_metadata={"finish_reason": "length"}),
    ]
    for message in messages:
        whole, meta = normalize(message), normalize(message, content=False)
        assert whole is not None and meta is not None
        assert (meta.usage, meta.response_model, meta.response_id, meta.finish_reason) == (
            whole.usage, whole.response_model, whole.response_id, whole.finish_reason), message
        assert (meta.text, meta.reasoning, meta.tool_calls) == ("", "", [])
    stated = [normalize(m, content=False) for m in messages]
    assert [(r.usage and tuple(r.usage), r.response_model, r.response_id, r.finish_reason)
            for r in stated if isinstance(r, Reply)] == [
        (None, None, None, None),
        ((12, 7, None, None), None, "msg-1", None),
        ((12, 7, 4, 2), "m-1", "resp-1", "tool_calls"),
        (None, "m-2", None, "stop"),
        (None, "m-3", None, None),
        (None, None, None, None),
        (None, None, None, "length"),
    ]
