"""Google's Agent Development Kit: its spans are GenAI spans (``genai``: its ``call_llm`` is model-like); an
agent hands control to another by calling its ``transfer_to_agent`` tool, the target in the ``agent_name``
argument. (Its run, named after its root agent, holds the root agent's sub-agents beside it: ``actors`` files
them under the root agent, as for any library's run named after its agent.)
"""

from __future__ import annotations

from typing import Final

from .base import Vocabulary

VOCABULARY: Final[Vocabulary] = Vocabulary(name="adk", handoff_tools={"transfer_to_agent": "agent_name"})
