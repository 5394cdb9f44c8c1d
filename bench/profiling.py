"""pyinstrument profiles of hot paths, summarised as the functions that take the most time.

A summary line is ``{"function": "module:function", "self_share": ..., "total_share": ...}``: the share of the
profiled wall time spent in the function itself, and in it plus what it calls. The full call tree of each
profile is written as text to ``{out}/profiles/{name}.txt``, for the closing notes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyinstrument import Profiler
from pyinstrument.frame import Frame
from pyinstrument.renderers import ConsoleRenderer
from pyinstrument.session import Session


def _label(frame: Frame) -> str:
    path = frame.file_path_short or frame.file_path or "?"
    return f"{path}:{frame.function}"


def _is_import(frame: Frame) -> bool:
    return _label(frame).startswith("<frozen importlib")


def _import_time(frame: Frame) -> float:
    if _is_import(frame):
        return float(frame.time)
    return sum(_import_time(child) for child in frame.children)


def _walk(frame: Frame, self_time: dict[str, float], total_time: dict[str, float], stack: set[str]) -> None:
    """Add up self and total time per function below ``frame``, leaving out one-off imports."""
    if _is_import(frame):
        return
    label = _label(frame)
    if not frame.is_synthetic:  # pyinstrument's "[self]" leaves repeat their parent's self time
        self_time[label] = self_time.get(label, 0.0) + frame.total_self_time
        if label not in stack:  # count a recursive function's total once
            total_time[label] = total_time.get(label, 0.0) + frame.time
    for child in frame.children:
        _walk(child, self_time, total_time, stack | {label})


def profile(name: str, fn: Callable[[], object], out: Path, top: int = 12) -> dict[str, Any]:
    """Profile one call of ``fn``; write its call tree to ``{out}/profiles/{name}.txt`` and summarise it."""
    profiler = Profiler(interval=0.0002)
    profiler.start()
    fn()
    return summarize(name, profiler.stop(), out, top)


def _focus_frames(frame: Frame, suffix: str) -> list[Frame]:
    """The outermost frames whose label ends with ``suffix``."""
    if _label(frame).endswith(suffix):
        return [frame]
    return [found for child in frame.children for found in _focus_frames(child, suffix)]


def summarize(
    name: str, session: Session, out: Path, top: int = 12, focus: str | None = None
) -> dict[str, Any]:
    """Write a session's call tree to ``{out}/profiles/{name}.txt`` and summarise it; with ``focus`` (a
    ``file:function`` suffix), only the time under that function, as shares of it (idle loops left out).
    Time spent importing modules (a one-off on first use) is left out of the shares."""
    root = session.root_frame()
    (out / "profiles").mkdir(parents=True, exist_ok=True)
    text = ConsoleRenderer(unicode=False, color=False, show_all=False).render(session)
    (out / "profiles" / f"{name}.txt").write_text(text)
    roots = [] if root is None else _focus_frames(root, focus) if focus else [root]
    total = sum(r.time - _import_time(r) for r in roots)
    summary: dict[str, Any] = {"duration_s": round(session.duration, 4), "top_self": [], "top_total": []}
    if focus:
        summary["focus"] = focus
        summary["focus_share"] = round(total / root.time, 4) if root is not None and root.time > 0 else 0.0
    if total <= 0:
        return summary
    self_time: dict[str, float] = {}
    total_time: dict[str, float] = {}
    for r in roots:
        _walk(r, self_time, total_time, set())
    summary["top_self"] = [
        {"function": k, "self_share": round(v / total, 4)}
        for k, v in sorted(self_time.items(), key=lambda kv: -kv[1])[:top]
    ]
    by_package: dict[str, float] = {}
    for label, seconds in self_time.items():
        package = label.split("/", 1)[0] if "/" in label else label.split(":", 1)[0]
        by_package[package] = by_package.get(package, 0.0) + seconds
    summary["self_by_package"] = {
        k: round(v / total, 4) for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])[:top]
    }
    summary["top_total"] = [
        {"function": k, "total_share": round(v / total, 4)}
        for k, v in sorted(total_time.items(), key=lambda kv: -kv[1])[: 3 * top]
    ]
    return summary
