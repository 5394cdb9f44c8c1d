"""OpenTelemetry auto-instrumentation of the OpenAI Agents SDK that records the orchestration.

``OpenAIAgentsInstrumentor().instrument(telemetry=None, tracer_provider=None)`` adds one tracing processor to
the Agents SDK (``agents.add_trace_processor``): the processors already there (the SDK's own exporter, the
user's) stay, and nothing is sent anywhere but to the OpenTelemetry tracer provider. Every ``Runner.run``,
``run_sync`` and ``run_streamed`` then gives orchestrace spans: agents, handoffs, agents used as tools,
function tools, guardrails that tripped, and model calls with their messages, tools and usage (see
``orchestrace_openai_agents.processor`` for the mapping), also from models that trace nothing themselves
(``orchestrace_openai_agents.model_calls``). Spans are recorded through the SDK's public API
(``orchestrace.instrumentation``) with ``telemetry`` (what ``ot.configure`` returns), else one with
``tracer_provider`` (else the configured provider, read when used), which also decides what content they
carry.

The Agents SDK reports nothing while its tracing is disabled (``RunConfig(tracing_disabled=True)``,
``OPENAI_AGENTS_DISABLE_TRACING=1``); ``set_trace_processors`` replaces every processor, this one too (call
``instrument()`` after it). Model inputs and outputs come only with ``trace_include_sensitive_data`` (the
default); usage comes always.

Quiet by default: while instrumented, the SDK's own exporter's "OPENAI_API_KEY is not set, skipping trace
export" (logged for every batch it cannot send to OpenAI, which it then does not send) is filtered out of the
``openai.agents`` logger; nothing else changes (with a key, traces still go to OpenAI as before).
``ORCHESTRACE_QUIET=false`` keeps the message.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Collection
from typing import Any

from agents import add_trace_processor
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap
from orchestrace.instrumentation import Telemetry, quiet
from wrapt import wrap_function_wrapper

from orchestrace_openai_agents._telemetry import Recorder
from orchestrace_openai_agents.model_calls import GET_MODEL, RUN_LOOP_MODULE, ModelCalls
from orchestrace_openai_agents.package import _instruments
from orchestrace_openai_agents.processor import OrchestraceProcessor, model_replied
from orchestrace_openai_agents.version import __version__

__all__ = ["OpenAIAgentsInstrumentor", "__version__"]

_processor: OrchestraceProcessor | None = None
_AGENTS_LOGGER = "openai.agents"
_NO_KEY = "OPENAI_API_KEY is not set, skipping trace export"


class _NoKeyComplaint(logging.Filter):
    """Drops the SDK exporter's complaint that it has no key (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _NO_KEY


_QUIET = _NoKeyComplaint()


def _registered() -> OrchestraceProcessor:
    """The processor, added to the Agents SDK once per process (instrumenting again re-enables it)."""
    global _processor
    if _processor is None:
        _processor = OrchestraceProcessor()
        add_trace_processor(_processor)
    return _processor


class OpenAIAgentsInstrumentor(BaseInstrumentor):
    """Instruments the OpenAI Agents SDK for orchestrace."""

    _run_loop: Any = None  # the module whose ``get_model`` is wrapped, while it is

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        given: Telemetry | None = kwargs.get("telemetry")
        telemetry = (given or Telemetry(kwargs.get("tracer_provider"))).scoped(__name__, __version__)
        processor = _registered()
        processor.telemetry = Recorder(telemetry)
        if quiet():
            logging.getLogger(_AGENTS_LOGGER).addFilter(_QUIET)
        run_loop = importlib.import_module(RUN_LOOP_MODULE)
        if callable(getattr(run_loop, GET_MODEL, None)):
            calls = ModelCalls(lambda: processor.telemetry, model_replied)
            wrap_function_wrapper(run_loop, GET_MODEL, calls.get_model)
            self._run_loop = run_loop
        else:
            warnings.warn(f"orchestrace_openai_agents: {RUN_LOOP_MODULE}.{GET_MODEL} is not in this Agents "
                          "SDK version; calls of models that open no span of their own are not recorded",
                          RuntimeWarning, stacklevel=2)

    def _uninstrument(self, **kwargs: Any) -> None:
        logging.getLogger(_AGENTS_LOGGER).removeFilter(_QUIET)
        if _processor is not None:
            _processor.telemetry = None  # it stays registered, and goes quiet
        if self._run_loop is not None:
            unwrap(self._run_loop, GET_MODEL)  # models wrapped meanwhile pass their calls straight through
            self._run_loop = None
