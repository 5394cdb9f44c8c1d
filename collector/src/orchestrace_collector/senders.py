"""Who sent a batch, and which episodes are whose.

``--token-file`` holds one bearer token (every sender is one sender), or lines ``name:token``: named senders.
Every accepted batch then has a sender, and an episode belongs to the sender whose batch named it first (by
its OTel trace id, or by its ``orchestrace.episode.id``): spans of that episode from another sender are
refused (HTTP 403, gRPC ``PERMISSION_DENIED``) and counted, so a late span, a reward among them, can only come
from the sender that ran the episode. Senders named with ``--annotator`` may add to any episode (a grader
service); ``orchestrace annotate`` on the output directory needs no token at all.

What it does not protect: senders sharing one token (or loopback with none) are one sender; an episode id
chosen in advance (``ot.task(episode_id=...)``) can be claimed first by another sender that knows it (the
SDK's own episode ids are random and first seen with the episode's spans). Owners are remembered for the
newest ``limit`` keys, across restarts (``senders.idx`` next to the WAL).
"""

from __future__ import annotations

import hmac
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from orchestrace_semconv import ORCH_EPISODE_ID

from orchestrace_collector.decode import count_spans
from orchestrace_collector.keyed_index import KeyedIndex

SENDERS_INDEX = "senders.idx"
#: The sender of a collector with a single token, or none.
ANY_SENDER = "*"
_NAMED = re.compile(r"^([A-Za-z0-9_.@-]{1,64}):(\S+)$")


class TokenFileError(ValueError):
    pass


def parse_tokens(text: str) -> dict[str, str]:
    """Sender name -> token from a ``--token-file``'s text: one token alone (sender :data:`ANY_SENDER`), or
    one ``name:token`` per line (blank lines and ``#`` comments skipped)."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        raise TokenFileError("no token in it")
    named = [_NAMED.match(line) for line in lines]
    if len(lines) == 1 and named[0] is None:
        return {ANY_SENDER: lines[0]}
    tokens: dict[str, str] = {}
    for number, match in enumerate(named, 1):
        if match is None:
            raise TokenFileError(f"line {number}: expected name:token (several senders, one per line)")
        name, token = match.groups()
        if name in tokens:
            raise TokenFileError(f"line {number}: sender {name!r} named twice")
        if token in tokens.values():
            raise TokenFileError(f"line {number}: the same token as another sender")
        tokens[name] = token
    return tokens


class Forbidden(Exception):
    """Spans of an episode another sender opened: nothing of the batch was acknowledged."""


@dataclass(frozen=True)
class Credentials:
    """The tokens senders present, by sender name."""

    tokens: Mapping[str, str]

    @property
    def named(self) -> bool:
        return len(self.tokens) > 1 or ANY_SENDER not in self.tokens

    def sender(self, authorization: str | None) -> str | None:
        """The sender whose token ``authorization`` (``Bearer <token>``) carries, None for none."""
        scheme, _, value = (authorization or "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        presented = value.strip().encode()
        found = None
        for name, token in self.tokens.items():  # every one compared: the time says nothing of which
            if hmac.compare_digest(presented, token.encode()):
                found = name
        return found


class Owners:
    """Which sender opened each episode key (thread-safe; bounded; kept in ``senders.idx``)."""

    def __init__(self, directory: Path | None, annotators: Iterable[str] = (), limit: int = 200_000) -> None:
        self.annotators = frozenset(annotators)
        self.limit = limit
        self.refused_spans = 0
        self._lock = threading.Lock()
        self._index = KeyedIndex(directory / SENDERS_INDEX, limit) if directory is not None else None
        loaded = self._index.load() if self._index is not None else {}
        self._owner: OrderedDict[str, str] = OrderedDict(
            (key, str(entry.get("sender"))) for key, entry in loaded.items()
        )

    def claim(self, sender: str, request: ExportTraceServiceRequest) -> None:
        """Record ``sender`` as the owner of the episodes ``request`` opens; raise :class:`Forbidden` (and
        count its spans) when it holds spans of another sender's episode."""
        keys = dict.fromkeys(episode_keys(request))
        with self._lock:
            if sender not in self.annotators:
                for key in keys:
                    owner = self._owner.get(key)
                    if owner is not None and owner != sender:
                        self.refused_spans += count_spans(request)
                        raise Forbidden(f"episode {key} belongs to another sender")
            for key in keys:
                if key not in self._owner and sender not in self.annotators:
                    self._remember(key, sender)

    def _remember(self, key: str, sender: str) -> None:
        self._owner[key] = sender
        if len(self._owner) > self.limit:
            self._owner.popitem(last=False)
        if self._index is not None:
            self._index.append({"key": key, "sender": sender}, self._entries)

    def _entries(self) -> list[dict[str, str]]:
        """``senders.idx``'s entries: one per remembered episode (read when the file is rewritten)."""
        return [{"key": k, "sender": s} for k, s in self._owner.items()]


def episode_keys(request: ExportTraceServiceRequest) -> Iterator[str]:
    """The episode keys a request's spans name: each span's OTel trace id (hex) and, on spans that carry
    it, its ``orchestrace.episode.id`` (an episode's key is one or the other, see ``assemble.py``)."""
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield span.trace_id.hex()
                for attribute in span.attributes:
                    if attribute.key == ORCH_EPISODE_ID:
                        kind = attribute.value.WhichOneof("value")
                        if kind in ("string_value", "int_value"):
                            yield str(getattr(attribute.value, kind))
