"""Many machines, rehearsed on hosts of their own: one network namespace per host on a private bridge.

Two rollout-worker hosts send the spans of the same episodes (each episode's spans cut in four: every worker
sends some to each collector) over the network, with a bearer token, to two ``--spool-only`` collector hosts;
a Ray head (where the driver runs) and a Ray worker node on two more hosts, each bound to its namespace
address; ``orchestrace convert --engine ray --address`` over both spools on that cluster writes what one
collector receiving everything writes. Mid-run, one collector host's process is killed with SIGKILL and
restarted on the same spool: what it acknowledged before is converted too.

The hosts share this machine's filesystem: it stands for the shared storage the spools need (see
docs/many-machines.md). All traffic stays between the test's namespaces (10.231.7.0/24, no route out).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from collector_fixtures import encode_protobuf, record_run, start_collector, validate_trace_dir

# Slow (two Ray nodes and five collector starts): `make test-slow` runs it (CI: after `make test`).
pytestmark = pytest.mark.slow

IP = shutil.which("ip") or "/usr/sbin/ip"
SUBNET = "10.231.7"
# Hosts -> the last byte of their address.
ADDRESSES = {"w1": 11, "w2": 12, "c1": 21, "c2": 22, "r1": 31, "r2": 32}
OTLP_PORT, RAY_PORT = 4318, 6379  # every host has its own port space
EPISODES = 12
# A worker's OTLP requests, in turn: (episode, slice) of every episode, spaced so the kill lands mid-run.
PACE_S = 0.1
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",  # never reach the internet
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",  # workers share this interpreter's environment (see ray_engine)
    "RAY_AUTH_MODE": "token",
    # On a loaded machine a node's agents take longer to start than Ray waits for them by default (30 s).
    "RAY_agent_register_timeout_ms": "240000",
    "RAY_raylet_start_wait_time_s": "240",
    "RAY_worker_register_timeout_seconds": "240",
}

# A rollout worker: posts each body in its directory (named <seq>-<collector>.pb) to that collector, retrying
# as an OTLP exporter does while the collector cannot take it, and records each acknowledged body.
WORKER = r"""
import sys, time
from pathlib import Path
import httpx
bodies, token, acks = Path(sys.argv[1]), Path(sys.argv[2]).read_text().strip(), Path(sys.argv[3])
pace = float(sys.argv[4])
urls = dict(arg.split("=", 1) for arg in sys.argv[5:])
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"}
with httpx.Client(headers=headers, timeout=5) as client:
    for body in sorted(bodies.glob("*.pb")):
        deadline = time.monotonic() + 120
        while True:
            try:
                status = client.post(urls[body.stem.split("-")[1]], content=body.read_bytes()).status_code
            except httpx.TransportError:
                status = 0
            if status == 200:
                break
            if status not in (0, 429, 502, 503, 504) or time.monotonic() > deadline:
                sys.exit(f"{body.name}: {status}")
            time.sleep(0.1)
        with acks.open("a") as log:
            log.write(body.name + "\n")
        time.sleep(pace)
"""


@dataclass
class Hosts:
    """Network namespaces named ``<prefix>-<host>``, each with ``eth0`` on a bridge in ``<prefix>-sw``."""

    prefix: str = field(default_factory=lambda: f"omh{os.getpid()}")
    made: list[str] = field(default_factory=list)

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        return f"{SUBNET}.{ADDRESSES[host]}"

    def make(self) -> None:
        switch = self.ns("sw")
        self._ip("netns", "add", switch)
        self.made.append(switch)
        self._ip("-n", switch, "link", "add", "br0", "type", "bridge")
        self._ip("-n", switch, "link", "set", "br0", "up")
        for host in ADDRESSES:
            name = self.ns(host)
            self._ip("netns", "add", name)
            self.made.append(name)
            # Made in the switch namespace, one end moved to the host's: nothing touches this machine's own.
            self._ip(
                "-n", switch, "link", "add", f"v{host}", "type", "veth", "peer", "name", "eth0", "netns", name
            )
            self._ip("-n", switch, "link", "set", f"v{host}", "master", "br0", "up")
            self._ip("-n", name, "link", "set", "lo", "up")
            self._ip("-n", name, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            self._ip("-n", name, "link", "set", "eth0", "up")

    def remove(self) -> None:
        for name in reversed(self.made):  # a namespace's veth ends go with it
            subprocess.run([IP, "netns", "del", name], capture_output=True, check=False)
        self.made.clear()

    def command(self, host: str, *argv: str, env: dict[str, str] | None = None) -> list[str]:
        extra = [f"{k}={v}" for k, v in (env or {}).items()]
        return [IP, "netns", "exec", self.ns(host), *(["env", *extra] if extra else []), *argv]

    def _ip(self, *args: str) -> None:
        subprocess.run([IP, *args], capture_output=True, text=True, check=True)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add)")
    if not Path(IP).exists():
        pytest.skip("no `ip` command (iproute2) to make network namespaces")
    made = Hosts()
    try:
        made.make()
    except subprocess.CalledProcessError as error:
        made.remove()
        pytest.skip(f"cannot make network namespaces here: {error.stderr.strip()}")
    try:
        yield made
    finally:
        made.remove()


@dataclass
class HostCollector:
    """``orchestrace collect --spool-only`` on a host's address, with a token, its log under ``log``."""

    hosts: Hosts
    host: str
    out: Path
    token_file: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.hosts.address(self.host)}:{OTLP_PORT}/v1/traces"

    @property
    def log(self) -> Path:
        return self.out.parent / f"{self.host}-collector.log"

    def start(self) -> HostCollector:
        argv = [
            sys.executable,
            "-m",
            "orchestrace_collector.cli",
            "collect",
            "--out",
            str(self.out),
            "--spool-only",
            "--host",
            self.hosts.address(self.host),
            "--port",
            str(OTLP_PORT),
            "--grpc-port",
            "4317",
            "--token-file",
            str(self.token_file),
        ]
        seen = self.log.read_text().count("collector ready") if self.log.exists() else 0
        with self.log.open("ab") as log:
            # `ip netns exec` execs the command: this process is the collector itself.
            self.process = subprocess.Popen(
                self.hosts.command(self.host, *argv), stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while self.log.read_text().count("collector ready") == seen:
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)
        return self

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()


@dataclass
class RayNode:
    """``ray start --block`` on a host, bound to its address, in a temp dir and process group of its own."""

    process: subprocess.Popen[str]
    temp_dir: str

    @classmethod
    def start(cls, hosts: Hosts, host: str, env: dict[str, str], *options: str) -> RayNode:
        temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must stay short
        argv = [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--block",
            f"--node-ip-address={hosts.address(host)}",
            "--num-cpus=1",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
            *options,
        ]
        process = subprocess.Popen(
            hosts.command(host, *argv, env=env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        node = cls(process, temp_dir)
        seen: list[str] = []
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if "Ray runtime started" in line:
                # Keep its pipe from filling for the rest of the run.
                threading.Thread(target=process.stdout.read, daemon=True).start()
                return node
        node.stop()
        raise AssertionError(f"ray start on {host} failed:\n{''.join(seen)[-3000:]}")

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):  # the whole group: raylet, GCS, workers
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                self.process.poll()
                try:
                    os.killpg(self.process.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.3)
        self.process.wait()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _episodes() -> list[list[bytes]]:
    """Each episode: two OTel traces (one per worker host's part of the rollout) joined by its episode id,
    its spans cut in four slices (span index modulo 4) -> [whole body, slice 0, .., slice 3]."""
    bodies = []
    for index in range(EPISODES):
        episode = f"episode-{index}"
        spans = [
            *record_run(f"task-{index % 4}", tools=3 + index % 4, episode_id=episode),
            *record_run(f"task-{index % 4}", tools=2, episode_id=episode),
        ]
        bodies.append([encode_protobuf(spans), *(encode_protobuf(spans[k::4]) for k in range(4))])
    return bodies


def _lines(out: Path, prefix: str) -> list[dict[str, object]]:
    found = []
    for path in sorted(out.glob(f"{prefix}*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if prefix == "traces-":
                row["metrics"].pop("revision", None)  # one collector may write an episode twice
            found.append(row)
    return sorted(found, key=lambda row: json.dumps(row, sort_keys=True))


def _acked(acks: list[Path], collector: str) -> int:
    return sum(
        line.endswith(f"-{collector}.pb") for a in acks if a.exists() for line in a.read_text().split()
    )


def test_two_worker_hosts_two_collector_hosts_and_a_two_host_ray_cluster(
    tmp_path: Path, hosts: Hosts
) -> None:
    # Ray 2.60 binds --node-ip-address where it can, but its gRPC servers (GCS, raylet, workers) listen on
    # every address of their host: a host here has only loopback and its bridge address, and no route out.
    for host in ADDRESSES:
        ipv4 = subprocess.run([IP, "-n", hosts.ns(host), "-4", "-o", "addr"], capture_output=True, text=True)
        assert {line.split()[3] for line in ipv4.stdout.splitlines()} == {
            "127.0.0.1/8",
            f"{hosts.address(host)}/24",
        }
        routes = subprocess.run(
            [IP, "-n", hosts.ns(host), "route", "show", "table", "all"], capture_output=True
        )
        assert b"default" not in routes.stdout
    token_file = tmp_path / "token"
    token_file.write_text(secrets.token_hex(16))
    episodes = _episodes()
    # Slice k of every episode: worker w1 sends slices 0 and 1, w2 slices 2 and 3; c1 gets 0, 2; c2 1, 3.
    for worker, slices in (("w1", (0, 1)), ("w2", (2, 3))):
        (tmp_path / worker).mkdir()
        for index, bodies in enumerate(episodes):
            for k in slices:
                (tmp_path / worker / f"{index:03d}{k}-c{k % 2 + 1}.pb").write_bytes(bodies[1 + k])

    # One collector receiving everything (on loopback here), for the expected output.
    single = start_collector(tmp_path / "single", "--quiet-period", "0.2")
    try:
        for bodies in episodes:
            assert httpx.post(
                single.http_endpoint, content=bodies[0], headers={"Content-Type": "application/x-protobuf"}
            ).is_success
    finally:
        assert single.stop() == 0

    collectors = {
        c: HostCollector(hosts, c, tmp_path / f"spool-{c}", token_file).start() for c in ("c1", "c2")
    }
    acks = [tmp_path / f"{worker}.acks" for worker in ("w1", "w2")]
    workers: list[subprocess.Popen[str]] = []
    ray_nodes: list[RayNode] = []
    try:
        # The collectors serve their network address only with the token.
        probe = subprocess.run(
            hosts.command(
                "w1",
                sys.executable,
                "-c",
                "import httpx, sys; print(httpx.post(sys.argv[1], content=b'').status_code)",
                collectors["c1"].url,
            ),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert probe.stdout.strip() == "401", probe.stdout + probe.stderr

        urls = [f"{c}={collector.url}" for c, collector in collectors.items()]
        for worker, ack in zip(("w1", "w2"), acks, strict=True):
            workers.append(
                subprocess.Popen(
                    hosts.command(
                        worker,
                        sys.executable,
                        "-c",
                        WORKER,
                        str(tmp_path / worker),
                        str(token_file),
                        str(ack),
                        str(PACE_S),
                        *urls,
                    ),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        # Mid-run: once c2 has acknowledged a quarter of what it is sent, SIGKILL it (no flush, no shutdown).
        per_collector = EPISODES * 2
        deadline = time.monotonic() + 120
        while _acked(acks, "c2") < per_collector // 4:
            assert time.monotonic() < deadline and all(w.poll() is None for w in workers)
            time.sleep(0.01)
        collectors["c2"].kill()
        acked_before_kill = _acked(acks, "c2")
        time.sleep(1.0)  # the workers retry against a host that refuses connections
        assert _acked(acks, "c2") == acked_before_kill < per_collector
        collectors["c2"].start()  # the same spool
        for process in workers:
            output, _ = process.communicate(timeout=180)
            assert process.returncode == 0, output
        assert _acked(acks, "c1") == _acked(acks, "c2") == per_collector
        assert all(c.stop() == 0 for c in collectors.values())
        assert not list((tmp_path / "spool-c1").glob("traces-*.jsonl")), (
            "a spool-only collector writes no traces"
        )

        ray_token = {**RAY_ENV, "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        head = f"{hosts.address('r1')}:{RAY_PORT}"
        ray_nodes.append(
            RayNode.start(hosts, "r1", ray_token, "--head", f"--port={RAY_PORT}", "--include-dashboard=false")
        )
        ray_nodes.append(RayNode.start(hosts, "r2", ray_token, f"--address={head}"))
        nodes = subprocess.run(
            hosts.command(
                "r1",
                sys.executable,
                "-c",
                "import ray, sys; ray.init(sys.argv[1], log_to_driver=False); "
                "print(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))",
                head,
                env=ray_token,
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert nodes.stdout.strip().splitlines()[-1:] == [str([hosts.address("r1"), hosts.address("r2")])], (
            nodes.stdout + nodes.stderr
        )
        convert = subprocess.run(
            hosts.command(
                "r1",
                str(Path(sys.executable).parent / "orchestrace"),
                "convert",
                "--engine",
                "ray",
                "--address",
                head,
                "--out",
                str(tmp_path / "merged"),
                str(tmp_path / "spool-c1" / "wal"),
                str(tmp_path / "spool-c2" / "wal"),
                env=ray_token,
            ),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert convert.returncode == 0, convert.stdout + convert.stderr
    finally:
        for process in workers:
            if process.poll() is None:
                process.kill()
        for collector in collectors.values():
            if collector.process is not None and collector.process.poll() is None:
                collector.kill()
        for node in reversed(ray_nodes):
            node.stop()

    validate_trace_dir(tmp_path / "merged")
    merged, expected = _lines(tmp_path / "merged", "traces-"), _lines(tmp_path / "single", "traces-")
    assert len(expected) == EPISODES and {t["task_id"] for t in expected} == {f"task-{i}" for i in range(4)}
    assert merged == expected
    assert _lines(tmp_path / "merged", "turns-") == _lines(tmp_path / "single", "turns-")
