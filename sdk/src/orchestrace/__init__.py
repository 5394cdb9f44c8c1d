"""orchestrace: OpenTelemetry spans for multi-agent LLM systems.

``import orchestrace as ot``::

    ot.configure("my-app", exporter="console")

    @ot.agent(role="researcher")
    async def researcher(question: str) -> str: ...

    with ot.task("task-1", topology="star"):
        ...

Spans follow the OTel GenAI semantic conventions; orchestration (spawn, delegate, message, aggregate,
decide, stop, human intervention, safety, reward) is encoded as described in :mod:`orchestrace.semconv`.
"""

from orchestrace.config import CaptureConfig
from orchestrace.content import content_ref
from orchestrace.context import (
    AgentFrame,
    ThreadPoolExecutor,
    attach,
    current_agent,
    extract,
    gather,
    inject,
    wrap_context,
)
from orchestrace.decorators import agent, llm, tool
from orchestrace.orchestration import (
    Aggregation,
    aggregate,
    decide,
    delegate,
    human_intervention,
    message,
    rejected_rewards,
    reward,
    safety_event,
    set_usage,
    spawn,
    stop,
)
from orchestrace.task import TaskRun, task
from orchestrace.telemetry import Telemetry
from orchestrace.tracing import TracingHandle, configure
from orchestrace.version import __version__

__all__ = [
    "AgentFrame",
    "Aggregation",
    "CaptureConfig",
    "TaskRun",
    "Telemetry",
    "ThreadPoolExecutor",
    "TracingHandle",
    "__version__",
    "agent",
    "aggregate",
    "attach",
    "configure",
    "content_ref",
    "current_agent",
    "decide",
    "delegate",
    "extract",
    "gather",
    "human_intervention",
    "inject",
    "llm",
    "message",
    "rejected_rewards",
    "reward",
    "safety_event",
    "set_usage",
    "spawn",
    "stop",
    "task",
    "tool",
    "wrap_context",
]
