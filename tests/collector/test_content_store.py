"""The content store is content-addressed and verifiable: every file is named by the sha256 of its own
bytes, a span's ref that differs from what was stored is mapped, nothing is trusted by name alone, the SDK
and the collector compute one ref per value, and ``orchestrace validate`` checks every content file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orchestrace as ot
from collector_fixtures import record_run, validate_trace_dir
from orchestrace import semconv as sc
from orchestrace.content import content_ref
from orchestrace_collector.cli import app
from orchestrace_collector.convert import convert_episode
from orchestrace_collector.convert.content import OUTPUT_CONTENT, ContentStore
from orchestrace_collector.inprocess import span_from_readable
from orchestrace_collector.output import (
    CONTENT_REFS,
    TraceDirWriter,
    content_path,
    content_refs,
    latest_traces,
    latest_turns,
    read_content,
)
from orchestrace_collector.validate import content_problems
from typer.testing import CliRunner
from written_turns import record_turns


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_one(out: Path, contents: dict[str, str]) -> None:
    episode = convert_episode([span_from_readable(s) for s in record_run("store")])
    writer = TraceDirWriter(out)
    writer.write(episode.trace, [], contents)
    writer.close()


def test_content_is_stored_under_its_own_hash_and_the_claimed_ref_is_mapped(tmp_path: Path) -> None:
    claimed = content_ref("the whole prompt, longer than what was captured")
    write_one(tmp_path, {claimed: "the whole prompt", content_ref("exact"): "exact"})
    files = sorted(p for p in (tmp_path / "content").rglob("*") if p.is_file())
    assert sorted(p.stem for p in files) == sorted([sha(b"the whole prompt"), sha(b"exact")])
    assert all(sha(p.read_bytes()) == p.stem for p in files)
    assert not content_path(tmp_path, claimed.removeprefix("sha256:")).exists()  # never under a ref it misses
    assert content_refs(tmp_path) == {
        claimed: "sha256:" + sha(b"the whole prompt")
    }  # exact content: no entry
    assert read_content(tmp_path, claimed) == "the whole prompt"
    assert read_content(tmp_path, content_ref("exact")) == "exact"
    assert read_content(tmp_path, content_ref("never stored")) is None


def test_a_planted_file_is_replaced_not_trusted(tmp_path: Path) -> None:
    text = "the real content"
    planted = content_path(tmp_path, sha(text.encode()))
    planted.parent.mkdir(parents=True)
    planted.write_text("something else")
    assert [p.split(":")[0] for p in content_problems(tmp_path)] == [planted.relative_to(tmp_path).as_posix()]
    write_one(tmp_path, {content_ref(text): text})
    assert planted.read_text() == text
    assert list(content_problems(tmp_path)) == []


def test_validate_checks_every_content_file(tmp_path: Path) -> None:
    runner = CliRunner()
    write_one(tmp_path, {content_ref("fine"): "fine"})
    result = runner.invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 0, result.output
    damaged = content_path(tmp_path, sha(b"fine"))
    damaged.write_text("tampered")
    stray = tmp_path / "content" / "zz" / "notes.txt"
    stray.parent.mkdir()
    stray.write_text("x")
    result = runner.invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "do not hash to their names" in result.output
    assert [p.split(":")[0] for p in content_problems(tmp_path)] == [
        damaged.relative_to(tmp_path).as_posix(),
        stray.relative_to(tmp_path).as_posix(),
    ]


def test_sdk_and_collector_compute_one_ref_per_value() -> None:
    store = ContentStore()
    for value in (["a", "b"], "plain text", ("x", 1)):
        ref = store.ref({sc.GEN_AI_TOOL_CALL_RESULT: value}, sc.ORCH_OUTPUT_REF, OUTPUT_CONTENT)
        assert ref == content_ref(list(value) if isinstance(value, tuple) else value)
        # what is kept for the store hashes to that ref
        assert ref is not None and "sha256:" + sha(store.contents[ref].encode()) == ref


def test_every_content_file_of_a_captured_run_hashes_to_its_name(tmp_path: Path) -> None:
    @ot.tool
    def search(query: str) -> list[str]:
        return [f"{query} result", "second"]

    @ot.llm("m")
    def chat(messages: list[dict[str, str]]) -> str:
        return "answer " * 50

    def run() -> None:
        chat([{"role": "user", "content": "q " * 500}])
        search("tides")
        ot.message("someone", {"note": "a structured message"})

    record_turns(tmp_path, run, max_content_bytes=300)  # the prompt and completion are cut
    files = [p for p in (tmp_path / "content").rglob("*") if p.is_file()]
    assert len(files) >= 4 and all(sha(p.read_bytes()) == p.stem for p in files)
    traces = validate_trace_dir(tmp_path)
    (trace,) = traces.values()
    (turn,) = latest_turns(tmp_path, traces)[trace["trace_id"]]
    refs = content_refs(tmp_path)
    # every ref of the trace and the turn reads back, through the map when it was stored cut
    for ref in [
        turn["input_ref"],
        turn["output_ref"],
        *(e["content_ref"] for e in trace["events"] if "content_ref" in e),
    ]:
        assert read_content(tmp_path, ref, refs) is not None, ref
    assert turn["input_ref"] in refs and turn["output_ref"] in refs  # cut: stored under their own hashes
    lines = (tmp_path / CONTENT_REFS).read_text().splitlines()
    assert len(lines) == len({json.loads(line)["ref"] for line in lines})
    assert latest_traces([tmp_path])
