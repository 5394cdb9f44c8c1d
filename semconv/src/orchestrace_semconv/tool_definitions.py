"""Tool definitions offered to a model, read from the shapes providers use and written in two shapes:
:func:`tool_definition` the GenAI one (``gen_ai.tool.definitions``: ``{"type": "function", "name",
"description", "parameters"}``), :func:`openai_tool` the Chat Completions one that chat templates read
(``{"type": "function", "function": {"name", "description", "parameters"}}``).

Read: OpenAI Chat Completions tools, flat GenAI / Responses API tools, Anthropic tools (``input_schema``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Definition = dict[str, Any]


def _flat(name: Any, description: Any, parameters: Any) -> Definition | None:
    if not isinstance(name, str) or not name:
        return None
    definition: Definition = {"type": "function", "name": name}
    if isinstance(description, str) and description:
        definition["description"] = description
    if isinstance(parameters, Mapping):
        definition["parameters"] = dict(parameters)
    return definition


def tool_definition(tool: Any) -> Definition | None:
    """``tool`` in the GenAI shape, or ``None`` when it is no tool definition of a known shape."""
    if not isinstance(tool, Mapping):
        return None
    function = tool.get("function")
    if isinstance(function, Mapping):
        return _flat(function.get("name"), function.get("description"), function.get("parameters"))
    if "input_schema" in tool:
        return _flat(tool.get("name"), tool.get("description"), tool.get("input_schema"))
    return _flat(tool.get("name"), tool.get("description"), tool.get("parameters"))


def openai_tool(tool: Any) -> Definition | None:
    """``tool`` (any shape :func:`tool_definition` reads) in the Chat Completions shape."""
    definition = tool_definition(tool)
    if definition is None:
        return None
    definition.pop("type")
    return {"type": "function", "function": definition}
