"""Anthropic's Messages format, in which instrumentations of Anthropic's SDK record prompts (and Strands'
Bedrock content blocks are read, ``strands``): a message's ``tool_use`` parts (``id`` / ``name`` / ``input``)
are its tool calls; its ``tool_result`` parts (``tool_use_id`` / ``content``) answers, one ``tool`` message
each (Anthropic sends them in a ``user`` message).
"""

from __future__ import annotations

from typing import Final

from .base import ToolParts, Vocabulary

VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="anthropic",
    tool_parts=ToolParts("tool_use", "id", "name", ("input",),
                         "tool_result", "tool_use_id", None, ("content",)),
)
