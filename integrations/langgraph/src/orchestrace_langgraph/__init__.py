"""OpenTelemetry auto-instrumentation of LangGraph that records the orchestration.

``LangGraphInstrumentor().instrument(telemetry=None, tracer_provider=None, episode_id=None)`` patches (see
``compat``, the one module that knows LangGraph's internals; a target a LangGraph version lacks is skipped
with a warning):

* ``Pregel.stream`` / ``Pregel.astream``: one ``invoke_workflow {graph}`` span per graph run (subgraphs too);
* ``langgraph.pregel._runner.run_with_retry`` / ``arun_with_retry``: one span per node execution
  (``{node}``, or ``invoke_agent {node}`` for agents), with routing, ``Send``, handoff and interrupt events;
* ``BranchSpec._finish``: the choice of each conditional edge;
* ``langgraph.pregel._write._assemble_writes``: the ``Command`` a node returned (where its writers turn it
  into writes);
* ``PregelLoop.tick`` / ``PregelLoop.after_tick``: static breakpoints (``interrupt_before`` / ``_after``);
* ``BaseTool.run`` / ``BaseTool.arun``: ``execute_tool {name}``;
* and, through LangChain's configure hook (not a patch), a callback handler on every callback manager:
  ``chat {model}`` spans with token usage.

Every span is recorded through the SDK's public API (``orchestrace.instrumentation``) with one telemetry:
``telemetry`` (what ``ot.configure`` returns), else one with ``tracer_provider`` (else the configured
provider) and the configured capture settings. The SDK's decorated functions (``@ot.tool``, ``@ot.agent``)
inside a graph run report to the same telemetry; under OTel's ``suppress_instrumentation()`` nothing is
recorded.

Mark a node as an agent with ``add_node(name, fn, metadata={AGENT_METADATA_KEY: True})`` (optionally
``AGENT_ROLE_METADATA_KEY: "<role>"``); compiled graphs used as nodes are agents without a marker.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap
from orchestrace.instrumentation import Telemetry
from wrapt import wrap_function_wrapper

from orchestrace_langgraph import compat
from orchestrace_langgraph.actors import InterruptLog, NamespaceIndex

try:  # wrapt >= 2: the base of every proxy (its ObjectProxy is a subclass that FunctionWrapper is not)
    from wrapt import BaseObjectProxy as _Proxy
except ImportError:  # wrapt 1.x
    from wrapt import ObjectProxy as _Proxy
from orchestrace_langgraph.breakpoints import BreakpointTracer
from orchestrace_langgraph.chat_models import ChatModelCallbackHandler, configure_hook
from orchestrace_langgraph.episodes import EpisodeId, Episodes
from orchestrace_langgraph.nodes import (
    AGENT_METADATA_KEY,
    AGENT_ROLE_METADATA_KEY,
    NodeTracer,
    config_context,
)
from orchestrace_langgraph.package import _instruments
from orchestrace_langgraph.routing import branch_finish, channel_write
from orchestrace_langgraph.tools import ToolTracer
from orchestrace_langgraph.version import __version__
from orchestrace_langgraph.workflow import WorkflowTracer

__all__ = ["AGENT_METADATA_KEY", "AGENT_ROLE_METADATA_KEY", "LangGraphInstrumentor", "__version__"]


class LangGraphInstrumentor(BaseInstrumentor):
    """Instruments LangGraph (and LangChain tools and chat models) for orchestrace.

    ``instrument(telemetry=None, tracer_provider=None, episode_id=None)``: ``telemetry`` (an
    ``orchestrace.instrumentation.Telemetry``, e.g. what ``ot.configure`` returns) decides where spans go and
    what they carry; without one, the configured telemetry (read when used), on ``tracer_provider`` when
    given. ``episode_id(config) -> str | None`` names the episode a run belongs to
    (``orchestrace.episode.id``). By default (or when it returns ``None``) each run with new input is an
    episode of its own, even on a reused ``thread_id``, and a resume joins the episode it continues (see
    ``orchestrace_langgraph.episodes``).
    """

    _handler: ChatModelCallbackHandler | None = None
    _patched: tuple[tuple[Any, str, Any], ...] = ()  # (owner, attribute, wrapper) of each patch applied

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        given: Telemetry | None = kwargs.get("telemetry")
        telemetry = (given or Telemetry(kwargs.get("tracer_provider"))).scoped(__name__, __version__)
        episode_id: EpisodeId | None = kwargs.get("episode_id")
        interrupts = InterruptLog()
        namespaces = NamespaceIndex()
        workflows = WorkflowTracer(telemetry, interrupts, Episodes(episode_id))
        nodes = NodeTracer(telemetry, namespaces, interrupts)
        breakpoints = BreakpointTracer(interrupts)
        tools = ToolTracer(telemetry, namespaces)
        self._handler = ChatModelCallbackHandler(telemetry, namespaces)
        wrappers: tuple[tuple[compat.Patch, Any], ...] = (
            (compat.STREAM, workflows.stream), (compat.ASTREAM, workflows.astream),
            (compat.RUN_WITH_RETRY, nodes.run_with_retry), (compat.ARUN_WITH_RETRY, nodes.arun_with_retry),
            (compat.BRANCH_FINISH, branch_finish), (compat.ASSEMBLE_WRITES, channel_write),
            (compat.TICK, breakpoints.tick), (compat.AFTER_TICK, breakpoints.after_tick),
            (compat.TOOL_RUN, tools.run), (compat.TOOL_ARUN, tools.arun),
            (compat.CONFIG_CONTEXT, config_context),
        )
        patched = []
        for patch, wrapper in wrappers:
            owner = compat.resolve(patch)  # None (with a warning) when this LangGraph lacks it
            if owner is not None:
                wrap_function_wrapper(owner, patch.attribute, wrapper)
                patched.append((owner, patch.attribute, wrapper))
        self._patched = tuple(patched)
        configure_hook.install(self._handler)

    def _uninstrument(self, **kwargs: Any) -> None:
        for owner, attribute, wrapper in self._patched:
            _unpatch(owner, attribute, wrapper)
        self._patched = ()
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
