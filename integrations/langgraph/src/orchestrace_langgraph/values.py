"""What standard OTel backends show of a graph run or a node: its status (OK, or ERROR with the exception),
and, when content capture is on, its input and output as GenAI messages (``gen_ai.input.messages`` /
``gen_ai.output.messages``, as on ``invoke_agent`` spans)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.errors import GraphBubbleUp
from opentelemetry.trace import Span, Status, StatusCode
from orchestrace import semconv as sc
from orchestrace.messages import input_messages, output_messages

from orchestrace_langgraph.content import capture_messages, get_config

_OK = Status(StatusCode.OK)


def set_outcome(span: Span, exc: BaseException | None) -> None:
    """OK when the span's work ended normally or by LangGraph's control flow (an interrupt, a
    ``Command.PARENT``); ERROR with the exception recorded when it failed or was cancelled, as the SDK's
    spans; no status when the caller closed a stream early (``GeneratorExit``: its choice, no failure)."""
    if exc is None or isinstance(exc, GraphBubbleUp):
        span.set_status(_OK)
    elif not isinstance(exc, GeneratorExit):
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:512]))


def input_attributes(value: Any) -> dict[str, Any]:
    config = get_config()
    if not config.capture_content:
        return {}
    captured = capture_messages(input_messages(value), config)
    return captured.attributes(sc.GEN_AI_INPUT_MESSAGES) if captured is not None else {}


def set_output(span: Span, value: Any) -> None:
    config = get_config()
    if value is None or not config.capture_content:
        return
    captured = capture_messages(output_messages(value), config)
    if captured is not None:
        span.set_attributes(captured.attributes(sc.GEN_AI_OUTPUT_MESSAGES))


def stream_payload(chunk: Any, stream_kwargs: Mapping[str, Any]) -> Any:
    """What a chunk of ``Pregel.stream`` carries without LangGraph's wrapping, which depends on the call:
    ``(mode, payload)`` for a list of modes (``invoke`` streams ``["updates", "values"]``), a namespace in
    front with ``subgraphs=True``, ``{"type", "data", ...}`` with ``version="v2"``. The last chunk of an
    ``invoke`` is then the final state, the run's output."""
    if stream_kwargs.get("version") == "v2" and isinstance(chunk, Mapping) and "data" in chunk:
        return chunk["data"]
    several = isinstance(stream_kwargs.get("stream_mode"), list | tuple)
    if stream_kwargs.get("subgraphs") and isinstance(chunk, tuple) and len(chunk) >= 2:
        chunk = chunk[1:] if several else chunk[1]
    if several and isinstance(chunk, tuple) and len(chunk) == 2:
        chunk = chunk[1]
    return chunk
