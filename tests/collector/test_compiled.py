"""The mypyc-compiled conversion modules (built by ``make sync``, loaded by
``orchestrace_collector._compiled``) write what pure Python writes, byte for byte; a build made from other
sources is not used."""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from convert_support import GOLDEN
from orchestrace_collector import _compiled

from bench.spangen import write_dumps

# Converts dumps as ``orchestrace convert`` does (decode, assemble, convert, write); says if it ran compiled.
_CONVERT = """
import sys
from pathlib import Path

import orchestrace_collector
from orchestrace_collector.offline import convert_local
from orchestrace_collector.output import TraceDirWriter

writer = TraceDirWriter(Path(sys.argv[1]))
result = convert_local([Path(p) for p in sys.argv[2:]], writer)
writer.close()
assert result.written and not result.failed and not result.bad_files, result
print(orchestrace_collector.compiled())
"""
_MISSING = "collector/build/mypyc is missing or stale: `make sync` builds it (the suite runs compiled)"


def _has_c_compiler() -> bool:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or ""
    return bool(cc.split()) and shutil.which(cc.split()[0]) is not None


# Without a C compiler `make sync` leaves no build (see the failed-compile test): nothing compiled to compare.
needs_build = pytest.mark.skipif(not _has_c_compiler(), reason="no C compiler, so no mypyc build")


def _convert(out: Path, inputs: list[Path], *, pure: bool) -> tuple[bool, str]:
    env = {k: v for k, v in os.environ.items() if k != _compiled.PURE_PYTHON_ENV}
    if pure:
        env[_compiled.PURE_PYTHON_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _CONVERT, str(out), *map(str, inputs)],
        capture_output=True, text=True, timeout=240, check=False, env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == "True", done.stderr


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


@needs_build
def test_compiled_and_pure_python_write_the_same_bytes(tmp_path: Path) -> None:
    manifest = _compiled.read_manifest()
    assert manifest is not None and _compiled.is_current(manifest), _MISSING
    # A committed dump of a real framework's run; the benchmark's mix (tools, turns, delegations, messages).
    inputs = [GOLDEN / "autogen_spans.jsonl", *write_dumps(tmp_path / "mix", 40, 60, n_files=2)]
    compiled, stderr = _convert(tmp_path / "compiled", inputs, pure=False)
    assert compiled, f"{_MISSING}\n{stderr}"
    pure, _ = _convert(tmp_path / "pure", inputs, pure=True)
    assert not pure
    written = _files(tmp_path / "compiled")
    assert {name.split("-")[0] for name in written} >= {"traces", "turns"}
    assert written == _files(tmp_path / "pure")


# What code does with a span (the decoder builds it, tests replace fields, Ray pickles it), printed.
_SPAN = """
import dataclasses
import pickle

import orchestrace_collector.spans as spans
from orchestrace_collector.spans import Span, SpanEvent

bare = Span("ab" * 16, "01" * 8, None, "root", 1, 9)
full = Span("ab" * 16, "02" * 8, "01" * 8, "child", 2, 3, 3, {"k": (1, "v")}, (SpanEvent("e", 2),), (), 2,
            "x", {"service.name": "s"}, "scope")
other = Span("ab" * 16, "01" * 8, None, "root", 1, 9)
print(repr(bare), repr(full))
print(bare == other, bare.attributes is not other.attributes, bare.resource is not other.resource)
print(dataclasses.replace(full, name="renamed", attributes={}))
print(pickle.loads(pickle.dumps(full)) == full, [f.name for f in dataclasses.fields(Span)])
print(spans.__file__.endswith(".py"))
"""


@needs_build
def test_a_compiled_span_is_the_dataclass_pure_python_has() -> None:
    """``Span`` is compiled (a native class, its own ``__init__``): built, compared, replaced, pickled and
    printed as the pure-Python dataclass is."""
    manifest = _compiled.read_manifest()
    assert manifest is not None and _compiled.is_current(manifest), _MISSING
    outputs = {}
    for pure in (False, True):
        env = {k: v for k, v in os.environ.items() if k != _compiled.PURE_PYTHON_ENV}
        if pure:
            env[_compiled.PURE_PYTHON_ENV] = "1"
        done = subprocess.run([sys.executable, "-c", _SPAN], capture_output=True, text=True, timeout=60,
                              check=False, env=env)
        assert done.returncode == 0, done.stderr
        *lines, source = done.stdout.splitlines()
        assert source == str(pure), "compiled spans.py in use unless pure Python is forced"
        outputs[pure] = lines
    assert outputs[False] == outputs[True]
    assert outputs[True][1] == "True True True" and outputs[True][3].startswith("True")


# The records conversion makes for every span (or model call): their classes' ``__init__``.
_RECORDS = """
import types

import orchestrace_collector
from orchestrace_collector.convert.actors import Instance
from orchestrace_collector.convert.events import Ev
from orchestrace_collector.convert.forest import Node
from orchestrace_collector.convert.turns import TurnRec

print(orchestrace_collector.compiled())
for cls in (Node, Ev, Instance, TurnRec):
    print(cls.__name__, isinstance(cls.__init__, types.FunctionType))
"""


@needs_build
def test_the_records_made_per_span_are_built_by_compiled_code() -> None:
    """A dataclass's generated ``__init__`` stays interpreted Python in a compiled module (mypyc leaves it to
    ``dataclasses``); the conversion's per-span records write theirs out, so that mypyc compiles them (the
    generated one cost a seventh of a compiled conversion)."""
    manifest = _compiled.read_manifest()
    assert manifest is not None and _compiled.is_current(manifest), _MISSING
    env = {k: v for k, v in os.environ.items() if k != _compiled.PURE_PYTHON_ENV}
    done = subprocess.run([sys.executable, "-c", _RECORDS], capture_output=True, text=True, timeout=60,
                          check=False, env=env)
    assert done.returncode == 0, done.stderr
    compiled, *interpreted = done.stdout.splitlines()
    assert compiled == "True", _MISSING
    assert interpreted == ["Node False", "Ev False", "Instance False", "TurnRec False"]


def _stale_copy(tmp_path: Path) -> dict[str, Any]:
    manifest = _compiled.read_manifest()
    assert manifest is not None, _MISSING
    path = next(iter(manifest["sources"]))
    stale = {**manifest, "sources": {**manifest["sources"], path: "0" * 64}}
    (tmp_path / _compiled.MANIFEST).write_text(json.dumps(stale))
    return stale


@needs_build
def test_a_stale_build_is_not_used_and_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    stale = _stale_copy(tmp_path)
    finder = _compiled.CompiledFinder(_compiled.BUILD_DIR, stale)
    with caplog.at_level(logging.WARNING, logger=_compiled.__name__):
        assert finder.find_spec("orchestrace_collector.convert.events") is None
        assert finder.find_spec("orchestrace_collector.convert.edges") is None  # all or none
        assert not finder.current()
    (record,) = caplog.records
    assert "built from other sources" in record.getMessage() and "make sync" in record.getMessage()
    current = _compiled.CompiledFinder(_compiled.BUILD_DIR, _compiled.read_manifest() or {})
    spec = current.find_spec("orchestrace_collector.convert.events")
    assert spec is not None and spec.origin is not None and spec.origin.endswith(_compiled.SUFFIX)
    assert current.find_spec("orchestrace_collector.ingest") is None  # not compiled


@needs_build
def test_a_build_for_another_python_is_stale(tmp_path: Path) -> None:
    manifest = _compiled.read_manifest()
    assert manifest is not None, _MISSING
    assert not _compiled.is_current({**manifest, "suffix": ".cpython-310-x86_64-linux-gnu.so"})
    assert not _compiled.is_current({**manifest, "sources": {"collector/no_such_file.py": "0" * 64}})


@needs_build
def test_no_build_or_pure_python_forced_installs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    before = list(sys.meta_path)
    assert _compiled.install(tmp_path) is None  # no manifest: silently pure Python
    _stale_copy(tmp_path)
    monkeypatch.setenv(_compiled.PURE_PYTHON_ENV, "1")
    assert _compiled.install(tmp_path) is None
    assert sys.meta_path == before and not caplog.records


@needs_build
def test_the_manifest_covers_what_the_compiled_code_reads() -> None:
    manifest = _compiled.read_manifest()
    assert manifest is not None, _MISSING
    sources = set(manifest["sources"])
    # The compiled modules, the modules whose constants and types they use, and the compiled set.
    assert {
        "collector/src/orchestrace_collector/convert/events.py",
        "collector/src/orchestrace_collector/spans.py",
        "collector/src/orchestrace_collector/model.py",
        "semconv/src/orchestrace_semconv/__init__.py",
        "collector/build_mypyc.py",
        "uv.lock",  # the mypyc version
    } <= sources
    # Not what a function imports when it runs (``Trace``'s HTML page): editing it keeps the build.
    assert "collector/src/orchestrace_collector/view/export.py" not in sources
    assert "orchestrace_collector.convert.events" in manifest["modules"]
    assert "orchestrace_collector.spans" in manifest["modules"]
    assert "orchestrace_collector.assemble" in manifest["modules"]
    assert "orchestrace_collector.ingest" not in manifest["modules"]


def _build_script() -> ModuleType:
    path = _compiled.REPO / "collector" / "build_mypyc.py"
    spec = importlib.util.spec_from_file_location("build_mypyc", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_compile_leaves_pure_python_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build_mypyc = _build_script()
    build = tmp_path / "mypyc"
    build.mkdir()
    old = {"suffix": _compiled.SUFFIX, "modules": {}, "sources": {}}
    (build / _compiled.MANIFEST).write_text(json.dumps(old))
    monkeypatch.setattr(build_mypyc, "BUILD_DIR", build)
    # What mypyc's setuptools step ends with on a machine without gcc.
    failed = subprocess.CompletedProcess([], 1, "", "error: command 'gcc' failed: No such file or directory")
    monkeypatch.setattr(build_mypyc.subprocess, "run", lambda *args, **kwargs: failed)
    build_mypyc.build()  # returns: `make sync` and `make demo` go on
    out = capsys.readouterr().out
    assert "compiling failed" in out and "pure Python" in out and "command 'gcc' failed" in out
    # The old build goes too: it would be stale, and warn in every process.
    assert not build.exists() and not (tmp_path / "mypyc.tmp").exists()
    assert _compiled.install(build) is None


def test_make_goes_on_when_the_compile_left_no_build(tmp_path: Path) -> None:
    """The Makefile's step after the build script: a failed compile removed the build directory, and
    `make sync` (so `make demo`) must still succeed. The script is stood in for by `true`."""
    stamp = tmp_path / "mypyc" / ".stamp"
    done = subprocess.run(
        ["make", "--no-print-directory", str(stamp), f"MYPYC_STAMP={stamp}", "RUN=true"],
        cwd=_compiled.REPO, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert stamp.exists()


# mypyc makes a generator expression passed to a function a list ("Treating generator comprehension as
# list"), so a callee that reads its iterable only sometimes, or only its start, builds every item anyway: the
# compiled assembler built every remembered ``written.idx`` entry on every write that way, quadratic
# (9c6f651). Builtins that read the whole iterable, or that mypyc runs in place as a loop, are fine.
_CONSUMING_BUILTINS = frozenset({"all", "any", "dict", "frozenset", "list", "max", "min", "next", "set",
                                 "sorted", "sum", "tuple"})
_CONSUMING_METHODS = frozenset({"extend", "join", "update"})


def _generators_passed_to_functions(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        if (isinstance(callee, ast.Name) and callee.id in _CONSUMING_BUILTINS) or (
                isinstance(callee, ast.Attribute) and callee.attr in _CONSUMING_METHODS):
            continue
        if any(isinstance(arg, ast.GeneratorExp) for arg in [*node.args, *(k.value for k in node.keywords)]):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_compiled_module_passes_a_generator_expression_to_a_function() -> None:
    compiled = _build_script().COMPILED
    assert len(compiled) > 10
    found = {str(path): hits for path in compiled
             if (hits := _generators_passed_to_functions(path.read_text(encoding="utf-8")))}
    assert found == {}, "pass a list, or a function the callee calls when it needs the items"
    before_9c6f651 = "self._index.append(entry, (written(key) for key in self._written))"
    assert _generators_passed_to_functions(before_9c6f651) == [f"line 1: {before_9c6f651}"]
    assert _generators_passed_to_functions("any(x for x in y); ', '.join(str(x) for x in y)") == []
