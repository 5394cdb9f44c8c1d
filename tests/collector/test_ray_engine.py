"""``--engine ray`` on a local Ray cluster writes what the local engine writes, from the same dump files.

The inputs exercise what the Ray engine has to get right across files: one OTel trace split over a protobuf
and an OTLP-JSON file, an episode stitched from two OTel traces by its episode id (named only in a later
file), a span sent twice (an exporter retry), files cut in parts to keep every CPU busy, a gzip dump, and
files that are not trace exports or carry bad span ids. One two-CPU Ray cluster serves every test (its
start-up is most of their time).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_fixtures import encode_otlp_json, encode_protobuf, record_handover, record_run
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from orchestrace_collector.offline import ConvertResult, convert_local
from orchestrace_collector.output import TraceDirWriter

# Slow (each test starts a Ray cluster): `make test-slow` runs it (CI: after `make test`).
pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    """Started as convert_with_ray starts a local cluster: its workers share this interpreter's environment
    (with Ray's `uv run` hook on they start through the driver's `uv` command line, which fails where that
    `uv` was a relative path, `.tools/bin/uv`), and it listens on loopback only; those settings hold for its
    life, never for the tests' process after it (test_many_hosts starts multi-node clusters from it)."""
    from orchestrace_collector.ray_engine import local_cluster_settings

    with local_cluster_settings():
        ray.init(
            "local",
            num_cpus=2,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            include_dashboard=False,
            configure_logging=False,
        )
        yield
        ray.shutdown()


def _listening(root: int) -> dict[str, set[str]]:
    """The TCP sockets the process ``root`` and its descendants listen on, by process name (from /proc: the
    sockets each process holds, found in the kernel's tables of listening sockets)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    addresses: dict[str, str] = {}  # socket inode -> its address, for the sockets listening
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            host, port = fields[1].split(":")
            packed = b"".join(bytes.fromhex(host[i:i + 8])[::-1] for i in range(0, len(host), 8))
            addresses[fields[9]] = f"{socket.inet_ntop(family, packed)}:{int(port, 16)}"
    found: dict[str, set[str]] = {}
    for pid in tree:
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and link[8:-1] in addresses:
                        found.setdefault(name, set()).add(addresses[link[8:-1]])
    return found


def _wide(listening: dict[str, set[str]]) -> dict[str, set[str]]:
    """The sockets not on loopback (127.0.0.1, or ::ffff:127.0.0.1 on a dual-stack socket)."""
    loopback = ("127.0.0.1:", "::ffff:127.0.0.1:", "::1:")
    wide = {name: {a for a in found if not a.startswith(loopback)} for name, found in listening.items()}
    return {name: found for name, found in wide.items() if found}


def test_the_tests_cluster_listens_on_loopback_only() -> None:
    listening = _listening(os.getpid())
    assert {"gcs_server", "raylet"} <= set(listening), listening  # Ray's servers were found
    assert _wide(listening) == {}


def test_a_cluster_convert_starts_listens_on_loopback_only(tmp_path: Path, dumps: list[Path]) -> None:
    """``convert_with_ray`` in a process of its own starts its own cluster; while it writes, every server of
    that cluster (GCS, raylet, workers, agents, the driver) listens on loopback. After it, the process's
    environment and Ray's reading of it are Ray's defaults again: multi-node clusters on, for a later
    connection to a real cluster and for the programs the process starts."""
    program = textwrap.dedent("""
        import os
        import sys
        from pathlib import Path
        import ray
        from ray._private import ray_constants
        from orchestrace_collector.output import TraceDirWriter
        from orchestrace_collector.ray_engine import convert_with_ray

        class Paused(TraceDirWriter):
            def write_raw(self, *lines):
                if sys.stdin is not None:  # the first write: the cluster is up; wait until it is looked at
                    print("writing", flush=True)
                    sys.stdin.readline()
                    sys.stdin = None
                super().write_raw(*lines)

        writer = Paused(Path(sys.argv[1]))
        before = dict(os.environ)
        print("written", convert_with_ray([Path(sys.argv[2])], writer).written, flush=True)
        writer.close()
        print("environment unchanged", dict(os.environ) == before, flush=True)
        print("multi-node", ray_constants.ENABLE_RAY_CLUSTER, ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV,
              flush=True)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    process = subprocess.Popen([sys.executable, "-c", program, str(tmp_path / "out"), str(dumps[0])], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    try:
        assert process.stdout.readline() == "writing\n"
        listening = _listening(process.pid)
        process.stdin.write("go\n")
        process.stdin.flush()
        assert process.stdout.readline() == "written 4\n"
        assert process.stdout.readline() == "environment unchanged True\n"
        assert process.stdout.readline() == "multi-node True True\n"
        assert process.wait(120) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert {"gcs_server", "raylet"} <= set(listening), listening
    assert _wide(listening) == {}


def _both(dumps: list[Path], tmp_path: Path) -> tuple[ConvertResult, ConvertResult]:
    from orchestrace_collector.ray_engine import convert_with_ray

    local_writer, ray_writer = TraceDirWriter(tmp_path / "local"), TraceDirWriter(tmp_path / "ray")
    local = convert_local(dumps, local_writer)
    local_writer.close()
    on_ray = convert_with_ray(dumps, ray_writer)
    ray_writer.close()
    assert _digest(tmp_path / "ray", "traces-") == _digest(tmp_path / "local", "traces-")
    assert _digest(tmp_path / "ray", "turns-") == _digest(tmp_path / "local", "turns-")
    assert (on_ray.files, on_ray.spans, on_ray.failed) == (local.files, local.spans, local.failed)
    assert on_ray.bad_files == local.bad_files
    return local, on_ray


def _digest(out: Path, prefix: str) -> tuple[int, str]:
    lines = sorted(
        json.dumps(json.loads(line), sort_keys=True)
        for path in out.glob(f"{prefix}*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    )
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


@pytest.fixture
def dumps(tmp_path: Path) -> list[Path]:
    plain_a, plain_b = record_run("task-a"), record_run("task-b", tools=3)
    split = record_run("task-split", tools=4)
    first_half = record_run("task-ep", episode_id="ep-1")
    second_half = record_run("task-ep", episode_id="ep-1")
    directory = tmp_path / "dumps"
    directory.mkdir()
    (directory / "a.pb").write_bytes(encode_protobuf([*plain_a, *plain_b, *first_half, *split[:2]]))
    (directory / "b.json").write_text(json.dumps(encode_otlp_json([*split[2:], *second_half, plain_a[0]])))
    (directory / "c.pb").write_bytes(b"this is not a trace export")
    return [directory]


def test_ray_engine_writes_what_the_local_engine_writes(tmp_path: Path, dumps: list[Path]) -> None:
    local, on_ray = _both(dumps, tmp_path)

    # Four episodes: two plain runs, the run split over two files, and ep-1 stitched from two OTel traces.
    assert local.written == on_ray.written == 4
    assert len(on_ray.bad_files) == 1
    assert "c.pb" in on_ray.bad_files[0]
    stitched = [
        json.loads(line)
        for line in next((tmp_path / "ray").glob("traces-*.jsonl")).read_text().splitlines()
        if json.loads(line)["task_id"] == "task-ep"
    ]
    assert len(stitched) == 1
    assert len({e["otel_trace_id"] for e in stitched[0]["events"] if "otel_trace_id" in e}) == 2


def test_files_in_parts_gzip_and_an_episode_named_in_a_later_file(tmp_path: Path) -> None:
    plain = [record_run(f"task-{i}", tools=i % 3 + 1) for i in range(5)]
    named_late = record_run("task-late", episode_id="ep-2")  # root (last span) carries the episode id
    named_again = record_run("task-late", episode_id="ep-2")
    bad_ids = ExportTraceServiceRequest.FromString(encode_protobuf(record_run("task-bad")))
    bad_ids.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x00" * 8
    directory = tmp_path / "dumps"
    directory.mkdir()
    # x.pb: five single-file episodes (cut in two parts: two files for two CPUs' four tasks) and all of an
    # OTel trace of ep-2 but its root, which names the episode only in y.pb.gz.
    (directory / "x.pb").write_bytes(encode_protobuf([s for run in plain for s in run] + named_late[:-1]))
    y = [*named_late[-1:], *named_again, *record_run("task-gz")]
    (directory / "y.pb.gz").write_bytes(gzip.compress(encode_protobuf(y)))
    (directory / "z.pb").write_bytes(bad_ids.SerializeToString())

    local, on_ray = _both([directory], tmp_path)

    assert local.written == on_ray.written == 7  # five plain runs, task-gz, and ep-2 from two OTel traces
    assert len(on_ray.bad_files) == 1
    assert "z.pb" in on_ray.bad_files[0] and "bad ids" in on_ray.bad_files[0]
    (late,) = [
        json.loads(line)
        for line in next((tmp_path / "ray").glob("traces-*.jsonl")).read_text().splitlines()
        if json.loads(line)["task_id"] == "task-late"
    ]
    assert late["metrics"]["spans"] == len(named_late) + len(named_again)


def test_traces_continuing_others_join_their_episodes_as_locally(tmp_path: Path) -> None:
    """A runtime's trace whose root links to the span that sent it its work (in another file, before or after
    the trace it continues, protobuf and OTLP-JSON), a root linking into two traces, and one whose link is
    orchestrace's own (neither continues a trace)."""
    handed, batch, typed = record_handover(), record_handover(links=2), record_handover(typed=True)
    directory = tmp_path / "dumps"
    directory.mkdir()
    runtime = next(s for s in handed if s.name == "process worker").context.trace_id
    continuing = [s for s in handed if s.context.trace_id == runtime]
    (directory / "a.pb").write_bytes(encode_protobuf([*continuing, *batch]))
    lead = [s for s in handed if s not in continuing]
    (directory / "b.json").write_text(json.dumps(encode_otlp_json(lead)))
    (directory / "c.pb").write_bytes(encode_protobuf(typed))

    local, on_ray = _both([directory], tmp_path)

    assert local.written == on_ray.written == 5  # the handover as one episode, the other two as two each


def test_a_cycle_of_continued_traces_is_one_episode() -> None:
    from orchestrace_collector.ray_engine import Scanned, TraceIndex, episode_keys

    scanned = [Scanned([TraceIndex("a", 1, "", -1, "b"), TraceIndex("b", 1, "", -1, "c"),
                        TraceIndex("c", 1, "", -1, "b"), TraceIndex("d", 1, "ep", 0, "a"),
                        TraceIndex("e", 1, "", -1, "missing")])]
    assert episode_keys(scanned) == {"a": "b", "c": "b", "d": "ep"}


def test_spools_of_two_collectors_assemble_like_one_collector(tmp_path: Path) -> None:
    """Many machines: each run's spans are split over two ``--spool-only`` collectors; ``convert --engine
    ray`` over both spools writes what one collector receiving everything writes."""
    import httpx
    from collector_fixtures import start_collector
    from orchestrace_collector.ray_engine import convert_with_ray

    single = start_collector(tmp_path / "single", "--quiet-period", "0.2")
    spools = [start_collector(tmp_path / f"spool{i}", "--spool-only") for i in range(2)]
    headers = {"Content-Type": "application/x-protobuf"}
    try:
        for index in range(6):
            spans = record_run(f"spread-{index}", tools=1 + index % 3, episode_id=f"episode-{index}")
            whole = encode_protobuf(spans)
            assert httpx.post(single.http_endpoint, content=whole, headers=headers).is_success
            for part, spool in enumerate(spools):
                body = encode_protobuf(spans[part::2])  # every other span: no machine sees a whole run
                assert httpx.post(spool.http_endpoint, content=body, headers=headers).is_success
    finally:
        assert all(c.stop() == 0 for c in (single, *spools))
    assert not list((tmp_path / "spool0").glob("traces-*.jsonl")), "a spool-only collector writes no traces"
    writer = TraceDirWriter(tmp_path / "merged")
    result = convert_with_ray([tmp_path / f"spool{i}" / "wal" for i in range(2)], writer)
    writer.close()
    assert result.written == 6 and not result.bad_files and not result.failed

    def traces(out: Path) -> dict[str, dict[str, object]]:
        found = {}
        for path in out.glob("traces-*.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                trace = json.loads(line)
                trace["metrics"].pop("revision", None)
                found[trace["trace_id"]] = trace
        return found

    merged, expected = traces(tmp_path / "merged"), traces(tmp_path / "single")
    assert merged.keys() == expected.keys() and len(merged) == 6
    for trace_id, trace in expected.items():
        assert merged[trace_id] == trace, trace_id
