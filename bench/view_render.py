"""How long the view's timeline takes to draw in headless Chromium (Debian's, through Playwright): a
2,000-turn episode and a 10,000-event trace, written by ``view_data``. Two figures each: the timeline's own
draw (``data-render-ms``: building the SVG) and the whole page load (navigation to a drawn timeline: fetch,
parse, lanes, draw; the validation banner comes after). ``python -m bench.view_render --screenshots
docs/img`` also saves the README's PNGs.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.view_data import build_episode, write_episodes

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def serving(*paths: Path) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "orchestrace_collector.cli", "view", *map(str, paths),
                                "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().startswith("orchestrace view")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


def _measure(page: Any, url: str, repeats: int) -> dict[str, Any]:
    draws, loads = [], []
    for _ in range(repeats):
        page.goto("about:blank")
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_selector(".timeline[data-rendered]", timeout=120_000)  # drawn (validation follows)
        loads.append((time.perf_counter() - start) * 1000)
        draws.append(float(page.get_attribute(".timeline", "data-render-ms")))
    return {"draw_ms": round(min(draws)), "page_ms": round(min(loads)),
            "marks": page.eval_on_selector_all(".mark, path.arrow", "els => els.length")}


def run(out: Path, quick: bool) -> dict[str, Any]:
    sizes = {"turns_2000": (100, 20), "events_10000": (200, 24)}
    if quick:
        sizes = {"turns_2000": (10, 2), "events_10000": (20, 2)}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for name, (workers, turns) in sizes.items():
            names = [f"worker{i % (workers // 2)}" for i in range(workers)]  # each name runs twice
            trace, written = build_episode(name, "bench", names, turns_per_worker=turns)
            write_episodes(directory, [(trace, written)])
            results[name] = {"events": len(trace.events), "turns": len(written)}
        with serving(directory) as base, chromium() as page:
            for name in sizes:
                results[name].update(_measure(page, f"{base}/#/episode/{name}/timeline", 1 if quick else 3))
    return results


def screenshots(into: Path) -> list[Path]:
    """PNGs of the timeline, replay and credit views of the supervisor example (content captured)."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        traces = Path(tmp) / "traces"
        subprocess.run([sys.executable, "-m", "examples.supervisor.app", "--exporter", "none", "--trace-dir",
                        str(traces), "--capture-content"], cwd=ROOT, check=True, capture_output=True)
        saved = []
        with serving(traces) as base, chromium() as page:
            page.goto(f"{base}/#/episodes")
            page.wait_for_selector("#app[data-state=ready]")
            trace_id = page.get_attribute("tr.episode", "data-trace-id")
            for view, query in (("timeline", ""), ("replay", "?step=12"), ("credit", "?strategy=causal")):
                page.goto("about:blank")
                page.goto(f"{base}/#/episode/{trace_id}/{view}{query}")
                page.wait_for_selector("#app[data-state=ready]")
                path = into / f"view-{view}.png"
                page.screenshot(path=str(path), full_page=True)
                saved.append(path)
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.view_render", description=__doc__)
    parser.add_argument("--screenshots", type=Path, help="save the PNGs of the views here")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.screenshots:
        for path in screenshots(args.screenshots):
            print(path)
    else:
        print(run(Path("."), args.quick))


if __name__ == "__main__":
    main()
