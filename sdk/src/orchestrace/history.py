"""Message history stored once: a model call exports only the messages that earlier calls did not.

A chat prompt in an agent loop is the previous prompt, the previous completion and a few new messages.
Exporting the whole prompt at every call makes a run of n calls O(n^2) bytes. Instead, each chat span names
an earlier chat span of the same trace whose prompt followed by its completion is the start of this prompt
(``orchestrace.semconv.ORCH_PREFIX_*``) and carries the content of the remaining messages only.
The collector rebuilds the full prompt by following these references:
``prompt(s) = (prompt(p) + completion(p))[:prefix_length] + input_messages(s)``.

Every path that records model calls follows this rule: ``@ot.llm`` and ``start_model_call`` (one history
per process, :data:`orchestrace.invocation.HISTORY`; the OpenAI Agents integration's calls too) and
``start_chat`` given a history (the LangGraph integration).

A backend that shows one span at a time cannot follow these references: ``ot.configure(full_prompt=True)``
(``ORCHESTRACE_FULL_PROMPT=true``) turns them off, and every call then carries its whole prompt.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence


def chain(refs: Sequence[str], digest: str = "") -> list[str]:
    """Running digests of a message sequence: ``out[i]`` identifies ``refs[: i + 1]``. ``digest``: that of
    the messages before ``refs`` (extends an earlier chain without hashing it again).

    BLAKE2s: as collision-resistant as SHA-256 and, for these short inputs, a third of its instructions
    (hashlib's SHA-256 is OpenSSL's, with a context made per hash); one link per message of every captured
    prompt. The digests never leave the process (keys of :class:`PromptHistory` only)."""
    out: list[str] = []
    for ref in refs:
        digest = hashlib.blake2s(f"{digest}|{ref}".encode()).hexdigest()
        out.append(digest)
    return out


class PromptHistory:
    """Which message sequences were already exported, and by which span (bounded, thread-safe)."""

    def __init__(self, size: int = 8192) -> None:
        self._seen: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def longest_prefix(self, trace_id: str, chained: Sequence[str]) -> tuple[str, int] | None:
        """(span id, length) of the longest start of the sequence already exported in the trace, if any.

        Only the same trace counts: a prompt that starts like one of another run (a shared system prompt)
        must not point at a span the collector may never see with it."""
        with self._lock:
            for i in range(len(chained) - 1, -1, -1):
                key = f"{trace_id}:{chained[i]}"
                hit = self._seen.get(key)
                if hit is not None:
                    self._seen.move_to_end(key)
                    return hit[0], i + 1
        return None

    def remember(self, trace_id: str, span_id: str, chained: Sequence[str]) -> None:
        """Record that ``span_id`` exported the sequence ending at ``chained[-1]`` (prompt + completion)."""
        with self._lock:
            for i in (len(chained) - 2, len(chained) - 1):
                if i >= 0:
                    key = f"{trace_id}:{chained[i]}"
                    self._seen[key] = (span_id, i + 1)
                    self._seen.move_to_end(key)
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
