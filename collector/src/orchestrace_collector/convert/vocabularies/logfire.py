"""Pydantic Logfire: exports a zero-length copy of each span when it starts (to show it in progress), with
all its attributes and ``logfire.span_type`` set to ``pending_span``; the span itself follows when it ends.
"""

from __future__ import annotations

from typing import Final

from ...spans import Attributes
from .base import Vocabulary

LOGFIRE_SPAN_TYPE: Final = "logfire.span_type"
LOGFIRE_PENDING_SPAN: Final = "pending_span"


def _pending(attrs: Attributes) -> bool:
    return attrs.get(LOGFIRE_SPAN_TYPE) == LOGFIRE_PENDING_SPAN


VOCABULARY: Final[Vocabulary] = Vocabulary(name="logfire", in_progress_copy=_pending)
