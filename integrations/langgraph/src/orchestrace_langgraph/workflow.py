"""One ``invoke_workflow {graph}`` span per graph run, around ``Pregel.stream`` / ``Pregel.astream``.

Every way of running a graph goes through these two generators (``invoke`` and ``batch`` call ``stream``;
``ainvoke``, ``abatch`` and ``astream_events`` call ``astream``; a subgraph used as a node runs through them
too), so wrapping them gives exactly one span per run. The span's context is attached only while the graph
advances (inside each ``next``), never across a ``yield``: the caller's code between chunks keeps its own
context, and a stream abandoned early (``break``, ``close``, ``aclose``, garbage collection) still ends its
span.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from langchain_core.runnables.config import ensure_config
from langgraph._internal._constants import CONF, CONFIG_KEY_CHECKPOINT_NS, CONFIG_KEY_TASK_ID
from langgraph.types import Command
from opentelemetry import context as otel_context
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue
from orchestrace import semconv as sc
from orchestrace.failsafe import failsafe

from orchestrace_langgraph import routing
from orchestrace_langgraph.actors import InterruptLog, Run, current_run, parent_context, with_run
from orchestrace_langgraph.content import content_ref
from orchestrace_langgraph.episodes import Episodes, is_resume
from orchestrace_langgraph.values import input_attributes, set_outcome, set_output, stream_payload


class WorkflowTracer:
    def __init__(self, tracer: Tracer, interrupts: InterruptLog, episodes: Episodes,
                 scope: Mapping[str, object] | None = None) -> None:
        self._tracer = tracer
        self._interrupts = interrupts
        self._episodes = episodes
        self._scope = scope or {}  # context values of every run (the SDK's tracer, when scoped)

    def stream(self, wrapped: Callable[..., Iterator[Any]], instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Iterator[Any]:
        prepared = self._episodes.prepare(instance, args, kwargs)
        episode = None
        if prepared is not None:
            args, kwargs, episode = prepared
        return self._stream(wrapped(*args, **kwargs), instance, args, kwargs, episode)

    def astream(self, wrapped: Callable[..., AsyncIterator[Any]], instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        prepared = self._episodes.prepare(instance, args, kwargs)
        episode = None
        if prepared is not None:
            args, kwargs, episode = prepared
        return self._astream(wrapped(*args, **kwargs), instance, args, kwargs, episode)

    def _stream(self, inner: Iterator[Any], graph: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any], episode: str | None) -> Iterator[Any]:
        run = self._start(graph, args, kwargs, episode)
        if run is None:
            yield from inner
            return
        ctx = with_run(run, self._scope)
        last: Any = None
        try:
            while True:
                token = otel_context.attach(ctx)
                try:
                    item = last = next(inner)
                except StopIteration:
                    _finish(run, last, kwargs)
                    return
                finally:
                    otel_context.detach(token)
                yield item
        except BaseException as exc:
            _fail(run, exc)
            raise
        finally:
            token = otel_context.attach(ctx)
            try:
                close = getattr(inner, "close", None)
                if close is not None:
                    close()
            finally:
                otel_context.detach(token)
                run.span.end()

    async def _astream(self, inner: AsyncIterator[Any], graph: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any], episode: str | None) -> AsyncIterator[Any]:
        run = self._start(graph, args, kwargs, episode)
        if run is None:
            async for item in inner:
                yield item
            return
        ctx = with_run(run, self._scope)
        last: Any = None
        try:
            while True:
                token = otel_context.attach(ctx)
                try:
                    item = last = await inner.__anext__()
                except StopAsyncIteration:
                    _finish(run, last, kwargs)
                    return
                finally:
                    otel_context.detach(token)
                yield item
        except BaseException as exc:
            _fail(run, exc)
            raise
        finally:
            token = otel_context.attach(ctx)
            try:
                aclose = getattr(inner, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                otel_context.detach(token)
                run.span.end()

    @failsafe(None)
    def _start(self, graph: Any, args: tuple[Any, ...], kwargs: dict[str, Any], episode: str | None,
               ) -> Run | None:
        config: dict[str, Any] = dict(ensure_config(args[1] if len(args) > 1 else kwargs.get("config")))
        graph_input = args[0] if args else kwargs.get("input")
        conf = config.get(CONF) or {}
        nested = CONFIG_KEY_TASK_ID in conf
        name = str(config.get("run_name") or graph.get_name()) if not nested else str(graph.get_name())
        thread_id = conf.get("thread_id")
        attrs: dict[str, AttributeValue] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_WORKFLOW,
            sc.GEN_AI_WORKFLOW_NAME: name,
            sc.OPENINFERENCE_SPAN_KIND: sc.SPAN_KIND_CHAIN,
            sc.ORCH_INPUT_REF: content_ref(graph_input),
            **input_attributes(graph_input),
        }
        if nested:
            attrs[sc.LANGGRAPH_CHECKPOINT_NS] = str(conf.get(CONFIG_KEY_CHECKPOINT_NS, ""))
        if thread_id is not None:
            attrs[sc.LANGGRAPH_THREAD_ID] = str(thread_id)
        if episode is not None:
            attrs[sc.ORCH_EPISODE_ID] = episode
            attrs[sc.GEN_AI_CONVERSATION_ID] = episode
        # No input on a thread continues it from its checkpoint: after a static breakpoint, that resumes it.
        resume = not nested and is_resume(graph_input, thread_id)
        links, again = (self._interrupts.resumed(str(thread_id) if thread_id is not None else None,
                                                 {sc.ORCH_LINK_TYPE: sc.LINK_RESUME_OF})
                        if resume else ([], ()))
        # A subgraph's run under the node that runs it, also when a callback tracer's span is current.
        span = self._tracer.start_span(f"{sc.OP_INVOKE_WORKFLOW} {name}", context=parent_context(),
                                       attributes=attrs, links=links)
        run = Run(span, name, str(thread_id) if thread_id is not None else None,
                  parent=current_run() if nested else None, edges=routing.fixed_edges(graph))
        if resume:
            value = graph_input.resume if isinstance(graph_input, Command) else None
            routing.record_resume(run, value, again)
        return run


@failsafe(None)
def _finish(run: Run, last: Any, stream_kwargs: Mapping[str, Any]) -> None:
    """The run completed: its stop when it is one, status OK, and what ``last`` (the last chunk it yielded)
    carries as its output when content is captured: the final state for ``invoke``."""
    routing.record_run_end(run)
    set_outcome(run.span, None)
    set_output(run.span, stream_payload(last, stream_kwargs))


@failsafe(None)
def _fail(run: Run, exc: BaseException) -> None:
    # An interrupt or a Command.PARENT leaving a subgraph is control flow (status OK); closing a stream is the
    # caller's choice (GeneratorExit: no status).
    set_outcome(run.span, exc)
