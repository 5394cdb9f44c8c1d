"""The vocabularies conversion reads, one file per library, in ONE ordered list: ``VOCABULARIES``.

The order is the precedence wherever two libraries could answer the same question about a span (its kind
above all): the OTel GenAI conventions first, the base every other is read into, then orchestrace's own
attributes, then each other library. ``base`` defines what a vocabulary declares (``Vocabulary``);
``convert/README.md`` says how to add one.
"""

from __future__ import annotations

from typing import Final

from . import (
    adk,
    anthropic,
    genai,
    langfuse,
    logfire,
    openinference,
    openllmetry,
    orchestrace,
    strands,
    vercel_ai,
)
from .base import Vocabulary

VOCABULARIES: Final[tuple[Vocabulary, ...]] = (
    genai.VOCABULARY,
    orchestrace.VOCABULARY,
    openllmetry.VOCABULARY,
    openinference.VOCABULARY,
    vercel_ai.VOCABULARY,
    langfuse.VOCABULARY,
    adk.VOCABULARY,
    strands.VOCABULARY,
    anthropic.VOCABULARY,
    logfire.VOCABULARY,
)

#: Token counts, by vocabulary (what several stages read).
INPUT_TOKENS: Final = tuple(key for v in VOCABULARIES for key in v.input_tokens)
OUTPUT_TOKENS: Final = tuple(key for v in VOCABULARIES for key in v.output_tokens)
