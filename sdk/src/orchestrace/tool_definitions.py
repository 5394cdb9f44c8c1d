"""Tool definitions offered to a model (``@ot.llm``'s ``tools``, a LangChain model's bound tools), in the
GenAI shape (``gen_ai.tool.definitions``): the shapes of :mod:`orchestrace_semconv.tool_definitions`, and
anything ``langchain_core`` converts (LangChain tools, pydantic models, typed functions) when it is installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrace_semconv.tool_definitions import Definition
from orchestrace_semconv.tool_definitions import tool_definition as definition_of_mapping


def tool_definition(tool: Any) -> Definition | None:
    """``tool`` in the GenAI shape, or ``None`` when it is no tool definition orchestrace can read."""
    if isinstance(tool, Mapping):
        return definition_of_mapping(tool)
    try:
        from langchain_core.utils.function_calling import convert_to_openai_tool
    except ImportError:
        return None
    try:
        converted = convert_to_openai_tool(tool)
    except Exception:  # not something LangChain can describe either
        return None
    return definition_of_mapping(converted)


def tool_definitions(tools: Any) -> list[Definition]:
    """Every readable definition of a list of tools (others are left out)."""
    if not isinstance(tools, list | tuple):
        return []
    return [d for d in map(tool_definition, tools) if d is not None]
