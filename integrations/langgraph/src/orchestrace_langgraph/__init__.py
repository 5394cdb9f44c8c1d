"""OpenTelemetry auto-instrumentation of LangGraph that records the orchestration.

``LangGraphInstrumentor().instrument(tracer_provider=None)`` patches:

* ``Pregel.stream`` / ``Pregel.astream``: one ``invoke_workflow {graph}`` span per graph run (subgraphs too);
* ``langgraph.pregel._runner.run_with_retry`` / ``arun_with_retry``: one span per node execution
  (``{node}``, or ``invoke_agent {node}`` for agents), with routing, ``Send``, handoff and interrupt events;
* ``BranchSpec._finish``: the choice of each conditional edge;
* ``PregelLoop.tick`` / ``PregelLoop.after_tick``: static breakpoints (``interrupt_before`` / ``_after``);
* ``BaseTool.run`` / ``BaseTool.arun``: ``execute_tool {name}``;
* and, through LangChain's configure hook (not a patch), a callback handler on every callback manager:
  ``chat {model}`` spans with token usage.

Mark a node as an agent with ``add_node(name, fn, metadata={AGENT_METADATA_KEY: True})`` (optionally
``AGENT_ROLE_METADATA_KEY: "<role>"``); compiled graphs used as nodes are agents without a marker.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import langchain_core.tools
import langgraph.graph._branch
import langgraph.pregel
import langgraph.pregel._loop
import langgraph.pregel._runner
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap
from wrapt import wrap_function_wrapper

from orchestrace_langgraph.actors import InterruptLog, NamespaceIndex

try:  # wrapt >= 2: the base of every proxy (its ObjectProxy is a subclass that FunctionWrapper is not)
    from wrapt import BaseObjectProxy as _Proxy
except ImportError:  # wrapt 1.x
    from wrapt import ObjectProxy as _Proxy
from orchestrace_langgraph.breakpoints import BreakpointTracer
from orchestrace_langgraph.chat_models import ChatModelCallbackHandler, configure_hook
from orchestrace_langgraph.episodes import EpisodeId, Episodes
from orchestrace_langgraph.nodes import AGENT_METADATA_KEY, AGENT_ROLE_METADATA_KEY, NodeTracer
from orchestrace_langgraph.package import _instruments
from orchestrace_langgraph.routing import branch_finish
from orchestrace_langgraph.tools import ToolTracer
from orchestrace_langgraph.version import __version__
from orchestrace_langgraph.workflow import WorkflowTracer

__all__ = ["AGENT_METADATA_KEY", "AGENT_ROLE_METADATA_KEY", "LangGraphInstrumentor", "__version__"]

# (object, attribute) pairs patched by ``_instrument``, undone by ``_uninstrument``.
_PATCHES: tuple[tuple[Any, str], ...] = (
    (langgraph.pregel.Pregel, "stream"),
    (langgraph.pregel.Pregel, "astream"),
    (langgraph.pregel._runner, "run_with_retry"),
    (langgraph.pregel._runner, "arun_with_retry"),
    (langgraph.graph._branch.BranchSpec, "_finish"),
    (langgraph.pregel._loop.PregelLoop, "tick"),
    (langgraph.pregel._loop.PregelLoop, "after_tick"),
    (langchain_core.tools.BaseTool, "run"),
    (langchain_core.tools.BaseTool, "arun"),
)


class LangGraphInstrumentor(BaseInstrumentor):
    """Instruments LangGraph (and LangChain tools and chat models) for orchestrace.

    ``instrument(tracer_provider=None, episode_id=None)``: ``episode_id(config) -> str | None`` names the
    episode a run belongs to (``orchestrace.episode.id``). By default (or when it returns ``None``) each run
    with new input is an episode of its own, even on a reused ``thread_id``, and a resume joins the episode
    it continues (see ``orchestrace_langgraph.episodes``).
    """

    _handler: ChatModelCallbackHandler | None = None
    _wrappers: tuple[Any, ...] = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        tracer = trace.get_tracer(__name__, __version__, kwargs.get("tracer_provider"))
        episode_id: EpisodeId | None = kwargs.get("episode_id")
        interrupts = InterruptLog()
        namespaces = NamespaceIndex()
        workflows = WorkflowTracer(tracer, interrupts, Episodes(episode_id))
        nodes = NodeTracer(tracer, namespaces, interrupts)
        breakpoints = BreakpointTracer(interrupts)
        tools = ToolTracer(tracer, namespaces)
        self._handler = ChatModelCallbackHandler(tracer, namespaces)
        wrappers: tuple[Any, ...] = (
            workflows.stream, workflows.astream, nodes.run_with_retry, nodes.arun_with_retry,
            branch_finish, breakpoints.tick, breakpoints.after_tick, tools.run, tools.arun,
        )
        for (owner, attribute), wrapper in zip(_PATCHES, wrappers, strict=True):
            wrap_function_wrapper(owner, attribute, wrapper)
        self._wrappers = wrappers
        configure_hook.install(self._handler)

    def _uninstrument(self, **kwargs: Any) -> None:
        for (owner, attribute), wrapper in zip(_PATCHES, self._wrappers, strict=True):
            _unpatch(owner, attribute, wrapper)
        self._wrappers = ()
        configure_hook.install(None)
        if self._handler is not None:
            # Managers created while instrumented keep the handler object; it goes quiet.
            self._handler.enabled = False
            self._handler = None


def _unpatch(owner: Any, attribute: str, wrapper: Any) -> None:
    """Remove our wrapper from ``owner.attribute``, also when another instrumentor wrapped on top of it and
    left its wrapper there (OpenLLMetry's LangChain instrumentor does not undo its ``Pregel.stream`` patch):
    plain ``unwrap`` would then remove theirs and leave ours in place."""
    current = owner.__dict__.get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)
    outer: Any = None
    while isinstance(current, _Proxy):
        if getattr(current, "_self_wrapper", None) == wrapper:
            if outer is None:
                unwrap(owner, attribute)
            else:
                outer.__wrapped__ = current.__wrapped__
            return
        outer, current = current, current.__wrapped__
