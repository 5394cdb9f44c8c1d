"""The other pages in a real browser: rollouts compared, a turn with its content, the episodes page paging
10,000 episodes, errors shown as messages, the exported file from disk with the network off, a trace in a
notebook, live update while a collector writes, and the token rule."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from collector_fixtures import RunningCollector, validate_trace_dir
from example_runs import ExampleRun
from orchestrace_collector.model import Trace
from orchestrace_collector.output import latest_turns
from view_support import open_page, route_to, running_view, wait_for

from bench.view_data import build_episode, write_episodes


def test_compare_shows_the_first_different_decision(page: Any, tmp_path: Path) -> None:
    out = write_episodes(tmp_path / "out", [
        build_episode("good", "t", ["finder", "checker", "writer"], outcome=1.0),
        build_episode("bad", "t", ["finder", "writer"], outcome=0.0),
    ])
    traces = validate_trace_dir(out)
    with running_view(out) as base:
        assert open_page(page, f"{base}/#/episodes") == "ready"
        page.click("tr.group a")  # compare best and worst of the task
        page.wait_for_selector("#first-difference")
        diff = page.get_attribute("#first-difference", "data-index")
        decisions = {tid: [e for e in sorted(t["events"], key=lambda e: e["t"])
                           if e["type"] == "orchestrator_decision"] for tid, t in traces.items()}
        # Both start alike (spawn the first worker, delegate to it); the second delegation differs.
        assert diff == "2"
        assert page.get_attribute("#first-difference", "data-a") == decisions["good"][2]["id"]
        assert page.get_attribute("#first-difference", "data-b") == decisions["bad"][2]["id"]
        assert "checker" in page.inner_text("#first-difference")
        assert len(page.query_selector_all("svg.timeline-svg")) == 2
        assert len(page.query_selector_all(".decision.highlight")) == 2


@pytest.mark.xdist_group("example_runs")
def test_turn_page_shows_content_untrusted_flows_and_token_ids(
        page: Any, example_run: Any) -> None:
    run: ExampleRun = example_run("supervisor-content-a")
    assert run.trace_dir is not None
    traces = validate_trace_dir(run.trace_dir)
    turns = latest_turns(run.trace_dir, traces)
    (trace_id,) = traces
    turn = next(t for t in turns[trace_id] if any(m["role"] == "tool" for m in t.get("prompt") or []))
    with running_view(run.trace_dir) as base:
        assert route_to(page, base, f"#/episode/{trace_id}/turn?turn={turn['turn_id']}") == "ready"
        assert page.query_selector_all(".message.untrusted")
        text = page.inner_text("#app")
        assert turn["prompt"][0]["content"] in text
        assert "prompt token ids" in text and "absent" in text
        stored = page.eval_on_selector_all("#content-store li", "els => els.map(e => e.dataset.ref)")
        assert stored == [turn["input_ref"], turn["output_ref"]]
        assert "stored," in page.inner_text("#content-store")
        assert "safety_flow edges" in page.inner_text("#safety-flow")
        assert len(page.query_selector_all(".tool-calls li")) >= 1


def test_episodes_page_pages_through_ten_thousand_episodes(page: Any, tmp_path: Path) -> None:
    trace, _ = build_episode("seed", "task", ["w"], turns_per_worker=1)
    line = trace.to_json_dict()
    out = tmp_path / "many"
    out.mkdir()
    with (out / "traces-00000.jsonl").open("w") as handle:
        for i in range(10_000):
            line.update(trace_id=f"ep{i:05d}", task_id=f"task{i % 250:03d}",
                        rewards={"team": float(i % 3 == 0)}, metrics={"revision": 0})
            handle.write(json.dumps(line) + "\n")
    with running_view(out) as base:
        assert open_page(page, f"{base}/#/episodes") == "ready"
        assert "page 1 of 100 (10,000 of 10,000 episodes)" in page.inner_text(".pager")
        assert len(page.query_selector_all("tr.episode")) == 100
        assert len(page.query_selector_all("tr.group svg.distribution")) == 3  # 40 rollouts per task
        page.click("text=Next page")
        first = page.get_attribute("tr.episode", "data-trace-id")
        assert "page 2 of 100" in page.inner_text(".pager")
        page.fill("input[name=task]", "task007")
        assert "(40 of 10,000 episodes)" in page.inner_text(".pager")
        page.select_option("select[name=outcome]", "positive")
        rows = page.eval_on_selector_all("tr.episode", "els => els.map(e => e.dataset.traceId)")
        assert sorted(rows) == [f"ep{i:05d}" for i in range(10_000) if i % 250 == 7 and i % 3 == 0]
        assert first not in rows


def test_errors_are_messages_never_a_blank_page(page: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with running_view(empty) as base:
        assert open_page(page, base) == "ready"
        assert "No episodes yet" in page.inner_text("[role=alert]")
    not_dir = tmp_path / "file.txt"
    not_dir.write_text("x")
    with running_view(not_dir, tmp_path / "missing") as base:
        open_page(page, base)
        alert = page.inner_text("[role=alert]")
        assert "is not a directory" in alert and "does not exist" in alert
    broken = tmp_path / "broken"
    broken.mkdir()
    trace, _ = build_episode("bad-edges", "t", ["w"])
    line: dict[str, Any] = trace.to_json_dict()
    line["edges"].append({"src": "e1", "dst": "nowhere", "type": "causal"})
    (broken / "traces-00000.jsonl").write_text(json.dumps(line) + "\n" + "{not json\n")
    with running_view(broken) as base:
        assert route_to(page, base, "#/episode/bad-edges/timeline") == "ready"
        assert "fails validation" in page.inner_text("[role=alert]")
        assert "nowhere" in page.inner_text("[role=alert]")
        route_to(page, base, "#/episode/bad-edges/credit")
        assert "cannot be recomputed" in page.inner_text(".tab [role=alert]")
        route_to(page, base, "#/episode/no-such-trace/timeline")
        assert "Episode not found" in page.inner_text("[role=alert]")


def test_exported_file_works_from_disk_with_the_network_off(page: Any, tmp_path: Path) -> None:
    out = write_episodes(tmp_path / "out", [build_episode("x1", "t", ["a", "b"]),
                                            build_episode("x2", "t", ["a"], outcome=0.0)])
    report = tmp_path / "report.html"
    from orchestrace_collector.cli import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["view", str(out), "--export", str(report)])
    assert result.exit_code == 0, result.output
    requested: list[str] = []

    def block(route: Any) -> None:
        requested.append(route.request.url)
        route.abort()

    page.context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else block(route))
    assert open_page(page, report.as_uri()) == "ready"
    assert len(page.query_selector_all("tr.episode")) == 2
    page.click("text=x1")
    page.wait_for_selector(".busy.lane")
    assert len(page.query_selector_all(".busy.lane")) == 3
    page.click("text=Credit")
    page.wait_for_selector(".mark-turn[data-credit-sign]")
    page.click("text=Replay")
    page.wait_for_selector("#scrubber")
    assert requested == []


def test_a_trace_shows_itself_in_a_notebook(page: Any) -> None:
    trace, _ = build_episode("nb", "t", ["a", "a"])
    snippet = Trace.model_validate(trace.to_json_dict())._repr_html_()
    assert snippet.startswith("<iframe")
    page.set_content(snippet)
    frame = page.frame_locator("iframe")
    frame.locator(".busy.lane").first.wait_for()
    assert frame.locator(".busy.lane").count() == 3
    frame.locator("text=Credit").click()  # links stay inside the frame (srcdoc has no URL to change)
    frame.locator(".agent-split tbody tr").first.wait_for()  # no turns: the events carry the credit


LIVE_PROGRAM = textwrap.dedent("""
    import sys
    import orchestrace as ot

    handle = ot.configure("view-live", exporter="otlp", endpoint=sys.argv[1])

    @ot.agent()
    def worker(question: str) -> str:
        return question.upper()

    @ot.agent()
    def lead(question: str) -> str:
        return worker(question)

    with ot.task(sys.argv[2]):
        lead("live")
    handle.shutdown()
""")


def test_new_episodes_appear_without_a_reload(page: Any, collector: RunningCollector) -> None:
    def send(task: str) -> None:
        done = subprocess.run([sys.executable, "-c", LIVE_PROGRAM, collector.base_url, task],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr

    send("first-task")
    wait_for(lambda: bool(list(collector.out.glob("traces-*.jsonl"))), 30, "the collector wrote nothing")
    with running_view(collector.out) as base:
        assert open_page(page, f"{base}/#/episodes") == "ready"
        assert len(page.query_selector_all("tr.episode")) == 1
        page.evaluate("window.__sameDocument = true")
        send("second-task")
        page.wait_for_selector("tr.group[data-task=second-task]", timeout=30_000)
        assert page.evaluate("window.__sameDocument") is True  # no reload
    validate_trace_dir(collector.out)


def test_a_non_loopback_address_needs_a_token(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "orchestrace_collector.cli", "view", str(tmp_path),
                           "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=60,
                          check=False, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    assert "not loopback" in done.stderr
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with running_view(tmp_path, extra=("--token-file", str(token))) as base:
        assert httpx.get(f"{base}/api/status").status_code == 401
        assert httpx.get(f"{base}/api/status", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        with httpx.Client(follow_redirects=True) as client:
            assert client.get(f"{base}/?token=s3cret").status_code == 200  # redirected, cookie set
            assert client.get(f"{base}/api/status").status_code == 200
        assert httpx.get(f"{base}/api/status", headers={"Host": "evil.example"}).status_code == 403


def test_a_new_revision_appears_on_the_open_episode(page: Any, tmp_path: Path) -> None:
    out = write_episodes(tmp_path / "out", [build_episode("rev", "t", ["a", "b"], outcome=1.0)])
    with running_view(out) as base:
        assert open_page(page, f"{base}/#/episode/rev/credit") == "ready"
        assert "revision 0" in page.inner_text(".facts-line")
        page.evaluate("window.__sameDocument = true")
        from orchestrace_collector.cli import app
        from typer.testing import CliRunner

        done = CliRunner().invoke(app, ["annotate", str(out), "--trace-id", "rev", "--reward", "0.25",
                                        "--family", "team"])
        assert done.exit_code == 0, done.output
        page.wait_for_function("document.querySelector('.facts-line').textContent.includes('revision 1')",
                               timeout=30_000)
        assert "outcome 0.25" in page.inner_text(".facts-line")
        assert page.evaluate("window.__sameDocument") is True
    validate_trace_dir(out)


def test_targets_named_by_separate_activation_fields(page: Any, tmp_path: Path) -> None:
    """Names never carry ``#k`` in the newer format: ``to`` is the name and ``to_activation`` the instance.
    The same episode written both ways draws the same arrows."""
    trace, turns = build_episode("labels", "t", ["w", "w", "v"])
    labelled = trace.to_json_dict()
    fields = json.loads(json.dumps(labelled))
    fields["trace_id"] = "fields"
    for event in fields["events"]:
        for end in ("to", "from"):
            name, _, k = str(event.get(end, "")).partition("#")
            if k.isdigit():
                event[end], event[f"{end}_activation"] = name, int(k)
    out = tmp_path / "out"
    write_episodes(out, [(trace, turns)])
    with (out / "traces-00000.jsonl").open("a") as handle:
        handle.write(json.dumps({**fields, "metrics": {"revision": 0}}) + "\n")
    validate_trace_dir(out)
    drawn: dict[str, list[tuple[str, str, str]]] = {}
    with running_view(out) as base:
        for trace_id in ("labels", "fields"):
            route_to(page, base, f"#/episode/{trace_id}/timeline")
            drawn[trace_id] = sorted(page.eval_on_selector_all(
                "path.arrow", "els => els.map(e => [e.dataset.eventId, e.dataset.from, e.dataset.to])"))
    assert drawn["labels"] == drawn["fields"]
    assert any(to == json.dumps(["w", 2], separators=(",", ":")) for _, _, to in map(tuple, drawn["fields"]))
