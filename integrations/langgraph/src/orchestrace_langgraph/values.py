"""How an invocation of ours ends: OK, or ERROR with the exception recorded (``orchestrace.instrumentation``
records it), or, for LangGraph's control flow, neither an error nor a stop."""

from __future__ import annotations

from langgraph.errors import GraphBubbleUp
from orchestrace.instrumentation import Invocation


def end(invocation: Invocation, exc: BaseException | None, token: object = None) -> None:
    """End ``invocation``: OK when its work ended normally or by LangGraph's control flow (an interrupt, a
    ``Command.PARENT``); failed by ``exc``; without status when the caller left (``GeneratorExit``, a
    cancellation: not an error of the work)."""
    if exc is None or isinstance(exc, GraphBubbleUp):
        invocation.stop(token=token)
    elif isinstance(exc, Exception):
        invocation.fail(exc, token)
    else:
        invocation.close(token)
