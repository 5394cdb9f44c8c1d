"""Smoke run of every benchmark at tiny sizes (``python -m bench --quick``): each produces its figures.

Nothing here looks at a figure's value (speed is what ``make bench`` reports, never what a test asserts); it
checks that every benchmark still runs against the current code and writes the keys the report reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Slow (the quick bench run takes minutes): `make test-slow` runs it (CI: after `make test`).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads((out / "results.json").read_text())


@pytest.mark.timeout(600)
def test_every_benchmark_ran_without_error(quick_results: tuple[Path, dict[str, Any]]) -> None:
    _, results = quick_results
    for name in ("sdk", "langgraph", "collector", "scaling", "ray", "view", "long_episode"):
        assert name in results, name
        assert "error" not in results[name], (name, results[name].get("error"))
    assert results["machine"]["nproc"] >= 1


def test_long_episode_figures(quick_results: tuple[Path, dict[str, Any]]) -> None:
    """Sizes, not speeds: the history-once dump is smaller than the full-prompt one, and every path wrote
    every turn of the long episode with its whole history, its task and its reward."""
    long = quick_results[1]["long_episode"]
    assert [row["turns"] for row in long["export_size"]] == [10, 20]
    assert all(row["once_mb"] < row["full_mb"] for row in long["export_size"])
    episode = long["long_episode"]
    assert episode["app"]["dropped_spans"] == 0 and episode["app"]["extra_rss_mib"] >= 0
    assert set(episode["written"]) == {"collect", "trace_dir", "convert"}
    for written in episode["written"].values():
        turns = episode["turns"]
        assert written == {"turns": turns, "prompts_whole_length": turns, "truncated": 0,
                           "task_id": "long-episode", "team_reward": 1.0}


def test_sdk_figures(quick_results: tuple[Path, dict[str, Any]]) -> None:
    sdk = quick_results[1]["sdk"]
    assert set(sdk["us_per_call"]) == {
        "undecorated",
        "raw_span_agent",
        "ot_agent",
        "raw_span_tool",
        "ot_tool",
    }
    assert set(sdk["ratio_to_raw_span"]) == {"agent", "tool"}
    assert sdk["attributes_per_span"]["agent"] > 0
    assert sdk["profile"]["ot_agent"]["top_self"]
    counted = sdk["instructions"]
    if "skipped" not in counted:
        # A decorated call does at least what the raw span does, and the bare function far less.
        assert counted["ratio_to_raw_span"]["agent"] > 1 and counted["ratio_to_raw_span"]["tool"] > 1
        assert counted["per_call"]["undecorated"] < counted["per_call"]["raw_span_agent"] / 10


def test_langgraph_figures(quick_results: tuple[Path, dict[str, Any]]) -> None:
    lg = quick_results[1]["langgraph"]
    assert not lg["errors"]
    expected = {"uninstrumented", "spans_only", "orchestrace", "openllmetry"}
    for graph, row in lg["graphs"].items():
        assert set(row) == set(lg["modes"]) >= expected
        assert row["uninstrumented"]["spans"] == 0
        # The floor writes as many spans as orchestrace, each smaller.
        assert row["spans_only"]["spans"] == row["orchestrace"]["spans"], graph
        assert row["spans_only"]["bytes"] < row["orchestrace"]["bytes"], graph
        for mode in ("orchestrace", "orchestrace_content", "openinference", "openllmetry"):
            assert row[mode]["spans"] > 0 and row[mode]["bytes"] > 0, (graph, mode)
        for cell in row.values():
            assert cell["paired_ratio"] > 0 and cell["wall_per_cpu"] > 0 and cell["mean_ratio"] > 0
        assert isinstance(row["orchestrace"]["ratio_met"], bool)
        assert "ratio_met" not in row["orchestrace_content"]  # judged against the peers instead
    assert lg["ratio_targets"] == {"orchestrace": 1.35} and lg["peer_fraction_target"] == 0.5
    assert set(lg["target"]) == set(lg["graphs"])
    for graph, target in lg["target"].items():  # capture on against the peers; capture off beside it
        assert target["orchestrace_overhead_us"] == lg["graphs"][graph]["orchestrace_content"]["overhead_us"]
        assert target["met"] == (target["fraction_of_lighter"] <= 0.5)
        assert target["fraction_of_lighter_capture_off"] > 0
    counted = lg["instructions"]
    if "skipped" not in counted:  # valgrind installed
        chain = counted["graphs"]["chain3"]
        assert chain["per_run"]["orchestrace"] > chain["per_run"]["uninstrumented"] > 0
        # Each run's spans are encoded as OTLP inside the count; the encoding is counted alone too.
        export = chain["export_per_run"]
        assert 0 < export["uninstrumented"] < export["orchestrace"] < chain["per_run"]["orchestrace"]
        # ot.configure's exporter writes OTel's bytes (test_sdk_trace_encoder.py) in about half the
        # instructions (docs/sdk-export-size.md).
        assert export["orchestrace"] < 0.6 * chain["export_otel_per_run"]["orchestrace"]


def test_collector_figures(quick_results: tuple[Path, dict[str, Any]]) -> None:
    c = quick_results[1]["collector"]
    assert (
        c["ingest"]["spans"]
        == c["sizes"]["rounds"] * c["sizes"]["traces_per_round"] * c["sizes"]["spans_per_trace"]
    )
    for key in ("ack_spans_per_s", "e2e_spans_per_s", "spans_per_collector_cpu_s", "peak_rss_mb"):
        assert c["ingest"][key] > 0, key
    assert len(c["ingest"]["rss_after_each_round_mb"]) == c["sizes"]["rounds"]
    assert c["memory"]["many"]["rss_open_mb"] > 0 and c["memory"]["one_big"]["peak_rss_mb"] > 0
    for key in (
        "decode_spans_per_s",
        "convert_episode_spans_per_s",
        "local_engine_spans_per_s",
        "cli_convert_spans_per_s",
    ):
        assert c["conversion"][key] > 0, key
    # Both modes in one run: compiled (`make sync` builds the modules) and pure Python.
    modes = c["conversion"]["modes"]
    assert modes["compiled"]["ran_compiled"] is True and modes["pure_python"]["ran_compiled"] is False
    assert all(ratio > 0 for ratio in modes["speedup"].values()) and len(modes["speedup"]) == 4
    if "skipped" not in modes["instructions"]:
        assert modes["instructions"]["pure_over_compiled"]["convert_episode"] > 1
    assert set(c["targets"]) >= {"ingest_met", "convert_met"}


def test_scaling_figures_and_plot(quick_results: tuple[Path, dict[str, Any]]) -> None:
    out, results = quick_results
    s = results["scaling"]
    assert [p["spans"] for p in s["points"]] == s["sizes"]["spans"]
    assert s["convert_time_loglog_slope"] > 0
    assert (out / s["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ray_engine_matches_local(quick_results: tuple[Path, dict[str, Any]]) -> None:
    r = quick_results[1]["ray"]
    assert r["same_output"] is True
    assert r["local"]["traces"] == r["ray"]["traces"] == r["sizes"]["traces"]
    # The per-stage costs behind the paper estimate were measured, and the estimate is a range.
    assert all(r["stage_costs"][k] > 0 for k in ("scan_cpu_s", "convert_cpu_s"))
    estimate = r["estimate"]
    assert 0 < estimate["speedup_pessimistic"] <= estimate["speedup_optimistic"]
    # The overhead's breakdown by process adds up to it; the workers were seen.
    assert sum(r["overhead_by_process"].values()) == pytest.approx(estimate["overhead_cpu_s"], abs=0.05)
    assert r["ray_running_cluster"]["workers"]["count"] >= 1


def test_markdown_report(quick_results: tuple[Path, dict[str, Any]]) -> None:
    out, _ = quick_results
    text = (out / "results.md").read_text()
    for title in (
        "SDK decorators",
        "LangGraph instrumentations",
        "Collector",
        "Growth with trace size",
        "Ray",
    ):
        assert title in text
    assert "Not measured" not in text


def test_view_figures(quick_results: tuple[Path, dict[str, Any]]) -> None:
    view = quick_results[1]["view"]
    for name in ("turns_2000", "events_10000"):
        assert view[name]["draw_ms"] >= 0 and view[name]["page_ms"] > 0
        assert view[name]["marks"] > view[name]["turns"]  # every turn drawn, and more
