"""What orchestrace captures: one frozen object read from arguments and environment variables.

Every content decision of a span is made by the :class:`CaptureConfig` of the telemetry that starts it
(:class:`orchestrace.telemetry.Telemetry`); the process-wide settings below (what ``ot.configure`` and the
environment give) are read in one place only, by a telemetry that was not given its own.

Environment variables (arguments to :func:`orchestrace.configure` win over them):

* ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, with its GenAI meaning: ``true`` (``1``, ``yes``,
  ``on``), ``span_only`` or ``span_and_event`` put content on spans; ``event_only`` asks for content in
  GenAI events only, which orchestrace does not emit, so spans get none; ``false`` / ``no_content`` / unset:
  none. Without content, spans carry only ``sha256:`` content refs.
* ``ORCHESTRACE_MAX_CONTENT_BYTES``: size limit of each captured content attribute (UTF-8 bytes, default
  1 MiB: a model call's whole prompt and whole completion each, as real agent prompts need; what is cut is
  counted on the span and flagged on the turn). A value that is not a size (not an integer, or negative),
  here or as ``configure(max_content_bytes=...)``, is logged and ignored: OpenTelemetry's configuration rule
  for a value out of range, which gives a negative number no meaning of its own (``-1`` is not "no limit").
  ``CaptureConfig(max_content_bytes=-1)`` raises ``ValueError``, as OTel's ``SpanLimits`` does.
* ``ORCHESTRACE_FULL_PROMPT``: ``true`` exports the whole prompt (every input message) on each model-call span
  that has captured content, for backends that show one span at a time. Off by default: a model call
  (``@ot.llm``, ``start_model_call``, the LangGraph and OpenAI Agents integrations) then carries only the
  messages no earlier call of its trace exported, and names the call whose prompt and completion begin its
  prompt (``orchestrace.content.prefix_*``; linear size). The
  collector rebuilds the same prompts either way.
* ``ORCHESTRACE_QUIET``: ``false`` gives back the third-party messages orchestrace keeps quiet by default
  (the OTLP exporter's retries and errors when nothing listens at its endpoint, and the OpenAI Agents SDK's
  "OPENAI_API_KEY is not set, skipping trace export"); see :func:`quiet`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from orchestrace.failsafe import logger

ENV_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENV_MAX_CONTENT_BYTES = "ORCHESTRACE_MAX_CONTENT_BYTES"
ENV_FULL_PROMPT = "ORCHESTRACE_FULL_PROMPT"
ENV_QUIET = "ORCHESTRACE_QUIET"
DEFAULT_MAX_CONTENT_BYTES = 1 << 20

#: A redaction hook: receives captured text and returns what may leave the process.
Redactor = Callable[[str], str]

#: Values of the GenAI variable that put content on spans.
_ON_SPANS = frozenset({"1", "true", "yes", "on", "span_only", "span_and_event"})
_ON = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """Content capture settings.

    ``redact`` runs on every piece of captured text before it is put on a span (content refs are digests of
    the original content and are computed without it). ``full_prompt``: every captured model call carries
    its whole prompt, not only the messages no earlier call of the trace exported.
    """

    capture_content: bool = False
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    redact: Redactor | None = None
    full_prompt: bool = False

    def __post_init__(self) -> None:
        if _size(self.max_content_bytes) is None:
            raise ValueError(f"max_content_bytes must be a non-negative integer: {self.max_content_bytes!r}")

    @classmethod
    def from_env(
        cls,
        capture_content: bool | None = None,
        max_content_bytes: int | None = None,
        redact: Redactor | None = None,
        full_prompt: bool | None = None,
    ) -> CaptureConfig:
        """The environment's settings (see the module docstring), the arguments given winning."""
        raw = os.environ.get(ENV_MAX_CONTENT_BYTES, "").strip()
        env_max = _given_size(raw, ENV_MAX_CONTENT_BYTES) if raw else None  # empty: unset (OTel's rule)
        env = cls(
            capture_content=os.environ.get(ENV_CAPTURE_CONTENT, "").strip().lower() in _ON_SPANS,
            max_content_bytes=DEFAULT_MAX_CONTENT_BYTES if env_max is None else env_max,
            full_prompt=os.environ.get(ENV_FULL_PROMPT, "").strip().lower() in _ON,
        )
        return env.updated(capture_content, max_content_bytes, redact, full_prompt)

    def updated(
        self,
        capture_content: bool | None = None,
        max_content_bytes: int | None = None,
        redact: Redactor | None = None,
        full_prompt: bool | None = None,
    ) -> CaptureConfig:
        """These settings with those given changed (``None``: unchanged); a ``max_content_bytes`` that is
        not a size is logged and ignored."""
        if max_content_bytes is not None:
            max_content_bytes = _given_size(max_content_bytes, "max_content_bytes")
        return CaptureConfig(
            self.capture_content if capture_content is None else bool(capture_content),
            self.max_content_bytes if max_content_bytes is None else max_content_bytes,
            self.redact if redact is None else redact,
            self.full_prompt if full_prompt is None else bool(full_prompt),
        )


def _size(value: object) -> int | None:
    """``value`` as a size in bytes (a non-negative integer, or its decimal text); ``None`` if it is not."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        size = int(value)
    except ValueError:
        return None
    return size if size >= 0 else None


def _given_size(value: object, name: str) -> int | None:
    """:func:`_size`, with a warning when ``value`` is not a size (the setting is then ignored)."""
    size = _size(value)
    if size is None:
        logger.warning("orchestrace: ignoring %s=%r (not a non-negative integer)", name, value)
    return size


_current: CaptureConfig | None = None


def get_config() -> CaptureConfig:
    """The process-wide settings: those given to ``configure``, else read from the environment once. Read by
    ``Telemetry.capture`` only."""
    global _current
    if _current is None:
        _current = CaptureConfig.from_env()
    return _current


def set_config(capture: CaptureConfig | None) -> None:
    """Install settings (``None``: read the environment again on next use)."""
    global _current
    _current = capture


def quiet() -> bool:
    """Whether third-party noise the user did not ask for stays quiet (``ORCHESTRACE_QUIET``, default on):
    an OTLP exporter whose endpoint does not answer drops its batches with one warning line instead of
    retrying them with a log line each (and a wait at exit), and the OpenAI Agents SDK's complaint that its
    own exporter has no key is not logged."""
    return os.environ.get(ENV_QUIET, "").strip().lower() not in ("0", "false", "no", "off")
