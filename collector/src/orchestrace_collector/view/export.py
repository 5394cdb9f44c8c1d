"""One self-contained HTML file: the same pages with their CSS, JavaScript and data inline, working from
disk with no server and no network (``orchestrace view OUT --export report.html``, and a trace's
``_repr_html_`` in a notebook).

The JavaScript modules are joined into one inline module: in dependency order, their ``import`` lines
dropped and ``export`` keywords removed (the modules' top-level names are distinct, checked here), since a
page opened from ``file://`` may not load module files.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from orchestrace_collector.model import Trace, Turn
from orchestrace_collector.validate import validate_trace
from orchestrace_collector.view.api import credit_payload, static_dir, trace_payload, turn_payload
from orchestrace_collector.view.credit import credit_by_strategy
from orchestrace_collector.view.store import OutputStore, summarize

_IMPORT = re.compile(r'^import \{[^}]*\} from "\./([\w.]+)";\n', re.M)
_EXPORT = re.compile(r"^export (?=(?:async )?function|const|let|class)", re.M)
_TOP_LEVEL = re.compile(r"^(?:export )?(?:async )?(?:function\*?|const|let|class) (\w+)", re.M)
_CSS_LINK = '<link rel="stylesheet" href="/static/view.css">'
_MAIN_SCRIPT = '<script type="module" src="/static/js/main.js"></script>'


def bundle_js(entry: str = "main.js") -> str:
    """The modules reachable from ``entry`` joined into one script, dependencies first."""
    js_dir = static_dir() / "js"
    ordered: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in ordered:
            return
        if name in stack:
            raise ValueError(f"import cycle: {' -> '.join((*stack, name))}")
        for dependency in _IMPORT.findall((js_dir / name).read_text(encoding="utf-8")):
            visit(dependency, (*stack, name))
        ordered.append(name)

    visit(entry, ())
    seen: dict[str, str] = {}
    parts = []
    for name in ordered:
        source = (js_dir / name).read_text(encoding="utf-8")
        for top in _TOP_LEVEL.findall(source):
            if top in seen:
                raise ValueError(f"{name} and {seen[top]} both define {top!r} at top level")
            seen[top] = name
        parts.append(f"// --- {name}\n" + _EXPORT.sub("", _IMPORT.sub("", source)))
    return "\n".join(parts)


def page_html(data: dict[str, Any]) -> str:
    """``index.html`` with the stylesheet, the scripts and ``data`` inline."""
    page = (static_dir() / "index.html").read_text(encoding="utf-8")
    css = (static_dir() / "view.css").read_text(encoding="utf-8")
    # ``<`` escaped: no text of a trace can close the script element it sits in.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    script = bundle_js().replace("</script", "<\\/script")
    inline = (f'<script id="orchestrace-data" type="application/json">{payload}</script>\n'
              f'<script type="module">\n{script}\n</script>')
    return page.replace(_CSS_LINK, f"<style>\n{css}\n</style>").replace(_MAIN_SCRIPT, inline)


def export_html(paths: Sequence[Path], out: Path) -> int:
    """Write every episode (latest revisions) under ``paths`` into ``out``; returns how many."""
    store = OutputStore(paths)
    summaries = store.summaries()
    traces: dict[str, Any] = {}
    credit: dict[str, Any] = {}
    turns: dict[str, Any] = {}
    for summary in summaries:
        trace_id = summary["trace_id"]
        traces[trace_id] = {**(trace_payload(store, trace_id) or {}), "problems": store.problems(trace_id)}
        credit[trace_id] = credit_payload(store, trace_id)
        turns[trace_id] = {t["turn_id"]: turn_payload(store, trace_id, str(t["turn_id"]))
                           for t in traces[trace_id]["turns"]}
    data = {"status": store.status(), "episodes": summaries, "traces": traces, "credit": credit,
            "turns": turns}
    out.write_text(page_html(data), encoding="utf-8")
    return len(summaries)


def trace_html(trace: Trace, turns: Sequence[Turn] = ()) -> str:
    """One trace's timeline as an ``iframe`` (a notebook shows it; the page's scripts stay in the frame)."""
    trace_obj = trace.to_json_dict()
    turn_objs = [t.model_dump(exclude_none=True) for t in turns]
    problems = validate_trace(trace_obj)
    summary = summarize(trace_obj)
    summary.update(revision=0, seq=1, turns=len(turn_objs))
    trace_id = trace.trace_id
    data = {
        "status": {"generation": 1, "episodes": 1, "directories": []},
        "episodes": [summary],
        "traces": {trace_id: {"trace": trace_obj, "turns": turn_objs, "problems": problems,
                              "outcome": summary["outcome"]}},
        "credit": {trace_id: None if problems else credit_by_strategy(trace_obj, turn_objs)},
        "turns": {trace_id: {t["turn_id"]: {"turn": t, "contents": {}} for t in turn_objs}},
        "start": f"#/episode/{quote(trace_id, safe='')}/timeline",
    }
    return (f'<iframe title="orchestrace trace {html.escape(trace_id)}" style="width:100%;height:520px;'
            f'border:1px solid #ccc" srcdoc="{html.escape(page_html(data), quote=True)}"></iframe>')
