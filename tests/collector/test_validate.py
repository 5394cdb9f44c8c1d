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


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda t: t["events"][0].update(decision="route"), "events/0: decision 'route' is not one of spawn"),
        (lambda t: t["events"][0].update(decision=None), "events/0: decision None is not one of"),
        (lambda t: t["rewards"].update(vibes=1.0), "rewards/vibes: not a reward key"),
        (lambda t: t["rewards"].update({"agent": 1.0}), "rewards/agent: not a reward key"),
        (lambda t: t["rewards"].update({"verifier:": 1.0}), "rewards/verifier:: not a reward key"),
        (lambda t: t["rewards"].update({"credit:planet:x": 1.0}), "rewards/credit:planet:x: not a"),
        (lambda t: t["rewards"].update({"credit:agent": 1.0}), "rewards/credit:agent: not a reward key"),
    ],
)
def test_the_contract_vocabulary_is_enforced_unless_schema_only(damage: Any, expected: str) -> None:
    trace = copy.deepcopy(_example())
    damage(trace)
    problems = validate_trace(trace)
    assert any(p.startswith(expected) for p in problems), problems
    assert validate_trace(trace, schema_only=True) == []


def test_every_key_form_of_the_contract_is_accepted() -> None:
    trace = copy.deepcopy(_example())
    trace["events"][0]["decision"] = "delegate"
    trace["rewards"] = {"team": 1.0, "shared": 0.5, "verifier:unit_tests": 0.9, "agent:writer#2": 0.6,
                        "turn:00f1": 0.1, "credit:agent:writer#2": 0.6, "role:writer": 0.5,
                        "tool:search": -0.2}
    assert validate_trace(trace) == []


def test_cli_validate_schema_only(tmp_path: Path) -> None:
    from orchestrace_collector.cli import app
    from typer.testing import CliRunner

    trace = copy.deepcopy(_example())
    trace["events"][0]["decision"] = "handoff"
    (tmp_path / "trace.json").write_text(json.dumps(trace))
    strict = CliRunner().invoke(app, ["validate", str(tmp_path / "trace.json")], terminal_width=300)
    assert strict.exit_code == 1 and "decision 'handoff' is not one of" in strict.output
    bare = CliRunner().invoke(app, ["validate", str(tmp_path / "trace.json"), "--schema-only"])
    assert bare.exit_code == 0, bare.output
