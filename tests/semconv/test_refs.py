"""Content refs written by orjson are json's byte for byte: tens of thousands of seeded random values mixing
every type on which the two libraries differ, each known difference on its own, and the typical values of a
LangGraph run taking the fast path."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import importlib.metadata
import json
import math
import random
import re
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from orchestrace_semconv import refs
from pydantic import BaseModel, ConfigDict

SEPARATORS = (",", ":")


def _oracle_text(value: Any) -> str:
    """The documented serialization, by ``json`` alone: sorted keys, insertion order when keys of mixed types
    cannot be sorted, ``repr`` when json cannot write the value at all."""
    try:
        try:
            return json.dumps(value, sort_keys=True, separators=SEPARATORS, ensure_ascii=False,
                              default=refs._json_default)
        except TypeError:
            return json.dumps(value, separators=SEPARATORS, ensure_ascii=False, default=refs._json_default)
    except Exception:
        return repr(value)


def _oracle_ref(value: Any) -> str:
    return "sha256:" + hashlib.sha256(_oracle_text(value).encode("utf-8", "surrogatepass")).hexdigest()


def _same_as_json(value: Any, limit: int | None = None) -> bool:
    """Whether ``content_ref`` and ``to_text`` of ``value`` are the oracle's (asserted); returns whether
    orjson wrote it (the fast path)."""
    try:
        fast = isinstance(refs._walk(value), bytes)
    except Exception:
        fast = False
    assert refs.content_ref(value) == _oracle_ref(value), value
    text = _oracle_text(value)
    expected = (text, False) if limit is None or len(text) <= limit else (text[:limit], True)
    assert refs.to_text(value, limit) == expected, value
    return fast


# --- the types the generator mixes ----------------------------------------------------------------------


class Plain(enum.Enum):
    A = 1
    B = "b"


class Level(enum.IntEnum):
    HIGH = 3


class Colour(enum.StrEnum):
    RED = "red"


class Ratio(float, enum.Enum):
    TINY = 1e-5
    HALF = 0.5


class Dumped(enum.Enum):
    """An Enum with a ``model_dump``: json hands it to ``default``, orjson writes its value."""

    X = 1

    def model_dump(self, mode: str) -> dict[str, str]:
        return {"dumped": mode}


class Text(str):
    pass


class Count(int):
    pass


class Real(float):
    pass


class Mapping(dict[str, Any]):
    pass


class Items(list[Any]):
    pass


@dataclasses.dataclass
class Point:
    x: Any
    y: Any


class Usage(BaseModel):
    tokens: int
    cost: float
    extra: Any = None


class Constants(BaseModel):
    """NaN and infinities stay floats in its JSON-mode dump."""

    model_config = ConfigDict(ser_json_inf_nan="constants")
    value: float
    level: Level = Level.HIGH
    when: datetime.date = datetime.date(2026, 1, 2)
    ident: uuid.UUID = uuid.UUID(int=7)
    by_int: dict[int, str] = {}


class Duck:
    """Not pydantic, but has a ``model_dump``: whatever it returns is written."""

    def __init__(self, dumped: Any) -> None:
        self.dumped = dumped

    def model_dump(self, mode: str) -> Any:
        return self.dumped

    def __repr__(self) -> str:
        return f"Duck({self.dumped!r})"


class Opaque:
    def __repr__(self) -> str:
        return "<opaque é>"


def _float(rng: random.Random) -> float:
    pick = rng.random()
    if pick < 0.3:  # any bit pattern: subnormals, NaN payloads, infinities, huge and tiny
        return float(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
    if pick < 0.5:  # around the fast path's bounds
        bound = rng.choice([1e-4, 1e16, 1e-5, 1e15, 5e-324, 1.7976931348623157e308])
        return rng.choice([-1, 1]) * bound * (1 + rng.choice([-1, 0, 1]) * 2 ** -52 * rng.randint(0, 3))
    if pick < 0.6:
        return rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, 0.1, 100.0])
    return rng.uniform(-1, 1) * 10 ** rng.randint(-12, 20)


def _int(rng: random.Random) -> int:
    pick = rng.random()
    if pick < 0.6:
        return rng.randint(-1000, 1000)
    edge = rng.choice([2 ** 63, 2 ** 64, -(2 ** 63), 2 ** 53, 10 ** 30])
    return edge + rng.randint(-2, 2)


_ALPHABETS = [
    "abcXYZ 019", "éüß中文", "\U0001F600\U00010348", "\x00\x01\x1f\x7f\"\\\n\t\r\b\f/",
    "\u2028\u2029\ufeff\ue000\uffff", "<>&'",
]


def _str(rng: random.Random) -> str:
    if rng.random() < 0.02:
        return "x\ud800y"  # a lone surrogate: orjson refuses it, json writes it
    alphabet = "".join(rng.sample(_ALPHABETS, rng.randint(1, 3)))
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, 8, 20])))


def _key(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.9:
        return _str(rng)
    return rng.choice([_int(rng), 1.5, True, None, Text("k"), (1, 2), Level.HIGH])


def _leaf(rng: random.Random) -> Any:
    makers: list[Callable[[], Any]] = [
        lambda: _str(rng), lambda: _int(rng), lambda: _float(rng), lambda: rng.choice([True, False, None]),
        lambda: rng.choice(list(Plain) + list(Level) + list(Colour) + list(Ratio) + list(Dumped)),
        lambda: uuid.UUID(int=rng.getrandbits(128)),
        lambda: rng.choice([datetime.datetime(2026, 1, 2, 3, 4, 5, 6), datetime.date(2026, 1, 2),
                            datetime.time(3, 4, 5)]),
        lambda: rng.choice([Text("t"), Count(5), Real(0.25), Real(1e-7), Mapping(a=1), Items([1, "x"])]),
        lambda: rng.choice([np.float64(_float(rng)), np.int64(rng.randint(-9, 9)), np.array([1.5, 2]),
                            np.bool_(True)]),
        lambda: rng.choice([b"by\xfftes", bytearray(b"ba"), memoryview(b"mv")]),
        lambda: orjson.Fragment(b'{"raw":1}'),
        lambda: Opaque(),
    ]
    weights = [30, 15, 15, 10, 3, 2, 2, 3, 2, 2, 1, 1]
    return rng.choices(makers, weights)[0]()


def _message(rng: random.Random, depth: int) -> Any:
    kind = rng.random()
    if kind < 0.3:
        return HumanMessage(content=_str(rng), id=str(uuid.UUID(int=rng.getrandbits(128))))
    if kind < 0.6:
        calls = [{"name": _str(rng) or "t", "args": {"q": _value(rng, depth + 1)}, "id": f"call-{i}",
                  "type": "tool_call"} for i in range(rng.randint(0, 2))]
        return AIMessage(content=_str(rng), tool_calls=calls, id=f"lc_run--{rng.getrandbits(32):08x}-0",
                         usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
                         response_metadata={"score": _float(rng), "model": "m"})
    if kind < 0.75:
        return ToolMessage(content=_str(rng), tool_call_id="call-0", name="search")
    if kind < 0.85:
        return Usage(tokens=rng.randint(0, 99), cost=_float(rng), extra=_value(rng, depth + 1))
    if kind < 0.9:
        return Constants(value=_float(rng), by_int={rng.randint(0, 9): "v"})
    return Duck(_value(rng, depth + 1))


def _value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth >= 4 or pick < 0.35:
        return _leaf(rng)
    width = rng.choice([0, 1, 2, 3, 5])
    if pick < 0.6:
        return {_key(rng): _value(rng, depth + 1) for _ in range(width)}
    if pick < 0.75:
        return [_value(rng, depth + 1) for _ in range(width)]
    if pick < 0.8:
        return tuple(_value(rng, depth + 1) for _ in range(width))
    if pick < 0.92:
        return _message(rng, depth)
    if pick < 0.96:
        return Point(_value(rng, depth + 1), _leaf(rng))
    return rng.choice([set, frozenset])(rng.choice([1, 2, "a", "b", 2.5]) for _ in range(width))


def _typical_value(rng: random.Random) -> Any:
    """What a LangGraph run refs, with random contents: state updates of messages, prompts, Send payloads,
    tool arguments."""
    messages = [_message(rng, 3) for _ in range(rng.randint(1, 4))]
    return rng.choice([
        {"messages": messages},
        messages,
        {"topic": _str(rng), "index": rng.randint(0, 64)},
        {"query": _str(rng), "limit": rng.randint(1, 9), "threshold": rng.random()},
        {"results": [_str(rng) for _ in range(rng.randint(0, 3))]},
        {"__type": "tool_call_with_context", "state": {"messages": messages},
         "tool_call": {"name": "t", "args": {}, "id": "c", "type": "tool_call"}},
    ])


@pytest.mark.parametrize("seed", range(4))
def test_random_values_have_the_json_refs_and_texts(seed: int) -> None:
    rng = random.Random(seed)
    fast = 0
    for n in range(6000):
        value = _typical_value(rng) if n % 3 == 0 else _value(rng)
        if isinstance(value, str | bytes | bytearray | memoryview):  # hashed as they are, never serialized
            value = [value]
        fast += _same_as_json(value, rng.choice([None, 0, 5, 40, 1000]))
    # Both paths ran many times: orjson for plain values (pydantic messages among them), json for the rest.
    assert 1500 < fast < 5000


def _json_leaf(rng: random.Random) -> Any:
    """What providers put in messages: texts (non-ASCII among them), numbers (floats of every kind), booleans
    and nulls."""
    return rng.choice([_str, _int, _float, lambda r: r.choice([True, False, None])])(rng)


def _metadata(rng: random.Random, depth: int = 0) -> Any:
    """A message's metadata or tool arguments: nested JSON mostly, now and then any value of the generator."""
    pick = rng.random()
    if pick < 0.08:
        return _value(rng, 2)
    if depth >= 3 or pick < 0.5:
        return _json_leaf(rng)
    if pick < 0.85:
        return {_str(rng): _metadata(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 4]))}
    return [_metadata(rng, depth + 1) for _ in range(rng.choice([0, 1, 3]))]


def _kwargs(rng: random.Random) -> dict[str, Any]:
    return {_str(rng): _metadata(rng) for _ in range(rng.choice([0, 0, 1, 3]))}


def _content(rng: random.Random) -> Any:
    if rng.random() < 0.7:
        return _str(rng)
    parts: list[Any] = [_str(rng), {"type": "text", "text": _str(rng)},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _str(rng)}},
                        {"type": "text", "text": _str(rng), "extras": _metadata(rng)}]
    return rng.sample(parts, rng.randint(0, len(parts)))


def _langchain_message(rng: random.Random) -> BaseMessage:
    """A random LangChain message of every kind a graph's state holds."""
    common: dict[str, Any] = {"content": _content(rng), "additional_kwargs": _kwargs(rng),
                              "response_metadata": _kwargs(rng)}
    if rng.random() < 0.5:
        common["id"] = rng.choice([f"lc_run--{uuid.UUID(int=rng.getrandbits(128))}-0", _str(rng)])
    if rng.random() < 0.3:
        common["name"] = _str(rng)
    kind = rng.random()
    if kind < 0.25:
        return HumanMessage(**common)
    if kind < 0.35:
        return SystemMessage(**common)
    if kind < 0.75:
        calls = [{"name": _str(rng) or "t", "args": _kwargs(rng), "id": f"call_{rng.getrandbits(40):x}",
                  "type": "tool_call"} for _ in range(rng.randint(0, 3))]
        usage: dict[str, Any] = {"input_tokens": rng.randint(0, 10**6), "output_tokens": rng.randint(0, 999),
                                 "total_tokens": rng.randint(0, 10**6)}
        if rng.random() < 0.3:
            usage["input_token_details"] = {"cache_read": rng.randint(0, 99), "audio": 0}
        return AIMessage(**common, tool_calls=calls, usage_metadata=usage if rng.random() < 0.7 else None)
    return ToolMessage(**common, tool_call_id=f"call_{rng.getrandbits(40):x}",
                       status=rng.choice(["success", "error"]),
                       artifact=_metadata(rng) if rng.random() < 0.3 else None)


@pytest.mark.parametrize("seed", range(3))
def test_random_langchain_messages_have_the_json_refs_and_texts(seed: int) -> None:
    # Messages as a graph's state updates, prompts and single values hold them: whatever the serializer route
    # a model takes, the ref and text are json's of its model_dump(mode="json").
    rng = random.Random(1000 + seed)
    fast = 0
    for n in range(1500):
        messages = [_langchain_message(rng) for _ in range(rng.randint(1, 3))]
        value = [{"messages": messages}, messages, messages[0]][n % 3]
        fast += _same_as_json(value, rng.choice([None, 0, 40, 1000]))
    # Both paths ran many times: orjson for plain messages, json for messages holding what it writes its way.
    assert 300 < fast < 1400, fast


# --- each known difference on its own: orjson alone writes it otherwise (or refuses it) -------------------


def _orjson_alone(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, default=refs._json_default, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None


a_loop: list[Any] = []
a_loop.append(a_loop)
deep: list[Any] = []
for _ in range(300):
    deep = [deep]

#: Values orjson alone writes otherwise than json, or refuses.
DIFFERENCES = {
    "float 1e-05": [1e-05], "float 2.5e-07": {"x": 2.5e-7}, "NaN": [math.nan], "infinity": {"x": -math.inf},
    "int beyond 64 bits": [2 ** 64], "int key": {1: "a", 2: "b"}, "mixed keys": {1: "a", "b": 2},
    "bool and None keys": {True: 1, None: 2}, "str subclass key": {Text("k"): 1},
    "Enum": [Plain.A], "float Enum": [Ratio.TINY], "Enum with model_dump": [Dumped.X],
    "UUID": [uuid.UUID(int=1)], "datetime": [datetime.datetime(2026, 1, 2)],
    "date": {"d": datetime.date(2026, 1, 2)}, "time": [datetime.time(1, 2)], "float subclass": [Real(1e-7)],
    "lone surrogate": ["a\udc80"], "numpy float": [np.float64(1e-5)], "fragment": [orjson.Fragment(b"[1]")],
    "circular": a_loop, "deep": deep, "model dump with NaN": [Constants(value=math.nan)],
    "model dump with 1e-7": {"u": Usage(tokens=1, cost=1e-7)}, "duck dump with an Enum": [Duck([Plain.B])],
}
#: Values json writes as orjson does, but through ``default`` or as a subclass of one of its types: json's
#: rules decide.
SAME_BY_OTHER_RULES = {
    "dataclass": [Point(1, 2.5)], "str subclass": [Text("a")], "int subclass": [Count(3)],
    "dict subclass": [Mapping(z=1, a=2)], "list subclass": [Items([2, 1])], "numpy array": [np.array([1, 2])],
    "set": [{3, 1, 2}], "bytes in a list": [b"\xffab"], "float Enum in range": [Ratio.HALF],
}


@pytest.mark.parametrize("name", list(DIFFERENCES))
def test_each_difference_takes_json(name: str) -> None:
    value = DIFFERENCES[name]
    assert _orjson_alone(value) != _oracle_text(value).encode("utf-8", "surrogatepass")
    assert not _same_as_json(value, 50)


@pytest.mark.parametrize("name", list(SAME_BY_OTHER_RULES))
def test_values_json_writes_by_its_other_rules_have_its_refs(name: str) -> None:
    _same_as_json(SAME_BY_OTHER_RULES[name], 50)


class Unhashable(type):
    """A metaclass that makes its classes unhashable (``__eq__`` without ``__hash__``)."""

    def __eq__(cls, other: object) -> bool:
        return cls is other

    __hash__ = None  # type: ignore[assignment]


class Odd(metaclass=Unhashable):
    def __repr__(self) -> str:
        return "<odd>"


class BadLength:
    def __len__(self) -> int:
        raise ValueError("no length")

    def __repr__(self) -> str:
        return "<bad length>"


class BadItems(list[Any]):
    def __iter__(self) -> Any:
        raise RuntimeError("no items")


#: Values whose own methods raise where the walk or json call them: never an exception, json's ref or repr's.
RAISING = {"unhashable class": [Odd()], "key whose len raises": {BadLength(): 1},
           "list whose iteration raises, sized after an Enum": [BadItems([1]), Plain.A]}


@pytest.mark.parametrize("name", list(RAISING))
def test_values_whose_own_methods_raise_have_the_json_or_repr_ref(name: str) -> None:
    assert not _same_as_json(RAISING[name], 50)


def test_non_ascii_keys_sort_by_code_point() -> None:
    # UTF-8 bytes sort as code points do (UTF-16 units would put U+1F600 before U+FFFF).
    value = {"\U0001F600": 1, "\uffff": 2, "\ue000": 3, "é": 4, "z": 5, "": 6, "\x00": 7, "a\x00": 8}
    assert _same_as_json(value)
    assert list(json.loads(refs.to_text(value)[0])) == sorted(value)


def test_large_values_are_streamed_not_written_whole() -> None:
    for value in ({"k": "v" * (refs.CHUNK + 1)}, ["x" * 700_000, ("y" * 400_000,)], list(range(3000)),
                  {"m": HumanMessage(content="z" * (refs.CHUNK + 1))}):
        assert refs._walk(value) is False
        assert _same_as_json(value, 100) is False


@pytest.mark.parametrize(("value", "small"), [
    ([Mapping(k="v" * (refs.CHUNK + 1)), Plain.A], False),  # the Enum comes up first: the rest is only sized
    ([["v" * (refs.CHUNK + 1)], Plain.A], False),
    ([{"v" * (refs.CHUNK + 1)}, Plain.A], False),
    ([Items(range(3000)), Plain.A], False),
    ({1: "a", "k": ["v" * (refs.CHUNK + 1)]}, False),  # a key orjson refuses
    ([Mapping(a=1), {3, 1}, Items([2.5]), Plain.A], True),
    ({1: "a", 2: [Usage(tokens=1, cost=0.5)]}, True),
])
def test_the_walk_that_rules_orjson_out_sizes_the_value_for_json(value: Any, small: bool) -> None:
    # One walk: past what orjson would write otherwise, it goes on sizing the value, so json streams what is
    # large and writes the rest in one piece without a second walk.
    assert refs._walk(value) is small
    assert _same_as_json(value, 100) is False


def test_typical_langgraph_values_take_the_fast_path() -> None:
    reply = AIMessage(content="step 1", id="lc_run--1-0", response_metadata={"latency": 0.25},
                      usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15})
    call = AIMessage(content="", tool_calls=[{"name": "transfer", "args": {"to": "coder"}, "id": "h-0",
                                              "type": "tool_call"}])
    prompt = [HumanMessage(content="build it"), call, ToolMessage(content="ok", tool_call_id="h-0")]
    context = {"__type": "tool_call_with_context", "tool_call": call.tool_calls[0],
               "state": {"messages": prompt}}
    for value in ({"messages": [reply]}, prompt, {"topic": "t", "index": 3}, {"query": "topic"},
                  {"results": ["part of t #3"]}, None, 7, 0.5, context):
        assert _same_as_json(value), value


class Overridden(Usage):
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {"overridden": super().model_dump(**kwargs)}


def test_a_models_own_model_dump_is_what_is_written() -> None:
    # pydantic's model_dump is skipped for its serializer; a model's own model_dump never is.
    value = {"u": Overridden(tokens=1, cost=0.5)}
    assert _same_as_json(value)
    assert refs._walk(value) == b'{"u":{"overridden":{"cost":0.5,"extra":null,"tokens":1}}}'


def test_the_readme_names_every_dependency() -> None:
    readme = (Path(__file__).parents[2] / "semconv" / "README.md").read_text()
    said = re.search(r"depending only on\s+`([^`]+)`\s+and\s+`([^`]+)`", readme)
    assert said is not None
    requires = importlib.metadata.requires("orchestrace-semconv") or []
    required = {re.split(r"[<>=;\s\[]", r, maxsplit=1)[0] for r in requires}
    assert required == set(said.groups())
