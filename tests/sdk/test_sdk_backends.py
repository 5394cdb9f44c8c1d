"""What standard backends show of the SDK's spans: model calls end OK or ERROR (the user's exception passing
through unchanged), spans GenAI has no kind for are OpenInference chains, and a model call's whole prompt
is on its span with ``full_prompt``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import orchestrace as ot
import pytest
from opentelemetry.trace import StatusCode
from orchestrace import semconv as sc
from orchestrace.config import set_config
from sdk_spans import Spans, configure_memory


class QuotaExceeded(Exception):
    pass


async def test_model_calls_end_ok_or_error_with_the_exception_unchanged(spans: Spans) -> None:
    refused = QuotaExceeded("quota exceeded")

    @ot.llm("m")
    def answer(prompt: str) -> str:
        return "fine"

    @ot.llm("m")
    def stream(prompt: str) -> Iterator[str]:
        yield "fi"
        yield "ne"

    @ot.llm("m")
    async def refuse(prompt: str) -> str:
        raise refused

    @ot.llm("m")
    async def astream_then_fail(prompt: str) -> AsyncIterator[str]:
        yield "half"
        raise refused

    assert answer("q") == "fine" and "".join(stream("q")) == "fine"
    with pytest.raises(QuotaExceeded) as direct:
        await refuse("q")
    with pytest.raises(QuotaExceeded) as streamed:
        [_ async for _ in astream_then_fail("q")]
    assert direct.value is refused and streamed.value is refused
    chats = spans.named("chat m")
    assert [s.status.status_code for s in chats] == [StatusCode.OK, StatusCode.OK, StatusCode.ERROR,
                                                     StatusCode.ERROR]
    for failed in chats[2:]:
        assert failed.status.description == "QuotaExceeded: quota exceeded"
        assert failed.attributes[sc.ERROR_TYPE] == "QuotaExceeded"
        assert [e.attributes[sc.EXCEPTION_TYPE] for e in failed.events if e.name == sc.EVENT_EXCEPTION] == [
            f"{__name__}.QuotaExceeded"]


def test_tasks_and_aggregates_are_chains(spans: Spans) -> None:
    @ot.tool
    def fetch(key: str) -> str:
        return key.upper()

    @ot.llm("m")
    def think(prompt: str) -> str:
        return "ok"

    @ot.agent
    def gatherer() -> str:
        think("which?")
        found = [fetch("a"), fetch("b")]
        with ot.aggregate(found) as merge:
            merge.set_result("AB")
        return "AB"

    with ot.task("gather"):
        gatherer()
    kinds = {s.name: s.attributes.get(sc.OPENINFERENCE_SPAN_KIND) for s in spans.all}
    assert kinds["invoke_workflow gather"] == kinds["aggregate gatherer"] == sc.SPAN_KIND_CHAIN
    # the others have a GenAI operation, which backends map to their kinds (agent, tool, LLM)
    assert kinds["invoke_agent gatherer"] is kinds["execute_tool fetch"] is kinds["chat m"] is None


@pytest.mark.parametrize("full_prompt", [False, True])
def test_full_prompt_puts_the_whole_prompt_on_each_model_call(full_prompt: bool) -> None:
    """With ``full_prompt`` every ``@ot.llm`` span carries its whole prompt; without, a call whose prompt
    continues an earlier call's prompt and reply in the trace carries only its new messages and names it."""
    handle = configure_memory(capture_content=True, full_prompt=full_prompt)
    try:
        @ot.llm("m")
        def chat(messages: list[dict[str, str]]) -> str:
            return "three"

        history = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
        with ot.task("t"):
            chat(history)
            chat([*history, {"role": "assistant", "content": "three"}, {"role": "user", "content": "four"}])
        first, second = (s for s in handle.get_finished_spans() if s.name == "chat m")
        sent = [json.loads(str(s.attributes[sc.GEN_AI_INPUT_MESSAGES])) for s in (first, second)]
        if full_prompt:
            assert [len(m) for m in sent] == [2, 4]
            assert sc.ORCH_PREFIX_SPAN_ID not in (second.attributes or {})
        else:
            assert sent[1] == [{"role": "user", "parts": [{"type": "text", "content": "four"}]}]
            assert second.attributes[sc.ORCH_PREFIX_SPAN_ID] == format(first.context.span_id, "016x")
            assert second.attributes[sc.ORCH_PREFIX_LENGTH] == 3
            assert second.attributes[sc.ORCH_INPUT_MESSAGE_COUNT] == 4
    finally:
        handle.shutdown()
        set_config(None)
