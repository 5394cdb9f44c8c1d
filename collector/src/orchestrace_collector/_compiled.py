"""The mypyc-compiled conversion modules, used only when they were built from exactly the current sources.

``make sync`` compiles the hot conversion modules (``collector/build_mypyc.py``) into
``collector/build/mypyc``, outside the source tree, with a manifest of the sha256 of every source the build
read. Importing this module (``orchestrace_collector/__init__`` does, so every process does, Ray workers
included) puts a finder first on ``sys.meta_path`` that maps the compiled modules to their extension files. On
the first import of one of them it checks the manifest once: every source must match, or no compiled module is
used (mypyc modules call each other natively), and one warning says the build is stale.
``ORCHESTRACE_PURE_PYTHON=1`` forces pure Python; without a build (an installed wheel, a checkout never
synced) it is pure Python, silently. Both give the same output.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

PURE_PYTHON_ENV = "ORCHESTRACE_PURE_PYTHON"
#: Where ``make sync`` builds; the manifest's source paths are relative to the repository.
BUILD_DIR = Path(__file__).resolve().parents[2] / "build" / "mypyc"
REPO = BUILD_DIR.parents[2]
MANIFEST = "manifest.json"
#: The extension files' suffix for this interpreter: a build for another Python is stale too.
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]

_log = logging.getLogger(__name__)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest(build: Path = BUILD_DIR) -> dict[str, Any] | None:
    try:
        manifest: dict[str, Any] = json.loads((build / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest


def is_current(manifest: dict[str, Any], repo: Path = REPO) -> bool:
    """Whether the build was made by this interpreter from exactly the sources now in ``repo``."""
    if manifest.get("suffix") != SUFFIX:
        return False
    try:
        return all(digest(repo / path) == sha for path, sha in manifest["sources"].items())
    except OSError:  # a source deleted or renamed since the build
        return False


class CompiledFinder:
    """Finds the compiled modules' extension files once the build is checked against the sources."""

    def __init__(self, build: Path, manifest: dict[str, Any], repo: Path = REPO) -> None:
        self.files = {name: build / file for name, file in manifest["modules"].items()}
        self.build, self.manifest, self.repo = build, manifest, repo
        self._current: bool | None = None
        self._lock = threading.Lock()

    def current(self) -> bool:
        with self._lock:
            if self._current is None:
                self._current = is_current(self.manifest, self.repo)
                if not self._current:
                    _log.warning(
                        "the compiled conversion modules in %s were built from other sources than these: "
                        "running pure Python (slower, same output); `make sync` rebuilds them",
                        self.build,
                    )
            return self._current

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None or not self.current():
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def install(build: Path = BUILD_DIR) -> CompiledFinder | None:
    """Put the finder first on ``sys.meta_path`` when there is a build and pure Python is not forced."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    manifest = read_manifest(build)
    if manifest is None:
        return None
    finder = CompiledFinder(build, manifest)
    sys.meta_path.insert(0, finder)
    return finder


_finder = install()


def compiled() -> bool:
    """Whether this process runs the compiled conversion modules (checks the build if nothing did yet)."""
    return _finder is not None and _finder.current()
