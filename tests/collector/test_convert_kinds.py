"""The conversion's kinds are typed (``convert/kinds.py``): a misspelled event, edge or decision kind, reward
unit or family, or topology is a mypy error (the project checks ``convert`` with ``strict_equality``), and
the types name exactly the vocabulary of ``orchestrace_semconv``."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import orchestrace_collector
import orchestrace_semconv as sc
import pytest
from mypy import api
from orchestrace_collector.convert import kinds

MISSPELLED = '''
from orchestrace_collector.convert.actors import Actors
from orchestrace_collector.convert.credit import Channel, Shape
from orchestrace_collector.convert.edges import EdgeRec
from orchestrace_collector.convert.events import Ev
from orchestrace_collector.convert.topology import infer_topology


def kinds(ev: Ev, edge: EdgeRec, channel: Channel, shape: Shape, actors: Actors) -> list[bool]:
    return [
        ev.type == "tool_cal",
        edge[2] == "tool_dependence",
        ev.decision == "handof",
        channel.unit == "teams",
        shape.types[0] == "returned",
        infer_topology(actors, [], None) == "star",
    ]
'''


def test_a_misspelled_kind_is_a_type_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The packages' sources, where mypy finds their types (the editable install is an import hook).
    roots = [Path(package.__file__).parent.parent for package in (orchestrace_collector, sc)]
    monkeypatch.setenv("MYPYPATH", ":".join(map(str, roots)))
    source = tmp_path / "misspelled.py"
    source.write_text(MISSPELLED)
    out, _, status = api.run(["--strict-equality", "--no-incremental", "--follow-imports=silent",
                              "--cache-dir", str(tmp_path / "cache"), str(source)])
    errors = [line for line in out.splitlines() if "Non-overlapping equality check" in line]
    wrong = ["'tool_cal'", "'tool_dependence'", "'handof'", "'teams'", "'returned'", "'star'"]
    assert status == 1 and [w for w in wrong if any(w in e for e in errors)] == wrong, out


def test_the_kinds_are_the_vocabulary() -> None:
    assert get_args(kinds.Decision) == sc.DECISION_KINDS
    assert get_args(kinds.Topology) == sc.TOPOLOGIES
    assert get_args(kinds.RewardUnit) == sc.REWARD_UNITS
    assert get_args(kinds.RewardFamily) == sc.REWARD_FAMILIES
    assert kinds.UNIT_FAMILY == sc.REWARD_UNIT_FAMILY and kinds.FAMILY_UNIT == sc.REWARD_FAMILY_UNIT
