"""Checks a written trace: the packaged upstream JSON Schema plus the referential rules the schema cannot
express; and an output directory's content store (every file named by the sha256 of its bytes).

The referential rules are those of the upstream validator: unique event ids, ``t >= 0``, every edge's ``src``
and ``dst`` an event id, every cost >= 0. They run even when the schema fails, on whatever parts have the
right shape, so one call reports every problem.

By default the contract's vocabulary is checked too (``schema_only`` leaves it out): an
``orchestrator_decision``'s ``decision``, when it has one, is one of the five sub-decisions
(``orchestrace_semconv.DECISION_KINDS``; a free-form kind is its ``label``), and every ``rewards`` key has one
of the contract's forms: a family (``team`` ..., ``shared`` and ``outcome`` included), ``family:name``, a
unit-scoped key ``unit:name`` (``agent:writer``), or a credited share ``credit:unit:name``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from orchestrace_semconv import DECISION_KINDS, REWARD_FAMILIES, REWARD_FAMILY_ALIASES, REWARD_UNITS

SCHEMA_RESOURCE = "schema/trace_schema.json"


@cache
def schema() -> dict[str, Any]:
    """The packaged upstream schema (a byte-identical copy of the seed schema)."""
    loaded: dict[str, Any] = json.loads(
        files("orchestrace_collector").joinpath(SCHEMA_RESOURCE).read_text("utf-8")
    )
    return loaded


@cache
def _validator() -> Draft202012Validator:
    Draft202012Validator.check_schema(schema())
    return Draft202012Validator(schema())


def validate_trace(obj: dict[str, Any], *, schema_only: bool = False) -> list[str]:
    """Every problem found in one trace object, as readable messages; empty when the trace is valid.
    ``schema_only``: the upstream checks alone, not the contract's vocabulary."""
    problems = [
        f"{_path(error.absolute_path)}: {error.message}"
        for error in sorted(_validator().iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    ]
    if not isinstance(obj, dict):
        return problems
    events = obj.get("events")
    ids: set[str] = set()
    if isinstance(events, list):
        for i, event in enumerate(events):
            if not isinstance(event, dict):
                continue
            event_id = event.get("id")
            if isinstance(event_id, str):
                if event_id in ids:
                    problems.append(f"events/{i}: duplicate event id {event_id!r}")
                ids.add(event_id)
            t = event.get("t")
            if isinstance(t, int | float) and not isinstance(t, bool) and t < 0:
                problems.append(f"events/{i}: t is negative ({t})")
    edges = obj.get("edges")
    if isinstance(edges, list):
        for i, edge in enumerate(edges):
            if not isinstance(edge, dict):
                continue
            for end in ("src", "dst"):
                ref = edge.get(end)
                if isinstance(ref, str) and ref not in ids:
                    problems.append(f"edges/{i}: {end} {ref!r} is not an event id")
    costs = obj.get("costs")
    if isinstance(costs, dict):
        for name, value in costs.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
                problems.append(f"costs/{name}: negative cost ({value})")
    if not schema_only:
        problems.extend(vocabulary_problems(obj))
    return problems


_KEY_HEADS = frozenset((*REWARD_FAMILIES, *REWARD_FAMILY_ALIASES, *REWARD_UNITS))


def vocabulary_problems(obj: dict[str, Any]) -> Iterator[str]:
    """Where a trace steps outside the contract's vocabulary (see the module docstring)."""
    events = obj.get("events")
    for i, event in enumerate(events if isinstance(events, list) else []):
        if (isinstance(event, dict) and event.get("type") == "orchestrator_decision" and "decision" in event
                and event["decision"] not in DECISION_KINDS):
            yield (f"events/{i}: decision {event['decision']!r} is not one of {', '.join(DECISION_KINDS)} "
                   "(a free-form kind is a label)")
    rewards = obj.get("rewards")
    for key in rewards if isinstance(rewards, dict) else {}:
        if not _reward_key(str(key)):
            yield (f"rewards/{key}: not a reward key (family, family:name, unit:name or credit:unit:name; "
                   f"families {', '.join(REWARD_FAMILIES)}, units {', '.join(REWARD_UNITS)})")


def _reward_key(key: str) -> bool:
    head, sep, rest = key.partition(":")
    if head == "credit":
        unit, sep, name = rest.partition(":")
        return unit in REWARD_UNITS and bool(sep and name)
    if not sep:
        return head in REWARD_FAMILIES or head in REWARD_FAMILY_ALIASES
    return head in _KEY_HEADS and bool(rest)


_CONTENT_FILE = re.compile(r"^([0-9a-f]{64})\.txt$")


def content_problems(out_dir: Path) -> Iterator[str]:
    """Every file under ``out_dir/content`` that is not named ``<sha256 of its bytes>.txt`` in the directory
    of its first two hex digits (a damaged, planted or half-written file)."""
    root = out_dir / "content"
    if not root.is_dir():
        return
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        where = path.relative_to(out_dir).as_posix()
        match = _CONTENT_FILE.match(path.name)
        if match is None or path.parent.name != match.group(1)[:2] or path.parent.parent != root:
            yield f"{where}: not a content file name (content/<2 hex>/<sha256>.txt)"
            continue
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            yield f"{where}: unreadable ({exc})"
            continue
        if digest != match.group(1):
            yield f"{where}: its bytes hash to sha256:{digest}, not to its name"


def _path(path: Any) -> str:
    return "/".join(str(p) for p in path) or "<root>"
