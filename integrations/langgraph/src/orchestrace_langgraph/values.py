"""How an invocation of ours ends (OK, or ERROR with the exception recorded by
``orchestrace.instrumentation``, or, for LangGraph's control flow, neither an error nor a stop), and what a
run's last chunk carries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.errors import GraphBubbleUp, ParentCommand
from langgraph.types import Command
from orchestrace.instrumentation import Invocation


def end(invocation: Invocation, exc: BaseException | None, token: object = None) -> None:
    """End ``invocation``: OK when its work ended normally or by LangGraph's control flow (an interrupt, a
    ``Command.PARENT``); ERROR with the exception when it failed or was cancelled, as the SDK's spans; no
    status when the caller closed a stream early (``GeneratorExit``: its choice, no failure)."""
    if isinstance(exc, ParentCommand) and exc.args:
        handed_off(invocation, exc.args[0])
    if exc is None or isinstance(exc, GraphBubbleUp):
        invocation.stop(token=token)
    elif isinstance(exc, GeneratorExit):
        invocation.close(token)
    else:
        invocation.fail(exc, token)


def handed_off(invocation: Invocation, command: object) -> None:
    """``invocation`` (a node or a graph run) ended by handing off with ``command``: its output, with capture
    on, is the state update it hands over, else (a bare ``goto``) the command itself. No ref: the run's
    outcome is the handoff, recorded as such."""
    if isinstance(command, Command):
        invocation.set_output(command if command.update is None else command.update, ref=False)


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
