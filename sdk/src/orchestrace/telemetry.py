"""The telemetry object: where orchestrace's spans go (a tracer) and what they may carry (capture settings).

Every span orchestrace starts (decorators, ``ot.task``, ``ot.aggregate``, an integration) is started by a
:class:`Telemetry`, and every content decision is made by its :attr:`Telemetry.capture` settings (one frozen
:class:`~orchestrace.config.CaptureConfig`): nothing else reads a process-wide setting.

* ``Telemetry()`` is *the configured one*: the tracer provider ``ot.configure`` installed (else the global
  one) and the capture settings ``ot.configure`` / the environment give, both read when used, so an
  integration instrumented before ``ot.configure`` runs follows it.
* ``Telemetry(tracer_provider=p)`` sends spans to ``p``; ``Telemetry(capture=CaptureConfig(...))`` fixes what
  is captured. ``ot.configure`` returns a telemetry too (a :class:`~orchestrace.tracing.TracingHandle`).
* ``telemetry.scoped(name, version)``: the same provider and settings, spans under an integration's own
  instrumentation scope (``orchestrace_langgraph``...). The SDK's own spans use the scope ``orchestrace``.

An invocation's context carries its telemetry (the SDK-scope one): decorated functions and ``ot.aggregate``
called inside an integration's spans report to that integration's provider with its settings. OTel's
``suppress_instrumentation()`` starts non-recording spans only.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanKind, Tracer, TracerProvider
from opentelemetry.util.types import Attributes

from orchestrace import semconv as sc
from orchestrace.config import CaptureConfig, get_config
from orchestrace.context import BESIDE_KEY, SPAN_KEY
from orchestrace.version import __version__

#: The instrumentation scope of the SDK's own spans (decorators, ``ot.task``, ``ot.aggregate``).
SDK_SCOPE = "orchestrace"
#: Context key: the telemetry of the invocation running there (its SDK-scope root).
TELEMETRY_KEY = otel_context.create_key("orchestrace.telemetry")


class Telemetry:
    """A tracer provider (``None``: the configured one) and capture settings (``None``: the configured ones).

    Cheap to make and safe to share; :meth:`scoped` gives an integration its own instrumentation scope.
    The ``start_*`` methods (see :mod:`orchestrace.instrumentation`) begin invocations with it.
    """

    __slots__ = ("_capture", "_provider", "_scopes", "_tracer", "root", "scope", "version")

    def __init__(self, tracer_provider: TracerProvider | None = None, capture: CaptureConfig | None = None,
                 *, scope: str = SDK_SCOPE, version: str = __version__) -> None:
        self._provider = tracer_provider
        self._capture = capture
        self.scope = scope
        self.version = version
        self._tracer: tuple[object, Tracer] | None = None  # (the provider it came from, the tracer)
        #: The SDK-scope telemetry this one was scoped from (itself when not scoped). An attribute, not a
        #: property: every invocation's context reads it.
        self.root: Telemetry = self
        self._scopes: dict[tuple[str, str], Telemetry] = {}

    @property
    def tracer_provider(self) -> TracerProvider | None:
        """The provider given (``None``: the configured one, else the global one)."""
        return self._provider

    @property
    def capture(self) -> CaptureConfig:
        """What spans may carry: the settings given, else those ``ot.configure`` or the environment set."""
        return self._capture if self._capture is not None else get_config()

    @property
    def tracer(self) -> Tracer:
        """The tracer of this telemetry's scope, from its provider (else the configured, else the global)."""
        provider = self._provider
        if provider is None:
            configured = _configured
            provider = configured._provider if configured is not None else None
        cached = self._tracer
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = trace.get_tracer(self.scope, self.version, provider)
        self._tracer = (provider, tracer)
        return tracer

    def scoped(self, name: str, version: str) -> Telemetry:
        """The same provider and settings, for spans under the instrumentation scope ``name``."""
        key = (name, version)
        found = self._scopes.get(key)
        if found is None:
            found = Telemetry(self._provider, self._capture, scope=name, version=version)
            found.root = self.root
            self._scopes[key] = found
        return found

    def start_span(self, name: str, context: Context, kind: SpanKind = SpanKind.INTERNAL,
                   attributes: Attributes = None, links: Sequence[Link] | None = None,
                   start_time: int | None = None, *, suppressed: bool | None = None) -> Span:
        """A span of this telemetry's tracer; a non-recording one under ``suppress_instrumentation()``
        (``suppressed``: whether it is on, when the caller read it already; else read here)."""
        if suppressed is None:  # the current context read directly: ``get_value`` is one more call
            suppressed = bool(otel_context.get_current().get(_SUPPRESS_INSTRUMENTATION_KEY))
        if suppressed:
            return INVALID_SPAN
        beside = context.get(BESIDE_KEY) if context else None
        if beside is not None and beside is context.get(SPAN_KEY):  # its parent handed it to a worker
            attributes = {**(attributes or {}), sc.ORCH_CONCURRENT: True}
        return self.tracer.start_span(name, context, kind, attributes, links, start_time)  # the API's order


#: The telemetry ``ot.configure`` returned (``None``: not configured; then the global provider is used).
_configured: Telemetry | None = None
#: ``Telemetry()``: the configured telemetry, resolved when used.
DEFAULT = Telemetry()


def set_configured(telemetry: Telemetry | None) -> None:
    global _configured
    _configured = telemetry


def configured() -> Telemetry:
    """The telemetry ``ot.configure`` returned, else :data:`DEFAULT` (the global provider)."""
    return _configured if _configured is not None else DEFAULT


def current(ctx: Context | None = None) -> Telemetry:
    """The telemetry of the invocation running in ``ctx`` (default: the current context), else the
    configured one."""
    ctx = otel_context.get_current() if ctx is None else ctx
    found = ctx.get(TELEMETRY_KEY) if ctx else None
    return found if isinstance(found, Telemetry) else DEFAULT
