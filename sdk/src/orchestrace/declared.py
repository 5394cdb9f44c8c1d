"""What ``@ot.agent`` and ``@ot.tool`` leave on the function they decorate: the spec of its invocations.

Read by the orchestration events (``ot.spawn(fn)`` names the agent ``fn`` declared) and by integrations that
trace a decorated function's calls themselves (``instrumentation.declared_agent`` / ``declared_tool``). A
module of its own, importing nothing of the SDK: the events are recorded below the invocations that define
the specs (``invocation.Invocation.events``), so they cannot import them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, Protocol

#: The attributes holding an ``@ot.agent`` function's ``AgentSpec``, an ``@ot.tool`` function's ``ToolSpec``.
AGENT = "_orchestrace_agent"
TOOL = "_orchestrace_tool"


class DeclaredAgent(Protocol):
    """What the events read of an agent's spec."""

    name: str
    role: str | None


def declare(func: Any, key: str, spec: object) -> None:
    """Leave ``spec`` on ``func`` under ``key`` (:data:`AGENT`, :data:`TOOL`)."""
    with contextlib.suppress(AttributeError, TypeError):  # builtins and the like take no attributes
        setattr(func, key, spec)


def declared_spec(candidates: Iterable[Any], key: str) -> Any:
    """The spec the first of ``candidates`` declared under ``key``, or ``None``: lets ``ot.spawn(fn)`` name
    the agent it will start, and an integration that traces a decorated function's calls itself keep each
    call to one span (``context.traced_by_caller``)."""
    for func in candidates:
        spec = getattr(func, key, None)
        if spec is not None:
            return spec
    return None


def declared_agent_of(agent: Any) -> DeclaredAgent | None:
    """The spec of ``agent`` when it is an ``@ot.agent`` function."""
    spec: DeclaredAgent | None = declared_spec((agent,), AGENT)
    return spec
