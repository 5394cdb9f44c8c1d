"""validate_trace: the packaged upstream schema plus the upstream referential checks."""

from __future__ import annotations

import copy
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from orchestrace_collector import validate
from orchestrace_collector.validate import validate_trace

SEED = Path(__file__).resolve().parents[3] / "shared" / "seed-schema"
PACKAGED = files("orchestrace_collector").joinpath("schema/trace_schema.json")


def _example() -> dict[str, Any]:
    path = SEED / "example_trace.json"
    if not path.exists():
        pytest.skip("the shared seed schema is not beside the repository")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_packaged_schema_is_byte_identical_to_the_seed_schema() -> None:
    seed = SEED / "trace_schema.json"
    if not seed.exists():
        pytest.skip("the shared seed schema is not beside the repository")
    assert PACKAGED.read_bytes() == seed.read_bytes()


def test_the_upstream_example_is_valid() -> None:
    assert validate_trace(_example()) == []


def test_the_validator_is_built_once() -> None:
    validate_trace(_example())
    validate_trace(_example())
    assert validate._validator.cache_info().currsize == 1


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda t: t["events"].append(dict(t["events"][0])), "duplicate event id 'e1'"),
        (lambda t: t["events"][2].update(t=-0.5), "t is negative"),
        (
            lambda t: t["edges"].append({"src": "e1", "dst": "e99", "type": "causal"}),
            "dst 'e99' is not an event id",
        ),
        (
            lambda t: t["edges"].append({"src": "nope", "dst": "e1", "type": "causal"}),
            "src 'nope' is not an event id",
        ),
        (lambda t: t["costs"].update(tool_calls=-1), "negative cost"),
        (lambda t: t["events"][0].update(type="thinking"), "'thinking' is not one of"),
        (lambda t: t["edges"][0].update(weight=1), "Additional properties are not allowed"),
        (lambda t: t.update(extra=1), "Additional properties are not allowed"),
        (lambda t: t.pop("costs"), "'costs' is a required property"),
        (lambda t: t.update(events=[]), "should be non-empty"),
        (lambda t: t["rewards"].update(team="high"), "'high' is not of type 'number'"),
    ],
)
def test_each_rule_is_reported(damage: Any, expected: str) -> None:
    trace = copy.deepcopy(_example())
    damage(trace)
    problems = validate_trace(trace)
    assert any(expected in p for p in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    trace = copy.deepcopy(_example())
    trace["events"][1]["id"] = "e1"
    trace["costs"]["tokens"] = -3
    problems = validate_trace(trace)
    assert any("duplicate" in p for p in problems) and any("costs/tokens" in p for p in problems)


def test_non_object_input_is_reported_not_raised() -> None:
    assert validate_trace([1, 2]) != []  # type: ignore[arg-type]
    assert validate_trace({"events": "x", "edges": 3, "costs": []}) != []
