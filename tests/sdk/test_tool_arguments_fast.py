"""``ToolArguments`` binds a function of plain parameters itself (without ``Signature.bind``, which cost as
much as the rest of a tool's span): the same answer as binding through the signature, call shape by shape,
also for the calls the function refuses."""
from __future__ import annotations

from typing import Any

import pytest
from orchestrace.arguments import ToolArguments


def two(a: Any, b: Any = 1) -> None: ...
def three(x: Any, y: Any, z: Any = None) -> None: ...
def none() -> None: ...


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (args, kwargs)
    for args in ((), (2,), (2, 3), (2, 3, 4), (2, 3, 4, 5))
    for kwargs in ({}, {"a": 9}, {"b": 9}, {"y": 9}, {"z": 9}, {"tool_call_id": "c1"},
                   {"b": 9, "tool_call_id": "c1"}, {"nope": 1}, {"x": 1, "y": 2})
]


@pytest.mark.parametrize("func", [two, three, none])
def test_plain_functions_are_bound_as_the_signature_binds_them(func: Any) -> None:
    fast = ToolArguments(func)
    slow = ToolArguments(func)
    slow._plain = None  # the general path, through Signature.bind
    assert fast._plain is not None
    for args, kwargs in CALLS:
        got, expected = fast.bind(args, kwargs), slow.bind(args, kwargs)
        assert got == expected, (args, kwargs)
        assert list(got) == list(expected) if isinstance(got, dict) else True  # in the same order


def test_other_signatures_take_the_general_path() -> None:
    def star(*items: Any) -> None: ...
    def keyword_only(a: Any, *, b: Any) -> None: ...
    def with_id(a: Any, tool_call_id: str) -> None: ...
    for func in (star, keyword_only, with_id, print):
        assert ToolArguments(func)._plain is None
    assert ToolArguments(star).bind((1, 2), {}) == {"items": [1, 2]}
    assert list(ToolArguments(two).bind((2,), {}).items()) == [("a", 2), ("b", 1)]
