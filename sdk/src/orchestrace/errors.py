"""The one way orchestrace records an error on a span (every kind of invocation, ``ot.aggregate``, and the
integrations through :mod:`orchestrace.instrumentation`).

``error.type`` (the exception's qualified class name, the OTel convention the collector reads for a turn's or
an event's ``error_type``), an ``exception`` event (type, message, stack trace) and status ERROR with
``"{type}: {message}"`` (at most 512 characters). An exception whose ``__str__`` raises still gets all three.
"""

from __future__ import annotations

from opentelemetry.trace import Span, Status, StatusCode

from orchestrace import semconv as sc

MAX_STATUS_DESCRIPTION = 512


def _description(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:MAX_STATUS_DESCRIPTION]
    except Exception:  # a broken __str__
        return type(exc).__name__


def record_error(span: Span, exc: BaseException) -> None:
    """Mark ``span`` as failed by ``exc`` (see the module docstring). Does not end the span."""
    span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, _description(exc)))
    span.record_exception(exc, escaped=True)  # last: it calls __str__ too, and may raise
