"""A streamed reply put together from its chunks, whatever their shape (added by ``replies.parse_chunk``)."""

from __future__ import annotations

import hashlib
from typing import Any

from orchestrace.content import REF_PREFIX
from orchestrace.replies.reply import Reply, ToolCall


class StreamedText:
    """The text of a streamed reply: hashed as it arrives (its ref equals the ref of the whole text) and
    kept up to ``limit`` characters (0 when content is not captured)."""

    __slots__ = ("cut_bytes", "digest", "kept", "limit", "size")

    def __init__(self, limit: int) -> None:
        self.digest = hashlib.sha256()
        self.kept: list[str] = []
        self.limit = limit
        self.size = 0
        self.cut_bytes = 0  # UTF-8 bytes that arrived past the limit

    def add(self, text: str) -> None:
        raw = text.encode("utf-8", "surrogatepass")
        self.digest.update(raw)
        room = self.limit - self.size
        piece = text[:room] if room > 0 else ""
        if piece:
            self.kept.append(piece)
            self.size += len(piece)
        if len(piece) < len(text):
            self.cut_bytes += len(raw) - len(piece.encode("utf-8", "surrogatepass"))

    @property
    def ref(self) -> str:
        return REF_PREFIX + self.digest.hexdigest()


class ReplyStream:
    """Chunks of one streamed model call -> one :class:`Reply`. The chunk parsers (one module per provider)
    call the ``add_*`` methods and set the reply's fields they know."""

    __slots__ = ("calls", "reasoning", "reply", "text")

    def __init__(self, limit: int) -> None:
        self.reply = Reply()
        self.text = StreamedText(limit)
        self.reasoning: list[str] = []
        self.calls: dict[Any, list[Any]] = {}  # call key (index) -> [id, name, argument pieces]

    def add_text(self, text: Any) -> None:
        if isinstance(text, str) and text:
            self.text.add(text)

    def add_reasoning(self, text: Any) -> None:
        if isinstance(text, str) and text:
            self.reasoning.append(text)

    def add_call(self, key: Any, call_id: Any = None, name: Any = None, arguments: Any = None) -> None:
        """A tool call's start or a piece of it: id and name once, arguments as JSON text in pieces."""
        call = self.calls.setdefault(key, [None, None, []])
        if call_id:
            call[0] = str(call_id)
        if name:
            call[1] = str(name)
        if isinstance(arguments, str) and arguments:
            call[2].append(arguments)

    def add_token_ids(self, ids: list[int] | None) -> None:
        if ids:
            self.reply.completion_token_ids = (self.reply.completion_token_ids or []) + ids

    def add_logprobs(self, logprobs: list[float] | None) -> None:
        if logprobs:
            self.reply.completion_logprobs = (self.reply.completion_logprobs or []) + logprobs

    def finish(self) -> Reply:
        """The reply so far (the text kept up to the limit)."""
        reply = self.reply
        reply.text = "".join(self.text.kept)
        reply.reasoning = "".join(self.reasoning)
        reply.tool_calls = [ToolCall(call_id, name or "", "".join(pieces))
                            for call_id, name, pieces in self.calls.values()]
        return reply
