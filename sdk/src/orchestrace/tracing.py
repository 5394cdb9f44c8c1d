"""``ot.configure``: where spans go. It returns the configured :class:`~orchestrace.telemetry.Telemetry` (a
:class:`TracingHandle`), the one every orchestrace span uses unless an integration was given another.

Behaviour worth knowing:

* Idempotent. The first call sets tracing up and returns a :class:`TracingHandle`; later calls return the
  same handle, apply the content settings they pass, and add the exporters / ``trace_dir`` they name
  explicitly that are not installed yet (a name is never installed twice). Passing a *different*
  ``tracer_provider`` starts over with that provider (tests use a fresh one each).
* Never replaces an SDK ``TracerProvider`` the application already installed: its processors are added to it.
  Otherwise a new provider (resource from ``service_name`` / ``OTEL_SERVICE_NAME``) becomes the global one.
* ``exporter=None`` reads ``OTEL_TRACES_EXPORTER`` (comma-separated names), default ``otlp``;
  ``OTEL_SDK_DISABLED=true`` turns everything into no-ops.
* ``BatchSpanProcessor`` by default (``batch=False`` exports each span as it ends; the ``memory`` exporter
  always does). The provider flushes and shuts down at interpreter exit.
* ``trace_dir`` writes orchestration traces in-process through the exporter registered under the
  ``orchestrace_exporters`` entry point named ``trace_dir`` (``orchestrace-collector`` registers its
  ``TraceDirExporter``): the SDK never imports the collector. Passing such an exporter as ``exporter`` works
  too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from orchestrace import semconv as sc
from orchestrace import telemetry as _telemetry
from orchestrace.config import CaptureConfig, Redactor, get_config, set_config
from orchestrace.exporters import create_exporter
from orchestrace.failsafe import log_once, logger
from orchestrace.telemetry import Telemetry

ExporterSpec = str | SpanExporter
#: The entry point group (and name) of in-process trace writers: ``configure(trace_dir=...)`` loads one.
EXPORTERS_ENTRY_POINT_GROUP = "orchestrace_exporters"
TRACE_DIR_EXPORTER = "trace_dir"

_lock = threading.RLock()
_handle: TracingHandle | None = None


def _model_call(span: Span) -> bool:
    return (span.attributes or {}).get(sc.GEN_AI_OPERATION_NAME) in sc.MODEL_CALL_OPERATIONS


class _InstalledProcessors(SpanProcessor):
    """Every processor one handle installed, behind a single processor on the provider.

    Shut down at most once, by ``handle.shutdown()`` or by the provider at exit (no second shutdown of the
    exporters), silent afterwards, and a failing child never disturbs the others or the span's owner.
    """

    def __init__(self) -> None:
        self._children: tuple[SpanProcessor, ...] = ()
        self._exporters: tuple[SpanExporter, ...] = ()
        self._lock = threading.Lock()
        self._stopped = False
        #: ``configure(policy_version=...)``: stamped on every model call as it starts.
        self.policy_version: str | None = None

    def add(self, processor: SpanProcessor, exporter: SpanExporter) -> None:
        with self._lock:
            self._children += (processor,)
            self._exporters += (exporter,)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._stopped:
            return
        version = self.policy_version
        if version is not None and _model_call(span):
            span.set_attribute(sc.ORCH_POLICY_VERSION, version)
        for child in self._children:
            try:
                child.on_start(span, parent_context=parent_context)
            except Exception as exc:
                log_once("tracing.on_start", exc)

    def on_end(self, span: ReadableSpan) -> None:
        if self._stopped:
            return
        for child in self._children:
            try:
                child.on_end(span)
            except Exception as exc:
                log_once("tracing.on_end", exc)

    def shutdown(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        for child in self._children:
            try:
                child.shutdown()
            except Exception as exc:
                log_once("tracing.shutdown", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        ok = True
        for child in self._children:
            try:
                ok = child.force_flush(timeout_millis) and ok
            except Exception as exc:
                log_once("tracing.force_flush", exc)
                ok = False
        # The SDK's processors do not pass force_flush on to their exporter; exporters that hold work of
        # their own (the trace_dir writer completes open traces) need it to honour "flush now".
        for exporter in self._exporters:
            try:
                ok = exporter.force_flush(timeout_millis) and ok
            except Exception as exc:
                log_once("tracing.force_flush", exc)
                ok = False
        return ok


class TracingHandle(Telemetry):
    """What ``configure`` set up, as a telemetry: its provider (``tracer_provider``, ``None`` when tracing is
    disabled), the configured capture settings; flush, shut down, and (``memory`` exporter) read the
    finished spans."""

    def __init__(self, tracer_provider: TracerProvider | None) -> None:
        super().__init__(tracer_provider)
        #: The in-memory exporter when ``"memory"`` was requested.
        self.memory_exporter: InMemorySpanExporter | None = None
        self._processors = _InstalledProcessors()
        self._attached = False
        self._installed: set[str] = set()

    def get_finished_spans(self) -> tuple[ReadableSpan, ...]:
        """Spans the ``memory`` exporter holds (empty without one)."""
        return tuple(self.memory_exporter.get_finished_spans()) if self.memory_exporter else ()

    @property
    def dropped_spans(self) -> int:
        """Spans the installed exporters dropped because each alone, even without its content, was larger
        than a request may be (see :mod:`orchestrace.exporters`; logged once)."""
        return sum(int(getattr(exporter, "dropped_spans", 0)) for exporter in self._processors._exporters)

    @property
    def cut_spans(self) -> int:
        """Spans the installed exporters sent without their content because each alone was larger than a
        request may be (logged once)."""
        return sum(int(getattr(exporter, "cut_spans", 0)) for exporter in self._processors._exporters)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export every finished span now. Never raises; ``False`` when something did not flush."""
        return self._processors.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Flush and stop what orchestrace installed; later orchestrace spans go to the global provider."""
        global _handle
        self._processors.shutdown()
        with _lock:
            if _handle is self:
                _handle = None
                _telemetry.set_configured(None)

    def _add(self, key: str, exporter: SpanExporter, batch: bool) -> None:
        provider = self.tracer_provider
        if not isinstance(provider, TracerProvider) or key in self._installed:
            return
        processor: SpanProcessor
        if isinstance(exporter, InMemorySpanExporter):
            self.memory_exporter = self.memory_exporter or exporter
            processor = SimpleSpanProcessor(exporter)  # readable right after a span ends
        else:
            processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self._processors.add(processor, exporter)
        if not self._attached:
            provider.add_span_processor(self._processors)
            self._attached = True
        self._installed.add(key)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def _exporter_specs(exporter: ExporterSpec | Sequence[ExporterSpec] | None) -> list[ExporterSpec]:
    if exporter is None:
        return []
    if isinstance(exporter, str | SpanExporter):
        return [exporter]
    return list(exporter)


def _install(handle: TracingHandle, specs: list[ExporterSpec], endpoint: str | None,
             trace_dir: str | os.PathLike[str] | None, batch: bool, credit: str = "causal",
             headers: Mapping[str, str] | None = None) -> None:
    for spec in specs:
        if isinstance(spec, SpanExporter):
            handle._add(f"instance:{id(spec)}", spec, batch)
            continue
        key = spec.strip().lower() if not spec.strip().lower().startswith("file:") else spec.strip()
        if key in handle._installed:
            continue
        try:
            exporter = create_exporter(spec, endpoint, headers)
        except Exception as exc:  # OTel's exporter cannot read an OTEL_EXPORTER_OTLP_* variable, say
            logger.error("orchestrace: cannot create the exporter %r (%s: %s); its spans are not exported, "
                         "the other exporters get them", spec, type(exc).__name__, exc)
            continue
        if exporter is not None:
            handle._add(key, exporter, batch)
    if trace_dir is not None:
        key = f"trace_dir:{os.fspath(trace_dir)}"
        if key not in handle._installed:
            found = entry_points(group=EXPORTERS_ENTRY_POINT_GROUP, name=TRACE_DIR_EXPORTER)
            try:
                exporter_class = next(iter(found)).load()
            except Exception as exc:  # none registered (StopIteration), or it does not import
                logger.error("orchestrace: trace_dir needs the collector (pip install "
                             "'orchestrace[collector]'); traces are not written to %s (%r)", trace_dir, exc)
                return
            handle._add(key, exporter_class(os.fspath(trace_dir), credit=credit), batch)


def _provider(service_name: str | None) -> TracerProvider:
    """The application's SDK provider if it set one, else a new global one."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    attributes = {SERVICE_NAME: service_name} if service_name else {}
    provider = TracerProvider(resource=Resource.create(attributes))
    trace.set_tracer_provider(provider)
    return provider


def configure(
    service_name: str | None = None,
    *,
    exporter: ExporterSpec | Sequence[ExporterSpec] | None = None,
    endpoint: str | None = None,
    capture_content: bool | None = None,
    trace_dir: str | os.PathLike[str] | None = None,
    credit: str = "causal",
    max_content_bytes: int | None = None,
    redact: Redactor | None = None,
    batch: bool = True,
    tracer_provider: TracerProvider | None = None,
    headers: Mapping[str, str] | None = None,
    full_prompt: bool | None = None,
    policy_version: str | None = None,
) -> TracingHandle:
    """Set up tracing for orchestrace (see the module docstring) and return the configured telemetry (pass
    it to an instrumentor: ``instrument(telemetry=...)``). Never raises.

    ``exporter``: a name (``otlp``, ``otlp-grpc``, ``jaeger``, ``console``, ``memory``, ``file:PATH``,
    ``none``), a ``SpanExporter``, or a list of them. ``endpoint``: the OTLP base URL (``/v1/traces`` is
    added for http) or gRPC address. ``capture_content`` / ``max_content_bytes`` / ``redact`` /
    ``full_prompt``: see :class:`orchestrace.config.CaptureConfig`. ``trace_dir``: also write finished
    orchestration traces there in-process (needs ``orchestrace-collector``), crediting rewards by
    ``credit`` (``causal`` or ``uniform``, as ``orchestrace convert --credit``). ``tracer_provider``: use
    this SDK provider (not made global) instead of the global one. ``headers``: sent with every OTLP
    export, e.g. ``{"Authorization": "Bearer <token>"}`` for a collector that requires a token (default:
    the standard ``OTEL_EXPORTER_OTLP_HEADERS``). ``policy_version``: the version of the policy (weights)
    serving the app's model calls, on each of them (``orchestrace.policy.version``: each turn's
    ``policy_version``); call ``configure(policy_version=...)`` again when it changes.
    """
    global _handle
    with _lock:
        try:
            base = get_config() if _handle is not None else CaptureConfig.from_env()
            set_config(base.updated(capture_content, max_content_bytes, redact, full_prompt))

            specs = _exporter_specs(exporter)
            if _handle is not None and tracer_provider in (None, _handle.tracer_provider):
                _install(_handle, specs, endpoint, trace_dir, batch, credit, headers)
                if policy_version is not None:
                    _handle._processors.policy_version = policy_version
                return _handle

            if _env_true("OTEL_SDK_DISABLED"):
                _handle = TracingHandle(None)
                _telemetry.set_configured(_handle)
                return _handle

            provider = tracer_provider if tracer_provider is not None else _provider(service_name)
            handle = TracingHandle(provider)
            if not specs:
                env = os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
                specs = [name for name in env.split(",") if name.strip()]
            _install(handle, specs, endpoint, trace_dir, batch, credit, headers)
            handle._processors.policy_version = policy_version
            _handle = handle
            _telemetry.set_configured(handle)
            return handle
        except Exception as exc:
            log_once("tracing.configure", exc)
            return _handle or TracingHandle(None)
