"""Causal turn weights are computed in one pass over the turns: the causal set was recomputed for every
turn (quadratic; 48 s for a 2,400-turn episode), which ``orchestrace view``'s credit page and every
conversion of a long episode paid."""

from __future__ import annotations

import pytest
from orchestrace_collector.convert import credit


def test_causal_turns_are_found_once_and_weights_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = credit._causal_turns

    def counted(*args: object) -> set[int]:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(credit, "_causal_turns", counted)
    # Two activations of four turns each; the answer depends on event 10 (a's third turn) only.
    turn_events = [{i} for i in range(8, 16)]
    owners = ["a", "b"] * 4  # turns 0, 2, 4, 6 are a's; event 10 is turn 2
    weights = credit.turn_weights("causal", turn_events, owners, on_path={10})
    assert weights == [0.5, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0]  # a's turns up to its causal one
    # Compiled (make sync's mypyc build), the module's own calls do not go through the patched name.
    compiled = not str(credit.__file__).endswith(".py")
    assert len(calls) == (0 if compiled else 1)
    assert credit.turn_weights("causal", turn_events, owners, on_path=set()) == [1 / 8] * 8  # none: uniform
    only_b = credit.turn_weights("causal", turn_events, owners, {10}, among={1, 3})
    assert only_b == [0, 0.5, 0, 0.5, 0, 0, 0, 0]  # none of them causal: spread over those allowed
