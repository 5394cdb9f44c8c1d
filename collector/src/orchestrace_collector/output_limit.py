"""The amplification limit: what one episode writes (its trace line plus its turns) is bounded in bytes,
whatever spans it was built from.

Where output outgrows input: a string received once is written many times.

* Names and ids on every event: an agent's name (role, id) arrives once, on its span, and is written on each
  of its events, its turns and in reward keys; 92 KiB of spans (a 64 KiB agent name, 200 tool calls) made a
  13 MiB trace line (143x).
* Prompts stored once: a model call that names an earlier call as its prompt's prefix
  (``orchestrace.content.prefix_span_id``) sends only its new messages, and its turn is written with the whole
  rebuilt prompt: a conversation's turns grow with the square of its length (2 MiB of 100 chained calls made
  101 MiB of turns, 50x).

Two rules, applied by ``TraceDirWriter.write`` before anything is serialized:

1. Identifiers (the trace, task, agent, role, tool, model names and ids, labels, a decision's options, reward
   and credit keys) longer than :data:`ID_CHARS` characters are cut to their start, ``…`` and 16 hex digits of
   the sha256 of what was there, always: distinct names stay distinct and every revision cuts them alike. Each
   part between ``.``, ``:`` and ``#`` is cut on its own, so an activation label (``name#2``), a reward key
   (``agent:<label>``) and a fragment id (``<trace_id>.late1``) match their cut name.
2. The budget, ``max_bytes`` (``--max-trace-mb``, 64 MiB): when the estimated size is above it, the turns'
   messages are cut to a common cap per turn (the completion kept first, then the prompt's newest messages; a
   turn's ``truncated`` says how many UTF-8 bytes of ``prompt`` / ``completion`` were left out); if the events
   still do not fit, identifiers (but the trace and task ids; decisions' options included) are cut to
   :data:`SHORT_ID_CHARS` and event reasons to :data:`ID_CHARS`. If the structure alone (a trace of very many
   spans) is still above it, its latest events are left out (with the edges that touch them) until it fits:
   the trace keeps its start, says ``incomplete``, counts them in ``truncated_events``, and is logged. The
   budget holds for every trace.

Whatever was cut is counted in the trace's metrics: ``truncated`` (values cut) and ``truncated_bytes``
(UTF-8 bytes left out of the written lines).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from orchestrace_collector.model import Message, ToolCall, Trace, Turn

log = logging.getLogger(__name__)

ID_CHARS: Final = 256
SHORT_ID_CHARS: Final = 24
DEFAULT_MAX_BYTES: Final = 64 << 20
TRUNCATED = "truncated"
TRUNCATED_BYTES = "truncated_bytes"
TRUNCATED_EVENTS = "truncated_events"

_DIGEST_CHARS: Final = 16
_PARTS = re.compile(r"([.:#])")
_EVENT_IDS: Final = ("agent", "role", "from_", "to", "tool", "agent_id", "label", "error_type")
_TURN_IDS: Final = ("agent", "agent_id", "model", "provider", "response_model", "finish_reason", "error_type")
# Rough JSON bytes of what the estimate does not walk: an event's or turn's numbers and field names, an edge.
_EVENT_BYTES, _EDGE_BYTES, _TURN_BYTES, _MESSAGE_BYTES, _CALL_BYTES = 160, 48, 400, 40, 64


def shorten(value: str, limit: int = ID_CHARS) -> str:
    """``value`` with each part (between ``.``, ``:``, ``#``) longer than ``limit`` cut (see rule 1)."""
    if len(value) <= limit:
        return value
    cut = "".join(p if len(p) <= limit else _cut(p, limit) for p in _PARTS.split(value))
    # Many short parts: the whole is cut (such a name no longer matches its labels' cut, but stays bounded).
    return cut if len(cut) <= 4 * limit else _cut(value, limit)


def _cut(value: str, limit: int) -> str:
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    return f"{value[: limit - _DIGEST_CHARS - 2]}…{digest}"


def limit_output(trace: Trace, turns: Sequence[Turn], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Apply both rules to ``trace`` and ``turns``, in place (0 ``max_bytes``: rule 1 only)."""
    cuts = _Cuts()
    _identifiers(trace, turns, cuts, ID_CHARS, keep_ids=False)
    if max_bytes > 0 and _upper_bound(trace, turns) > max_bytes:
        _fit(trace, turns, max_bytes, cuts)
    if cuts.values:
        trace.metrics[TRUNCATED] = trace.metrics.get(TRUNCATED, 0) + cuts.values
        trace.metrics[TRUNCATED_BYTES] = trace.metrics.get(TRUNCATED_BYTES, 0) + cuts.bytes


#: :func:`_upper_bound` over the JSON bytes actually written, at most: a token id written in 2 bytes (``1,``)
#: is counted 24; everything else at most 6 times (a character, a minimal event, turn or edge).
_UPPER_BOUND_PER_BYTE: Final = 12
#: The identifier fields of written events and turns (``_EVENT_IDS``, ``_TURN_IDS`` by their JSON names).
_TRACE_ID_KEYS: Final = ("trace_id", "task_id", "system")
_EVENT_ID_KEYS: Final = tuple("from" if name == "from_" else name for name in _EVENT_IDS)
_TURN_ID_KEYS: Final = ("trace_id", "task_id", *_TURN_IDS)


def may_cut(trace: dict[str, Any], turns: list[dict[str, Any]], written_bytes: int,
            max_bytes: int = DEFAULT_MAX_BYTES) -> bool:
    """Whether :func:`limit_output` could change an episode, judged on what it writes (the dicts of its
    JSON lines, ``written_bytes`` in all; ``convert/written.py``): ``False`` only when it certainly would
    not (no identifier longer than :data:`ID_CHARS`, and an upper bound within the budget)."""
    if max_bytes > 0 and written_bytes * _UPPER_BOUND_PER_BYTE > max_bytes:
        return True
    if _long(trace, _TRACE_ID_KEYS) or any(len(k) > ID_CHARS for k in (*trace["rewards"], *trace["metrics"])):
        return True
    events: list[dict[str, Any]] = trace["events"]
    for event in events:
        if _long(event, _EVENT_ID_KEYS) or (
            "options" in event and any(len(option) > ID_CHARS for option in event["options"])
        ):
            return True
    for turn in turns:
        if _long(turn, _TURN_ID_KEYS) or (
            "credit" in turn and any(len(key) > ID_CHARS for key in turn["credit"])
        ):
            return True
    return False


def may_exceed(turns: list[dict[str, Any]], max_bytes: int = DEFAULT_MAX_BYTES) -> bool:
    """Whether the turns' message texts alone (fewer characters than their JSON bytes) make :func:`may_cut`
    true, found before serializing them: each turn writes its whole prompt, so a long conversation's turns
    are quadratic in its length."""
    if max_bytes <= 0:
        return False
    budget = max_bytes // _UPPER_BOUND_PER_BYTE
    chars = 0
    for turn in turns:
        for key in ("prompt", "completion"):
            messages: list[dict[str, Any]] | None = turn.get(key)
            if messages:  # most turns: no content captured
                for message in messages:
                    content = message.get("content")
                    chars += len(content) if isinstance(content, str) else 0
        if chars > budget:
            return True
    return False


def _long(fields: dict[str, Any], names: tuple[str, ...]) -> bool:
    # ``get`` on a typed ``dict``: one C call per name when compiled (a ``Mapping``'s was a method looked up
    # and called per name; ``in`` then ``[]``, two calls for each name present).
    for name in names:
        value = fields.get(name)
        if value is not None and len(value) > ID_CHARS:
            return True
    return False


def _upper_bound(trace: Trace, turns: Sequence[Turn]) -> int:
    """More JSON bytes than the trace and turns take (a character escapes to at most 6 bytes), but for the
    turns' tools and request parameters (written once per span received: they do not amplify). One quick pass,
    so that only traces that may be over the budget are estimated closely."""
    chars = sum(len(k) for k in (*trace.rewards, *trace.metrics))
    chars += len(trace.trace_id) + len(trace.task_id) + len(trace.system or "")
    for event in trace.events:
        chars += sum(map(len, filter(None, map(event.__dict__.__getitem__, _EVENT_FIELDS))))
        if event.options:
            chars += sum(map(len, event.options)) + 3 * len(event.options)  # quotes and comma
    total = _EVENT_BYTES * len(trace.events) + _EDGE_BYTES * len(trace.edges) + _TURN_BYTES * len(turns)
    for turn in turns:
        chars += sum(map(len, filter(None, map(turn.__dict__.__getitem__, _TURN_FIELDS))))
        chars += sum(len(k) for k in turn.credit or ()) + 4 * len(turn.event_ids)
        for ids in (turn.prompt_token_ids, turn.completion_token_ids, turn.completion_logprobs):
            total += 24 * len(ids or ())
        for messages in (turn.prompt, turn.completion):
            for message in messages or ():
                total += _MESSAGE_BYTES
                chars += len(message.content) + len(message.reasoning_content or "")
                if message.tool_calls:
                    total += sum(_arguments(c) * 6 + 64 for c in message.tool_calls)
    return total + 6 * chars


def _fit(trace: Trace, turns: Sequence[Turn], max_bytes: int, cuts: _Cuts) -> None:
    """Rule 2: cut text until the estimate fits ``max_bytes`` (or only the structure is left)."""
    size = _Sizer()
    fixed = size.trace(trace) + sum(size.turn_fixed(t) for t in turns)
    texts = [size.messages(t.prompt) + size.messages(t.completion) for t in turns]
    if fixed + sum(texts) <= max_bytes:
        return
    if fixed > max_bytes // 2:  # the events' and turns' own strings take most of it: those first
        _identifiers(trace, turns, cuts, SHORT_ID_CHARS, keep_ids=True)
        for event in trace.events:
            if event.reason is not None and len(event.reason) > ID_CHARS:
                event.reason = cuts.value(event.reason, event.reason[:ID_CHARS])
        size = _Sizer()
        fixed = size.trace(trace) + sum(size.turn_fixed(t) for t in turns)
    floors = [size.floor(t.prompt or []) + size.floor(t.completion or []) for t in turns]
    cap = _common_cap(texts, floors, max_bytes - fixed)
    for turn, text in zip(turns, texts, strict=True):
        if text > cap:
            _cut_turn(turn, cap, size, cuts)
    if fixed > max_bytes:
        turns_bytes = sum(
            size.turn_fixed(t) + size.messages(t.prompt) + size.messages(t.completion) for t in turns
        )
        left_out = _drop_latest_events(trace, max_bytes - turns_bytes - 256)  # room for the metrics it adds
        if left_out:
            kept = {e.id for e in trace.events}
            for turn in turns:
                if any(event_id not in kept for event_id in turn.event_ids):
                    turn.event_ids = [event_id for event_id in turn.event_ids if event_id in kept]
        log.warning(
            "orchestrace: trace %s is about %d MiB without its turns' text (limit %d MiB, %d events, %d "
            "edges, %d turns): its latest %d events are left out, the trace is marked incomplete",
            trace.trace_id, fixed >> 20, max_bytes >> 20, len(trace.events) + left_out, len(trace.edges),
            len(turns), left_out,
        )


def _drop_latest_events(trace: Trace, room: int) -> int:
    """Leave out the latest events (and the edges to them) until the trace's JSON line
    takes at most ``room`` bytes, keeping at least the first event. Sizes are measured, not estimated: this
    runs only for traces the estimate put over the budget. Returns how many events were left out."""
    excess = len(trace.model_dump_json(by_alias=True, exclude_none=True)) - room
    order = sorted(range(len(trace.events)), key=lambda i: (trace.events[i].t, i))
    touching: dict[str, list[int]] = {}
    for number, edge in enumerate(trace.edges):
        touching.setdefault(edge.src, []).append(number)
        touching.setdefault(edge.dst, []).append(number)
    gone: set[str] = set()
    cut_edges: set[int] = set()
    for index in reversed(order[1:]):
        if excess <= 0:
            break
        event = trace.events[index]
        gone.add(event.id)
        excess -= len(event.model_dump_json(by_alias=True, exclude_none=True)) + 1
        for number in touching.get(event.id, ()):
            if number not in cut_edges:  # an edge goes with its first end to go
                cut_edges.add(number)
                excess -= len(trace.edges[number].model_dump_json()) + 1
    if not gone:
        return 0
    trace.events = [e for e in trace.events if e.id not in gone]
    trace.edges = [e for number, e in enumerate(trace.edges) if number not in cut_edges]
    trace.metrics[TRUNCATED_EVENTS] = trace.metrics.get(TRUNCATED_EVENTS, 0) + len(gone)
    trace.metrics["incomplete"] = 1.0
    return len(gone)


class _Cuts:
    """What was cut: distinct values and bytes left out (over every place they would have been written)."""

    def __init__(self) -> None:
        self.values = 0
        self.bytes = 0
        self._seen: dict[str, str] = {}

    def value(self, old: str, new: str) -> str:
        if new != old:
            if old not in self._seen:
                self._seen[old] = new
                self.values += 1
            self.bytes += _utf8(old) - _utf8(new)
        return new

    def mapped(self, old: str, cut: Callable[[str], str]) -> str:
        new = self._seen.get(old)
        return self.value(old, cut(old) if new is None else new)


def _identifiers(trace: Trace, turns: Sequence[Turn], cuts: _Cuts, limit: int, *, keep_ids: bool) -> None:
    """Cut every identifier longer than ``limit`` (``keep_ids``: but the trace and task ids)."""

    def cut(value: str) -> str:
        return shorten(value, limit)

    def short(value: Any) -> Any:
        return value if not isinstance(value, str) or len(value) <= limit else cuts.mapped(value, cut)

    def keys(values: dict[str, float]) -> dict[str, float]:
        return {short(k): v for k, v in values.items()}

    for name in ("system", *(() if keep_ids else ("trace_id", "task_id"))):
        value = trace.__dict__[name]
        if value is not None and len(value) > limit:
            setattr(trace, name, short(value))
    for name in ("rewards", "metrics"):
        if any(len(k) > limit for k in trace.__dict__[name]):
            setattr(trace, name, keys(trace.__dict__[name]))
    for event in trace.events:
        fields = event.__dict__
        for name in _EVENT_IDS:
            value = fields[name]
            if value is not None and len(value) > limit:
                setattr(event, name, short(value))
        options = fields["options"]
        if options and any(len(o) > limit for o in options):  # agent names: cut as ``to`` is
            event.options = [short(o) for o in options]
    names = _TURN_IDS if keep_ids else ("trace_id", "task_id", *_TURN_IDS)
    for turn in turns:
        fields = turn.__dict__
        for name in names:
            value = fields[name]
            if value is not None and len(value) > limit:
                setattr(turn, name, short(value))
        if turn.credit and any(len(k) > limit for k in turn.credit):
            turn.credit = keys(turn.credit)


def _common_cap(texts: list[int], floors: list[int], room: int) -> int:
    """The largest per-turn cap such that every turn cut to it (never below its floor: its messages with
    empty texts) fits in ``room`` (water filling)."""

    def total(cap: int) -> int:
        return sum(max(floor, min(text, cap)) for text, floor in zip(texts, floors, strict=True))

    low, high = 0, max(texts, default=0)
    while low < high:
        mid = (low + high + 1) // 2
        if total(mid) <= room:
            low = mid
        else:
            high = mid - 1
    return low


def _cut_turn(turn: Turn, cap: int, size: _Sizer, cuts: _Cuts) -> None:
    """Cut a turn's messages to ``cap``: the completion keeps its start, the prompt its newest messages."""
    completion, prompt = turn.completion or [], turn.prompt or []
    room = cap - size.floor(completion) - size.floor(prompt)  # for the texts, beyond the messages' frames
    kept, completion_out, room = _keep(completion, room, size, newest_first=False)
    shown, prompt_out, _ = _keep(prompt, room, size, newest_first=True)
    marks = dict(turn.truncated or {})
    for name, messages, out in (("completion", kept, completion_out), ("prompt", shown, prompt_out)):
        if out:
            setattr(turn, name, messages)
            marks[name] = marks.get(name, 0) + out
            cuts.values += 1
            cuts.bytes += out
    turn.truncated = marks or None


def _keep(
    messages: list[Message], room: int, size: _Sizer, *, newest_first: bool
) -> tuple[list[Message], int, int]:
    """``messages`` whose texts fit ``room`` (the others' emptied, one cut part way): the messages, the
    UTF-8 bytes left out, the room left."""
    order = range(len(messages) - 1, -1, -1) if newest_first else range(len(messages))
    out = list(messages)
    left_out = 0
    for index in order:
        message = messages[index]
        text = size.message(message) - size.floor([message])
        if text <= room:
            room -= text
            continue
        if room > 0:
            out[index], dropped = _shrink(message, room, text)
        else:  # emptied: the same copy for every turn whose prompt holds the message
            emptied = size.emptied.get(id(message))
            if emptied is None:
                emptied = size.emptied[id(message)] = (message, *_shrink(message, 0, text))
            out[index], dropped = emptied[1], emptied[2]
        left_out += dropped
        room = 0
    return out, left_out, room


def _shrink(message: Message, room: int, text: int) -> tuple[Message, int]:
    """A copy of ``message`` whose texts (``text`` JSON bytes now) take about ``room`` bytes; its role and
    tool-call ids kept, tool-call arguments emptied."""
    chars = room * len(message.content) // max(1, text)  # escapes and UTF-8 make a character several bytes
    content = message.content[:chars]
    reasoning = message.reasoning_content
    if reasoning is not None:
        reasoning = reasoning[: max(0, chars - len(content))]
    calls = message.tool_calls
    dropped = _utf8(message.content) - _utf8(content)
    if reasoning is not None and message.reasoning_content is not None:
        dropped += _utf8(message.reasoning_content) - _utf8(reasoning)
    if calls:
        dropped += sum(_arguments(c) for c in calls)
        calls = [_without_arguments(c) for c in calls]
    update = {"content": content, "reasoning_content": reasoning, "tool_calls": calls}
    return message.model_copy(update=update), dropped


def _without_arguments(call: ToolCall) -> ToolCall:
    return call.model_copy(update={"function": call.function.model_copy(update={"arguments": ""})})


def _arguments(call: ToolCall) -> int:
    arguments = call.function.arguments
    return _utf8(arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False))


def _utf8(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass")) if not value.isascii() else len(value)


class _Sizer:
    """Estimated JSON bytes: exact for long strings (each distinct one measured once), close for the rest."""

    def __init__(self) -> None:
        self._long: dict[int, int] = {}
        #: A message's copy with its texts emptied, and the bytes that left out, by the message's identity
        #: (the message kept: its id stays its own). A long conversation's older messages are emptied in
        #: every later turn: one copy each, not one per turn.
        self.emptied: dict[int, tuple[Message, Message, int]] = {}

    def text(self, value: object) -> int:
        if not isinstance(value, str):
            return 0 if value is None else len(str(value))
        if len(value) < 64:
            return len(value) + 2
        known = self._long.get(id(value))
        if known is None:
            encoded = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
            known = self._long[id(value)] = len(encoded)
        return known

    def trace(self, trace: Trace) -> int:
        total = sum(self.text(k) + 24 for k in (*trace.rewards, *trace.metrics))
        total += _EDGE_BYTES * len(trace.edges)
        total += self.text(trace.trace_id) + self.text(trace.task_id) + self.text(trace.system)
        for event in trace.events:
            total += _EVENT_BYTES + sum(self.text(getattr(event, name)) for name in _EVENT_FIELDS)
            total += sum(self.text(o) + 1 for o in event.options or ())
        return total

    def turn_fixed(self, turn: Turn) -> int:
        """A turn but its messages (its tools and request parameters, written once per span received,
        are left out: they do not amplify)."""
        total = _TURN_BYTES + sum(self.text(getattr(turn, name)) for name in _TURN_FIELDS)
        total += sum(self.text(k) + 24 for k in turn.credit or ()) + 6 * len(turn.event_ids)
        for ids in (turn.prompt_token_ids, turn.completion_token_ids, turn.completion_logprobs):
            total += 12 * len(ids or ())
        return total

    def messages(self, messages: list[Message] | None) -> int:
        return sum(self.message(m) for m in messages or ())

    def message(self, message: Message) -> int:
        total = _MESSAGE_BYTES + self.text(message.content) + self.text(message.reasoning_content)
        return total + sum(_arguments(c) + _CALL_BYTES for c in message.tool_calls or ())

    @staticmethod
    def floor(messages: list[Message]) -> int:
        """The messages with every text empty."""
        total = 0
        for m in messages:
            total += _MESSAGE_BYTES + 2 + (2 if m.reasoning_content is not None else 0)
            total += (_CALL_BYTES + 2) * len(m.tool_calls or ())
        return total


_EVENT_FIELDS: Final = (*_EVENT_IDS, "reason", "content_ref", "span_id", "otel_trace_id")
_TURN_FIELDS: Final = (
    "trace_id", "task_id", "turn_id", *_TURN_IDS, "input_ref", "output_ref", "response_id",
)
