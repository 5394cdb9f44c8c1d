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
from opentelemetry.trace import Span, Tracer
from opentelemetry.util.types import AttributeValue
from orchestrace import semconv as sc
from orchestrace.context import traced_by_caller
from orchestrace.decorators import decorated_spec
from orchestrace.failsafe import failsafe
from orchestrace.invocation import ToolSpec

from orchestrace_langgraph.actors import NamespaceIndex, parent_context, with_own_span
from orchestrace_langgraph.content import capture, content_ref
from orchestrace_langgraph.values import set_outcome

_MAX_DESCRIPTION = 512
# Where a LangChain tool keeps the function a run calls: StructuredTool / Tool, or a BaseTool subclass's
# own method; an async run falls back to the sync function (run in an executor) when there is no coroutine.
_SYNC_FUNCTIONS = ("func", "_run")
_ASYNC_FUNCTIONS = ("coroutine", "func", "_arun")


class ToolTracer:
    def __init__(self, tracer: Tracer, namespaces: NamespaceIndex) -> None:
        self._tracer = tracer
        self._namespaces = namespaces

    def run(self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Any:
        started = self._start(instance, args, kwargs, _SYNC_FUNCTIONS)
        if started is None:
            return wrapped(*args, **kwargs)
        span, context = started
        token = otel_context.attach(context)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _finish(span, None, exc)
            raise
        finally:
            otel_context.detach(token)
        _finish(span, result, None)
        return result

    def arun(self, wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Awaitable[Any]:
        return self._arun(wrapped, instance, args, kwargs)

    async def _arun(self, wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        started = self._start(instance, args, kwargs, _ASYNC_FUNCTIONS)
        if started is None:
            return await wrapped(*args, **kwargs)
        span, context = started
        token = otel_context.attach(context)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            _finish(span, None, exc)
            raise
        finally:
            otel_context.detach(token)
        _finish(span, result, None)
        return result

    @failsafe(None)
    def _start(self, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               functions: tuple[str, ...]) -> tuple[Span, otel_context.Context] | None:
        """The tool call's span, and the context to run the tool in; ``functions``: the tool's attributes
        that may hold the function this call runs."""
        name = str(getattr(tool, "name", type(tool).__name__))
        tool_input = args[0] if args else kwargs.get("tool_input")
        attrs: dict[str, AttributeValue] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: name,
            sc.GEN_AI_TOOL_TYPE: "function",
            sc.ORCH_INPUT_REF: content_ref(tool_input),
        }
        description = getattr(tool, "description", None)
        if isinstance(description, str) and description:
            attrs[sc.GEN_AI_TOOL_DESCRIPTION] = description[:_MAX_DESCRIPTION]
        call_id = kwargs.get("tool_call_id")
        if isinstance(call_id, str):
            attrs[sc.GEN_AI_TOOL_CALL_ID] = call_id
        captured = capture(tool_input)
        if captured is not None:
            attrs.update(captured.attributes(sc.GEN_AI_TOOL_CALL_ARGUMENTS))
        spec = decorated_spec((getattr(tool, attribute, None) for attribute in functions), ToolSpec)
        if spec is not None and spec.trusted:
            attrs[sc.ORCH_TOOL_TRUSTED] = True
        metadata = (kwargs.get("config") or {}).get("metadata") or {}
        span = self._tracer.start_span(f"{sc.OP_EXECUTE_TOOL} {name}",
                                       context=parent_context(self._namespaces, metadata), attributes=attrs)
        # An @ot.tool function under the tool adds no second span for this call.
        return span, with_own_span(span, traced_by_caller(spec) if spec is not None else None)


def _result_content(result: Any) -> Any:
    if isinstance(result, ToolMessage):
        return result.content
    if isinstance(result, Command):
        return {"goto": result.goto, "graph": result.graph}
    return result


@failsafe(None)
def _finish(span: Span, result: Any, exc: BaseException | None) -> None:
    try:
        if exc is None:
            content = _result_content(result)
            span.set_attribute(sc.ORCH_OUTPUT_REF, content_ref(content))
            captured = capture(content)
            if captured is not None:
                span.set_attributes(captured.attributes(sc.GEN_AI_TOOL_CALL_RESULT))
        set_outcome(span, exc)
    finally:
        span.end()
