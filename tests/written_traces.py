"""A converted episode's trace as it is written, checked to validate, and the lookups tests make in it.

The one place every test folder converts spans and checks the trace (the schema plus the referential checks
of ``validate_trace``); ``collector/convert_support.py``, ``langgraph/episodes.py`` and
``openai_agents/agents_spans.py`` use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from orchestrace_collector.convert import Episode, convert_episode
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.model import Trace
from orchestrace_collector.validate import validate_trace


def checked(converted: Episode | Trace) -> dict[str, Any]:
    """The written form of a trace (an episode's), as JSON, after checking it passes ``validate_trace``."""
    trace = converted.trace if isinstance(converted, Episode) else converted
    written: dict[str, Any] = json.loads(json.dumps(trace.to_json_dict()))
    problems = validate_trace(written)
    assert problems == [], problems
    return written


def convert(spans: Iterable[ReadableSpan]) -> tuple[dict[str, Any], Episode]:
    """The written trace of these finished spans (one episode), checked, and the episode."""
    episode = convert_episode([span_from_readable(s) for s in spans])
    return checked(episode), episode


def of_type(written: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [e for e in written["events"] if e["type"] == type_]


def edges_of(written: dict[str, Any], type_: str) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in written["edges"] if e["type"] == type_}
