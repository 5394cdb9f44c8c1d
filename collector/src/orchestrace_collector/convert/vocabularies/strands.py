"""Strands Agents: its spans are GenAI spans with messages in the older events of one message each (read by
``genai``), a message's content a JSON list of Amazon Bedrock Converse content blocks (each a one-key object),
read as the content parts ``chat`` reads (text; Anthropic's ``tool_use`` and ``tool_result``, which Bedrock's
blocks mirror). A swarm agent hands control over by calling its ``handoff_to_agent`` tool, the target in the
``agent_name`` argument.
"""

from __future__ import annotations

from typing import Final

from .base import Vocabulary, json_value

_BEDROCK_BLOCKS = frozenset({"text", "toolUse", "toolResult", "image", "document", "video",
                             "reasoningContent", "cachePoint", "guardContent", "citationsContent"})


def _blocks_as_parts(content: object) -> object:
    if not (isinstance(content, str) and content.startswith("[{")):
        return content
    blocks = json_value(content)
    if not isinstance(blocks, list) or not all(
        isinstance(b, dict) and len(b) == 1 and next(iter(b)) in _BEDROCK_BLOCKS for b in blocks
    ):
        return content
    parts: list[object] = []
    for block in blocks:
        ((kind, value),) = block.items()
        if kind == "text":
            parts.append({"type": "text", "text": value})
        elif kind == "toolUse" and isinstance(value, dict):
            parts.append({"type": "tool_use", "id": value.get("toolUseId"), "name": value.get("name"),
                          "input": value.get("input")})
        elif kind == "toolResult" and isinstance(value, dict):
            parts.append({"type": "tool_result", "tool_use_id": value.get("toolUseId"),
                          "content": value.get("content")})
    return parts


VOCABULARY: Final[Vocabulary] = Vocabulary(
    name="strands",
    handoff_tools={"handoff_to_agent": "agent_name"},
    content_parts=_blocks_as_parts,
)
