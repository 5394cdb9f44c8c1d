"""Langfuse (its OTel-based SDKs): an observation's type (``agent``; ``tool``; ``generation`` a model call;
``embedding`` a model used without generating), model, usage (a JSON object, ``input`` and ``output`` among
its counts) and captured input and output; agents and tools are named by their span's name.
"""

from __future__ import annotations

from typing import Final

import orchestrace_semconv as sc

from ...spans import Span
from .base import AGENT, EMBEDDING, ContentParts, Kind, Verdict, Vocabulary, json_value

LF_OBSERVATION_TYPE: Final = "langfuse.observation.type"
LF_MODEL_NAME: Final = "langfuse.observation.model.name"
LF_USAGE_DETAILS: Final = "langfuse.observation.usage_details"
LF_INPUT: Final = "langfuse.observation.input"
LF_OUTPUT: Final = "langfuse.observation.output"
#: Its usage key -> the GenAI attribute it stands for.
_USAGE_DETAILS = ((sc.GEN_AI_USAGE_INPUT_TOKENS, "input"), (sc.GEN_AI_USAGE_OUTPUT_TOKENS, "output"))

_KINDS: dict[str, Verdict] = {
    "agent": (Kind.ACTOR, AGENT),
    "tool": (Kind.TOOL, ""),
    "generation": (Kind.MODEL, ""),
    "embedding": (Kind.OTHER, EMBEDDING),
}


def _model_call(span: Span, found: dict[str, object], content_parts: ContentParts) -> None:
    attrs = span.attributes
    if LF_OBSERVATION_TYPE not in attrs:
        return
    usage = json_value(attrs.get(LF_USAGE_DETAILS))
    if isinstance(usage, dict):
        for key, name in _USAGE_DETAILS:
            if name in usage:
                found.setdefault(key, usage[name])
    for key, lf_key in ((sc.GEN_AI_INPUT_MESSAGES, LF_INPUT), (sc.GEN_AI_OUTPUT_MESSAGES, LF_OUTPUT)):
        if lf_key in attrs:
            found.setdefault(key, attrs[lf_key])


VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="langfuse",
    kind_tables=((LF_OBSERVATION_TYPE, _KINDS),),
    model_names=(LF_MODEL_NAME,),
    input_content=(LF_INPUT,),
    output_content=(LF_OUTPUT,),
    model_call=_model_call,
    other_forms=(LF_OBSERVATION_TYPE,),
)
