"""``execute_tool {name}`` spans around ``BaseTool.run`` / ``BaseTool.arun`` (ToolNode, or any tool use).

Wrapping the tool (rather than listening to callbacks) lets the span's context be attached while the tool
runs, so spans the tool itself creates nest under it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command
from opentelemetry import context as otel_context
from orchestrace.instrumentation import (
    Invocation,
    Telemetry,
    already_traced,
    declared_tool,
    failsafe,
    start_tool,
)

from orchestrace_langgraph.actors import NamespaceIndex, Own, own_values, parent_context
from orchestrace_langgraph.values import end

_MAX_DESCRIPTION = 512
# Where a LangChain tool keeps the function a run calls: StructuredTool / Tool, or a BaseTool subclass's
# own method; an async run falls back to the sync function (run in an executor) when there is no coroutine.
_SYNC_FUNCTIONS = ("func", "_run")
_ASYNC_FUNCTIONS = ("coroutine", "func", "_arun")


class ToolTracer:
    def __init__(self, telemetry: Telemetry, namespaces: NamespaceIndex) -> None:
        self._telemetry = telemetry
        self._namespaces = namespaces

    def run(self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Any:
        invocation = self._start(instance, args, kwargs, _SYNC_FUNCTIONS)
        if invocation is None:
            return wrapped(*args, **kwargs)
        token = otel_context.attach(invocation.context)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _finish(invocation, None, exc)
            raise
        finally:
            otel_context.detach(token)
        _finish(invocation, result, None)
        return result

    def arun(self, wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Awaitable[Any]:
        return self._arun(wrapped, instance, args, kwargs)

    async def _arun(self, wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        invocation = self._start(instance, args, kwargs, _ASYNC_FUNCTIONS)
        if invocation is None:
            return await wrapped(*args, **kwargs)
        token = otel_context.attach(invocation.context)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            _finish(invocation, None, exc)
            raise
        finally:
            otel_context.detach(token)
        _finish(invocation, result, None)
        return result

    @failsafe(None)
    def _start(self, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               functions: tuple[str, ...]) -> Invocation | None:
        """The tool call's invocation; ``functions``: the tool's attributes that may hold the function this
        call runs."""
        name = str(getattr(tool, "name", type(tool).__name__))
        description = getattr(tool, "description", None)
        call_id = kwargs.get("tool_call_id")
        declared = declared_tool(getattr(tool, attribute, None) for attribute in functions)
        metadata = (kwargs.get("config") or {}).get("metadata") or {}
        own = Own()
        # An @ot.tool function under the tool adds no second span for this call.
        invocation = start_tool(
            self._telemetry, name, call_id=call_id if isinstance(call_id, str) else None,
            description=description[:_MAX_DESCRIPTION] if isinstance(description, str) else None,
            trusted=declared is not None and declared.trusted,
            arguments=args[0] if args else kwargs.get("tool_input"),
            context=parent_context(self._namespaces, metadata),
            values={**own_values(own), **already_traced(declared)})
        own.invocation = invocation
        return invocation


def _result_content(result: Any) -> Any:
    if isinstance(result, ToolMessage):
        return result.content
    if isinstance(result, Command):
        return {"goto": result.goto, "graph": result.graph}
    return result


@failsafe(None)
def _finish(invocation: Invocation, result: Any, exc: BaseException | None) -> None:
    if exc is None:
        invocation.stop(_result_content(result))
    else:
        end(invocation, exc)
