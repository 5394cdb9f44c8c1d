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

from langchain_core.runnables.config import DEFAULT_RECURSION_LIMIT, ensure_config, var_child_runnable_config
from langgraph.types import Command
from opentelemetry import context as otel_context
from opentelemetry.util.types import AttributeValue
from orchestrace import semconv as sc
from orchestrace.instrumentation import Telemetry, failsafe, start_workflow

from orchestrace_langgraph import compat, routing
from orchestrace_langgraph.actors import InterruptLog, Run, current_run, parent_context, run_values
from orchestrace_langgraph.content import content_ref
from orchestrace_langgraph.episodes import Episodes, is_resume
from orchestrace_langgraph.values import end, stream_payload


class WorkflowTracer:
    def __init__(self, telemetry: Telemetry, interrupts: InterruptLog, episodes: Episodes) -> None:
        self._telemetry = telemetry
        self._interrupts = interrupts
        self._episodes = episodes

    def stream(self, wrapped: Callable[..., Iterator[Any]], instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Iterator[Any]:
        prepared = self._prepare(instance, args, kwargs)
        if prepared is None:
            return wrapped(*args, **kwargs)
        args, kwargs, config, episode = prepared
        return self._stream(wrapped(*args, **kwargs), instance, config, args, kwargs, episode)

    def astream(self, wrapped: Callable[..., AsyncIterator[Any]], instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        prepared = self._prepare(instance, args, kwargs)
        if prepared is None:
            return wrapped(*args, **kwargs)
        args, kwargs, config, episode = prepared
        return self._astream(wrapped(*args, **kwargs), instance, config, args, kwargs, episode)

    @failsafe(None)
    def _prepare(self, graph: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 ) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any], str | None] | None:
        """The call's arguments (the episode id added where a checkpoint keeps it), the run's config as
        LangGraph will see it (a copy, read once for the episode and the span) and the run's episode."""
        config = _run_config(args[1] if len(args) > 1 else kwargs.get("config"))
        prepared = self._episodes.prepare(graph, config, args, kwargs)
        if prepared is None:
            return args, kwargs, config, None
        return (*prepared[:2], config, prepared[2])

    def _stream(self, inner: Iterator[Any], graph: Any, config: dict[str, Any], args: tuple[Any, ...],
                kwargs: dict[str, Any], episode: str | None) -> Iterator[Any]:
        run = self._start(graph, config, args, kwargs, episode)
        invocation = run.invocation if run is not None else None
        if run is None or invocation is None:
            yield from inner
            return
        last: Any = None
        error: BaseException | None = None
        ctx = invocation.context
        try:
            while True:
                # Attached directly (what ``invocation.resume`` / ``suspend`` do, two calls fewer a chunk).
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
            error = exc
            raise
        finally:
            resumed = invocation.resume()
            try:
                if run.pending_wiring:  # a run that ended recorded them all already
                    routing.record_run_abandoned(run)
                close = getattr(inner, "close", None)
                if close is not None:
                    close()
            finally:
                end(invocation, error, resumed)

    async def _astream(self, inner: AsyncIterator[Any], graph: Any, config: dict[str, Any],
                       args: tuple[Any, ...], kwargs: dict[str, Any], episode: str | None,
                       ) -> AsyncIterator[Any]:
        run = self._start(graph, config, args, kwargs, episode)
        invocation = run.invocation if run is not None else None
        if run is None or invocation is None:
            async for item in inner:
                yield item
            return
        last: Any = None
        error: BaseException | None = None
        ctx = invocation.context
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
            error = exc
            raise
        finally:
            resumed = invocation.resume()
            try:
                if run.pending_wiring:
                    routing.record_run_abandoned(run)
                aclose = getattr(inner, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                end(invocation, error, resumed)

    @failsafe(None)
    def _start(self, graph: Any, config: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               episode: str | None) -> Run | None:
        graph_input = args[0] if args else kwargs.get("input")
        conf = compat.configurable(config)
        nested = compat.is_subgraph_run(conf)
        name = str(config.get("run_name") or graph.get_name()) if not nested else str(graph.get_name())
        thread_id = conf.get("thread_id")
        attrs: dict[str, AttributeValue] = {sc.ORCH_INPUT_REF: content_ref(graph_input)}
        if nested:
            attrs[sc.LANGGRAPH_CHECKPOINT_NS] = compat.checkpoint_ns(conf)
        if thread_id is not None:
            attrs[sc.LANGGRAPH_THREAD_ID] = str(thread_id)
        # No input on a thread continues it from its checkpoint: after a static breakpoint, that resumes it.
        resume = not nested and is_resume(graph_input, thread_id)
        links, again = (self._interrupts.resumed(str(thread_id) if thread_id is not None else None)
                        if resume else ([], ()))
        wiring = compat.graph_wiring(graph)
        run = Run(name, str(thread_id) if thread_id is not None else None,
                  parent=current_run() if nested else None, edges=wiring.edges,
                  routes=wiring.routes, destinations=wiring.destinations)
        # A subgraph's run under the node that runs it, also when a callback tracer's span is current. A
        # swarm invoked as an entrypoint is a conversation turn under the latest GenAI conventions (the
        # framework steers it); any other graph the application's workflow.
        run.own.invocation = invocation = start_workflow(
            self._telemetry, name, episode_id=episode, context=parent_context(), attributes=attrs,
            links=links, values=run_values(run), runner=not nested and wiring.swarm)
        invocation.set_input(graph_input, ref=False)  # its messages, with capture on (the ref is above)
        if resume:
            value = graph_input.resume if isinstance(graph_input, Command) else None
            routing.record_resume(run, value, again)
        return run


def _run_config(given: Any) -> dict[str, Any]:
    """``ensure_config(given)`` as a copy of ours. Most top-level runs pass no config, outside any runnable:
    LangChain's defaults then, made here without its merging and copies."""
    if given is None and var_child_runnable_config.get() is None:
        return {"tags": [], "metadata": {}, "callbacks": None, "recursion_limit": DEFAULT_RECURSION_LIMIT,
                "configurable": {}}
    return dict(ensure_config(given))


@failsafe(None)
def _finish(run: Run, last: Any, stream_kwargs: Mapping[str, Any]) -> None:
    """The run completed: its stop when it is one, and what ``last`` (the last chunk it yielded) carries as
    its output when content is captured, the final state for ``invoke`` (no ref: a whole state is not worth
    hashing)."""
    routing.record_run_end(run)
    output = stream_payload(last, stream_kwargs)
    if run.invocation is not None and output is not None:
        run.invocation.set_output(output, ref=False)
