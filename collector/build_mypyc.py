"""Compile the hot conversion modules with mypyc into ``collector/build/mypyc`` (``make sync`` runs this).

mypyc works on a copy of the sources, so nothing compiled ever sits beside a source it could shadow. The
manifest records the sha256 of every source the build read: the compiled modules, the project modules they
import (mypyc inlines their ``Final`` constants and checks their declared types at run time) and this script
(the compiled set) and ``uv.lock`` (the mypyc that compiled them). ``orchestrace_collector/_compiled.py``
uses the build only while all of them match. A run with nothing changed only checks the manifest. A failed
compile (a machine without a C compiler) removes the build and warns: conversion runs in pure Python.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from orchestrace_collector._compiled import (
    BUILD_DIR,
    MANIFEST,
    REPO,
    SUFFIX,
    digest,
    is_current,
    read_manifest,
)

#: Pins the mypyc that compiles: another version is another build.
LOCK = REPO / "uv.lock"
SRC_ROOTS = (REPO / "collector" / "src", REPO / "semconv" / "src")
CONVERT = REPO / "collector" / "src" / "orchestrace_collector" / "convert"
#: The conversion package and its vocabularies but the packages' ``__init__``, ``construct`` (pydantic's
#: internals: nothing to gain) and ``gcpause`` (runs once per conversion), the output limit's scan of
#: every written record, the span itself with its decoder (a compiled ``Span`` is a native class whose
#: fields the compiled conversion reads directly, and the collector decodes every received span) and the
#: assembler, which files every received span by its ids into its episode. mypyc makes a generator
#: expression a list: a compiled module passes a function where a callee reads an iterable only sometimes
#: (the assembler's ``written.idx`` entries, built on every write when it passed a generator).
COMPILED = sorted(
    [p for p in CONVERT.rglob("*.py") if p.stem not in ("__init__", "construct", "gcpause")]
    + [
        REPO / "collector" / "src" / "orchestrace_collector" / name
        for name in ("output_limit.py", "spans.py", "decode.py", "assemble.py")
    ]
)


def relative(path: Path) -> Path:
    """``path`` from its source root: where its copy goes in the build."""
    return path.relative_to(next(r for r in SRC_ROOTS if path.is_relative_to(r)))


def module_name(path: Path) -> str:
    parts = relative(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_file(name: str) -> Path | None:
    """The project source of module ``name`` (a package's ``__init__``), or None for anything else."""
    for root in SRC_ROOTS:
        base = root.joinpath(*name.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def imported(path: Path, everywhere: bool) -> list[str]:
    """The modules ``path`` imports (and its parent packages): ``everywhere``, or only those importing it
    runs."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
    tree = ast.parse(path.read_bytes())
    nodes = ast.walk(tree) if everywhere else (n for s in tree.body for n in ast.walk(s) if not _deferred(s))
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(p for p in (base, node.module) if p)
            # ``from package import module`` imports a module too.
            names += [target, *(f"{target}.{alias.name}" for alias in node.names)]
    return names


def _deferred(node: ast.stmt) -> bool:
    """A definition, or an ``if TYPE_CHECKING:`` block: nothing in it is imported when the module is."""
    if isinstance(node, ast.If):
        test = node.test
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)


def sources_read(modules: list[Path]) -> list[Path]:
    """``modules`` and the project modules whose names they use: what they import anywhere, and what those
    import at module level (a function's deferred import is none of the compiled code's business)."""
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += filter(None, map(module_file, imported(path, everywhere=path in modules)))
    return sorted(seen)


def build() -> None:
    sources = sources_read(COMPILED)
    tmp = BUILD_DIR.with_name(BUILD_DIR.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    src = tmp / "src"
    for path in sources:
        (src / relative(path)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, src / relative(path))
    copies = [str(relative(path)) for path in COMPILED]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mypyc", "--config-file", str(REPO / "pyproject.toml"), *copies],
        cwd=src,
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        # A stale build would only warn in every process; without one, conversion is silently pure Python.
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(BUILD_DIR, ignore_errors=True)
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        print(f"mypyc: compiling failed, conversion runs in pure Python (same output, slower):\n{tail}")
        return
    seconds = time.perf_counter() - start
    # Each module is a small extension that loads the group's one library (``<hash>__mypyc``) by name.
    modules = {module_name(path): str(Path("src", relative(path).with_suffix(SUFFIX))) for path in COMPILED}
    for group in src.glob(f"*__mypyc{SUFFIX}"):
        modules[group.name.removesuffix(SUFFIX)] = str(group.relative_to(tmp))
    manifest = {
        "suffix": SUFFIX,
        "modules": modules,
        # The copies' digests: the build is of what was copied, even if a source changed meanwhile.
        "sources": {str(path.relative_to(REPO)): digest(src / relative(path)) for path in sources}
        | {str(path.relative_to(REPO)): digest(path) for path in (Path(__file__).resolve(), LOCK)},
    }
    shutil.rmtree(src / "build")  # the C sources and objects
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(BUILD_DIR, ignore_errors=True)
    tmp.rename(BUILD_DIR)
    print(f"mypyc: compiled {len(COMPILED)} modules into {BUILD_DIR.relative_to(REPO)} in {seconds:.0f} s")


def main() -> None:
    manifest = read_manifest()
    if manifest is not None and is_current(manifest):
        print(f"mypyc: {BUILD_DIR.relative_to(REPO)} is up to date")
        return
    build()


if __name__ == "__main__":
    main()
