"""``orchestrace collect`` options: ``--reward`` on live traces, bad options and busy ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from collector_fixtures import encode_protobuf, free_port, record_run, start_collector, validate_trace_dir


def test_reward_function_on_collected_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "live_rewards.py").write_text(
        "def score(trace):\n    return {'team': 1.0 if trace.task_id.endswith('ok') else 0.0}\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the collector subprocess imports the module
    running = start_collector(tmp_path / "out", "--quiet-period", "0.2", "--reward", "live_rewards:score")
    for task in ("live-ok", "live-bad"):
        body = encode_protobuf(record_run(task))
        response = httpx.post(
            running.http_endpoint, content=body, headers={"Content-Type": "application/x-protobuf"}
        )
        assert response.status_code == 200
    assert running.stop() == 0
    rewards = {t["task_id"]: t["rewards"] for t in validate_trace_dir(running.out).values()}
    assert rewards["live-ok"]["team"] == 1.0 and rewards["live-bad"]["team"] == 0.0


def _collect(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "orchestrace_collector.cli", "collect", *args]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a width asked for is honoured
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)


def test_bad_options_and_busy_ports_fail_cleanly(tmp_path: Path) -> None:
    bad_fsync = _collect("--out", str(tmp_path / "a"), "--fsync", "sometimes")
    assert bad_fsync.returncode == 1 and "--fsync" in bad_fsync.stderr
    bad_reward = _collect("--out", str(tmp_path / "b"), "--reward", "no_such_module_xyz:f")
    assert bad_reward.returncode == 1 and "cannot import" in bad_reward.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        taken = [_collect("--out", str(tmp_path / "c"), "--port", str(free_port()), "--grpc-port", port),
                 _collect("--out", str(tmp_path / "c"), "--port", port, "--grpc-port", str(free_port()))]
    for done, receiver in zip(taken, ("gRPC", "HTTP"), strict=True):
        # one line (no "collector stopped", no grpc core log line), and no output directory or WAL left
        assert done.returncode == 1 and done.stderr.splitlines() == [
            f"error: cannot start the collector: cannot bind {receiver} port 127.0.0.1:{port}: "
            "Address already in use"
        ], done.stderr
    assert not (tmp_path / "c").exists()
    bad_headers = _collect("--out", str(tmp_path / "d"), "--forward-headers", ",")
    assert bad_headers.returncode == 1 and "--forward-headers" in bad_headers.stderr
    no_token = _collect("--out", str(tmp_path / "e"), "--forward-token-file", str(tmp_path / "missing"))
    assert no_token.returncode == 1 and "--forward-token-file" in no_token.stderr


def test_forward_headers_are_read_as_otlp_exporters_read_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrace_collector.cli import FORWARD_HEADERS_ENV, _forward_headers

    token = tmp_path / "token"
    token.write_text("s3cret\n")
    parsed = _forward_headers("x-tenant=team%20a, x-env = prod", None)
    assert parsed == {"x-tenant": "team a", "x-env": "prod"}
    assert _forward_headers(None, token) == {"authorization": "Bearer s3cret"}
    monkeypatch.setenv(FORWARD_HEADERS_ENV, "x-from=env")
    assert _forward_headers(None, None) == {"x-from": "env"}
    assert _forward_headers("x-given=1", None) == {"x-given": "1"}, "the option wins over the variable"
