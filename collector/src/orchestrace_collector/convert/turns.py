"""Model calls (turns): the training samples, linked to the events their agent instance produced.

A turn links the events of its instance's timeline from the turn's start up to the start of the instance's
next turn; its tokens are added to the first event it links (the event's ``tokens`` field; of the tool calls
it asked for at once or the agents it started at once, the first by tool or target and input).

Prompts stored once: a model call that names an earlier call of its trace (``orchestrace.content.prefix_*``)
exported only the messages that call did not; its full prompt is rebuilt as
``(prompt(prefix) + completion(prefix))[:prefix_length] + own messages``, following chains of such references.
A prompt that cannot be rebuilt whole (a referenced call missing or without content, a reference loop, fewer
messages than ``orchestrace.content.input_message_count`` says) keeps what exists and is marked incomplete.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Final

import orchestrace_semconv as sc

from ..spans import Attributes
from . import as_genai, call_details
from .actors import Actors, Instance
from .batches import Batches
from .chat import ChatMessage, prompt_and_completion
from .classify import EMBEDDING
from .content import INPUT_CONTENT, OUTPUT_CONTENT, ContentStore
from .events import Ev, EventSet, span_error
from .forest import Node
from .vocabularies import INPUT_TOKENS, OUTPUT_TOKENS


@dataclass(slots=True, eq=False, init=False)
class TurnRec:
    node: Node
    owner: Instance
    model: str | None
    provider: str | None
    input_tokens: int | None
    output_tokens: int | None
    input_ref: str | None
    output_ref: str | None
    prompt: list[ChatMessage] | None
    completion: list[ChatMessage] | None
    prompt_incomplete: bool  # the prompt could not be rebuilt whole (see the module docstring)
    error: bool | None  # the model call ended with status ERROR
    error_type: str | None
    #: The turn's other fields read from the span (``call_details``), only those it has.
    details: dict[str, Any] | None

    def __init__(self, node: Node, owner: Instance, model: str | None, provider: str | None,
                 input_tokens: int | None, output_tokens: int | None, input_ref: str | None,
                 output_ref: str | None, prompt: list[ChatMessage] | None,
                 completion: list[ChatMessage] | None) -> None:
        # Written out, as ``events.Ev``'s: mypyc compiles this one, where the dataclass's runs interpreted.
        self.node = node
        self.owner = owner
        self.model = model
        self.provider = provider
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.input_ref = input_ref
        self.output_ref = output_ref
        self.prompt = prompt
        self.completion = completion
        self.prompt_incomplete = False
        self.error = None
        self.error_type = None
        self.details = None

    @property
    def tokens(self) -> int:
        return (self.input_tokens or 0) + (self.output_tokens or 0)


#: Larger token counts are not counts (OTLP ints are int64; a sum of doubles near 1e308 overflows a float).
_MAX_COUNT: Final = 2**63 - 1
#: The floats that are at most ``_MAX_COUNT`` are those below this one (no float lies between the two).
_FLOAT_LIMIT: Final = 2.0**63


def _count(attrs: Attributes, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attrs.get(key)
        # One type at a time: compiled, each test and comparison is then native (a tuple of types, or an
        # untyped comparison, is a generic call).
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if 0 <= value <= _MAX_COUNT:
                return int(value)
        elif isinstance(value, float) and 0.0 <= value < _FLOAT_LIMIT:
            return int(value)
    return None


@dataclass(frozen=True, slots=True)
class TurnIndex:
    """The turns' links to the events (``link_turns``): by turn position, the events each links; by event
    position, the tokens counted on it (None: none)."""

    events: list[list[Ev]]
    tokens: list[int | None]


def build_turns(model_nodes: list[Node], actors: Actors, store: ContentStore) -> list[TurnRec]:
    """The turns in start order (``link_turns`` links them to the events)."""
    turns: list[TurnRec] = []
    for node in sorted(model_nodes, key=lambda n: (n.start_ns, n.span.span_id)):
        owner = actors.owners[node.pre]
        attrs = as_genai.model_call(node.span)
        prompt, completion = prompt_and_completion(attrs)
        turn = TurnRec(
            node,
            owner,
            node.model,
            node.provider,
            _count(attrs, INPUT_TOKENS),
            _count(attrs, OUTPUT_TOKENS),
            store.ref(attrs, sc.ORCH_INPUT_REF, INPUT_CONTENT),
            store.ref(attrs, sc.ORCH_OUTPUT_REF, OUTPUT_CONTENT),
            prompt,
            completion,
        )
        if node.span.status_code:
            turn.error, turn.error_type = span_error(node.span)
        turn.details = call_details.details(attrs)
        if node.inner_model is not None:
            inner = call_details.details(as_genai.model_call(node.inner_model.span))
            turn.details = call_details.with_token_ids(turn.details, inner)
        turns.append(turn)
    if any(sc.ORCH_PREFIX_SPAN_ID in t.node.span.attributes for t in turns):
        _rebuild_prompts(turns)
    return turns


def embedding_tokens(embeddings: list[Node]) -> int:
    """Tokens of the model uses that are no turns (``forest.embeddings``: embeddings, retrievals, reranks):
    for ``costs``, each counted once (not again for one recorded inside another, as two instrumentations of
    one call do)."""
    total = 0
    for node in embeddings:
        if _inside_embedding(node):
            continue
        attrs = as_genai.model_call(node.span)
        total += (_count(attrs, INPUT_TOKENS) or 0) + (_count(attrs, OUTPUT_TOKENS) or 0)
    return total


def _inside_embedding(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.sub_kind == EMBEDDING:
            return True
        parent = parent.parent
    return False


def turn_starts(turns: list[TurnRec], instances: int) -> list[list[int]]:
    """By ``Instance.index`` (``instances`` of them): its model calls' start times, in order (``Batches``)."""
    starts: list[list[int]] = [[] for _ in range(instances)]
    for turn in turns:
        starts[turn.owner.index].append(turn.node.start_ns)
    return starts


def link_turns(turns: list[TurnRec], events: EventSet, batches: Batches) -> TurnIndex:
    """Each turn's events, and its tokens added to the first of them (see the module docstring)."""
    by_owner: list[list[int]] = [[] for _ in events.timelines]  # by ``Instance.index``: its turns' positions
    for k, turn in enumerate(turns):
        by_owner[turn.owner.index].append(k)
    index = TurnIndex([[] for _ in turns], [None] * len(events.events))
    for group in by_owner:
        if group:
            _link(turns, group, events, batches, index)
    return index


def _prefix(turn: TurnRec) -> tuple[str, int] | None:
    attrs = turn.node.span.attributes
    span_id = attrs.get(sc.ORCH_PREFIX_SPAN_ID)
    length = attrs.get(sc.ORCH_PREFIX_LENGTH)
    if not span_id or not isinstance(length, int) or isinstance(length, bool) or length < 0:
        return None
    return str(span_id), length


def _rebuild_prompts(turns: list[TurnRec]) -> None:
    """Full prompts from prefix references, iteratively (chains are as long as the run), each built once."""
    by_span = {(t.node.span.trace_id, t.node.span.span_id): t for t in turns}
    done: dict[int, tuple[list[ChatMessage], bool]] = {}  # id(turn) -> (full prompt, rebuilt whole)
    for turn in turns:
        stack = [turn] if id(turn) not in done else []
        on_stack = {id(turn)}
        while stack:
            cur = stack[-1]
            own = cur.prompt or []
            ref = _prefix(cur)
            earlier = by_span.get((cur.node.span.trace_id, ref[0])) if ref is not None else None
            if ref is None:
                # A call that starts its history (without captured content nothing can be built on it), or
                # one whose reference is unreadable.
                whole = cur.prompt is not None and sc.ORCH_PREFIX_SPAN_ID not in cur.node.span.attributes
                done[id(cur)] = (own, whole)
            elif earlier is not None and id(earlier) not in done and id(earlier) not in on_stack:
                stack.append(earlier)  # build the earlier call's prompt first
                on_stack.add(id(earlier))
                continue
            elif earlier is None or id(earlier) not in done:
                done[id(cur)] = (own, False)  # the referenced call is missing, or references loop
            else:
                history, whole = done[id(earlier)]
                history = history + (earlier.completion or [])
                whole = whole and earlier.completion is not None and len(history) >= ref[1]
                done[id(cur)] = (history[: ref[1]] + own, whole)
            stack.pop()
            on_stack.discard(id(cur))
        if sc.ORCH_PREFIX_SPAN_ID in turn.node.span.attributes:
            turn.prompt, whole = done[id(turn)]
            count = turn.node.span.attributes.get(sc.ORCH_INPUT_MESSAGE_COUNT)
            turn.prompt_incomplete = not whole or (isinstance(count, int) and len(turn.prompt) != count)


def _first_event(events: list[Ev], batches: Batches) -> Ev:
    """The event a call's tokens count on: its first, but of the tool calls it asked for at once or the agents
    it started at once (which thread started first is a race) the first by tool or target and input, so that
    two runs of one program agree."""
    calls = batches.calls.get(events[0].index)
    if calls is None or len(calls) < 2:
        return events[0]
    return min(calls, key=lambda ev: (ev.tool or ev.to or "", ev.content_ref or ""))


def _link(turns: list[TurnRec], group: list[int], events: EventSet, batches: Batches,
          index: TurnIndex) -> None:
    """Links the turns ``group`` (positions in ``turns``) of one instance."""
    owner = turns[group[0]].owner
    timeline = events.timelines[owner.index]
    times = [ev.key[0] for ev in timeline]  # in order: the timeline is sorted
    tokens = index.tokens
    i = 0
    for n, k in enumerate(group):
        turn = turns[k]
        first = bisect_left(times, turn.node.start_ns, i)
        i = bisect_left(times, turns[group[n + 1]].node.start_ns, first) if n + 1 < len(group) else len(times)
        linked = index.events[k] = timeline[first:i]
        if turn.tokens:
            # A call that led to no event of its own (its agent's last one, say) counts on the agent's event
            # just before it, else its return: the events' tokens add up to the trace's.
            if linked:
                holder: Ev | None = _first_event(linked, batches)
            else:
                holder = timeline[i - 1] if i else events.ret(owner)
            if holder is not None:
                tokens[holder.index] = (tokens[holder.index] or 0) + turn.tokens
