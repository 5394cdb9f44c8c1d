"""``orchestrace collect``: wires the write-ahead log, the receivers, assembly, forwarding and the output dir.

Start-up order: bind both ports (a busy port is an error here, exit code 1, before anything is created),
replay the WAL left by a previous run (its unfinished episodes are reassembled and complete as usual), start
the assembly thread, print one ``ready`` line, serve. SIGTERM / SIGINT stop the receivers first (requests in
flight get up to ``http_server.GRACEFUL_SHUTDOWN_S``), then, all within ``shutdown_timeout_s``: queued
batches are assembled and open episodes written, the log and the files are closed, and the forward queue is
sent; what is not done by then stays in the WAL (and the forward queue on disk) for the next start.

Exposure: the receivers bind ``host`` (default loopback). On loopback, the ``Host`` header must name a
loopback address (a web page cannot reach the port by DNS rebinding); on any other address a bearer token is
required unless ``allow_unauthenticated``. ``tls_cert`` / ``tls_key`` serve both receivers over TLS.

Many machines: with ``spool_only`` the collector only logs what it acknowledges; its WAL segments are the
spool, and ``orchestrace convert --engine ray`` over the spools of every collector assembles the episodes
whose spans arrived at different collectors.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from orchestrace_collector.assemble import Assembler, Converter, EpisodeHook, default_converter
from orchestrace_collector.convert.gcpause import gc_tuned_for_serving
from orchestrace_collector.feed_index import FeedIndex
from orchestrace_collector.forward import Forwarder
from orchestrace_collector.http_server import HttpLimits, bind, make_server
from orchestrace_collector.ingest import Ingest
from orchestrace_collector.malloc import release_large_blocks
from orchestrace_collector.output import WAL_DIR, TraceDirWriter
from orchestrace_collector.output_limit import DEFAULT_MAX_BYTES
from orchestrace_collector.output_log import OutputLog
from orchestrace_collector.receiver_grpc import bind_grpc_server, serve_grpc
from orchestrace_collector.receiver_http import create_app
from orchestrace_collector.senders import ANY_SENDER, Credentials, Owners
from orchestrace_collector.wal import FsyncPolicy

if TYPE_CHECKING:
    import socket

    import grpc

log = logging.getLogger(__name__)
T = TypeVar("T")

HOST = "127.0.0.1"
FORWARD_DIR = "forward"  # the forward queue on disk
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: The assembly thread is CPU-bound; a request needs the GIL a few times before it is acknowledged, and with
#: CPython's default 5 ms switch interval each of those waits for it. 0.5 ms doubled the acknowledged rate
#: under load (bench/, section 3) at no measurable cost in total CPU or time to written traces.
SWITCH_INTERVAL_S = 0.0005
GRPC_GRACE_S = 2.0  # for gRPC calls in flight at shutdown


@dataclass(frozen=True)
class CollectorOptions:
    out: Path
    port: int = 4318
    grpc_port: int = 4317
    forward: str | None = None
    quiet_period_s: float = 2.0
    idle_timeout_s: float = 300.0
    max_body_bytes: int = 16 << 20
    max_queued_batches: int = 512
    fsync: FsyncPolicy = "batch"
    wal_segment_bytes: int = 64 << 20
    wal_max_bytes: int = 1 << 30
    rotate_bytes: int = 128 << 20
    max_trace_bytes: int = DEFAULT_MAX_BYTES
    hook: EpisodeHook | None = None
    host: str = HOST
    token: str | None = None
    #: Named senders (``--token-file`` lines ``name:token``), instead of one ``token``; see ``senders.py``.
    senders: dict[str, str] | None = None
    #: Senders that may add to any episode (``--annotator``).
    annotators: tuple[str, ...] = ()
    allow_unauthenticated: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    memory_limit_bytes: int = 1 << 30
    max_open_episodes: int = 10_000
    shutdown_timeout_s: float = 20.0
    body_timeout_s: float = 30.0
    forward_queue_bytes: int = 256 << 20
    #: Sent with every forwarded batch (``Authorization`` for a target that requires a token).
    forward_headers: dict[str, str] = field(default_factory=dict)
    forward_ca: Path | None = None  # verifies an https forward target (else the system's CAs)
    spool_only: bool = False
    limits: HttpLimits = field(default_factory=HttpLimits)
    converter: Converter = default_converter

    @property
    def credentials(self) -> Credentials | None:
        """The tokens senders present: the named ones, else the one token, else none."""
        if self.senders:
            return Credentials(self.senders)
        return Credentials({ANY_SENDER: self.token}) if self.token is not None else None


class ExposureError(ValueError):
    """The options would expose the collector without authentication."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(options: CollectorOptions) -> None:
    if (options.tls_cert is None) != (options.tls_key is None):
        raise ExposureError("give both --tls-cert and --tls-key")
    if not is_loopback(options.host) and options.credentials is None and not options.allow_unauthenticated:
        raise ExposureError(
            f"--host {options.host} is not loopback: anyone who reaches it could write training data. Give a "
            "token (--token-file or ORCHESTRACE_TOKEN) or, on a network you trust, --insecure-no-auth"
        )


def run_collector(options: CollectorOptions) -> None:
    check_exposure(options)
    release_large_blocks()
    if options.allow_unauthenticated and not is_loopback(options.host) and options.credentials is None:
        log.warning(
            "orchestrace: SERVING %s WITHOUT AUTHENTICATION (--insecure-no-auth): anyone who can reach "
            "this address can write training data",
            options.host,
        )
    tls = None
    if options.tls_cert is not None and options.tls_key is not None:
        tls = (options.tls_cert.read_bytes(), options.tls_key.read_bytes())
    # The collector's lifetime is one stack, left on every way out. Until it serves, each part pushes its
    # closing on `opened` as it is opened, so a failure (a taken gRPC port, OUT held: LogInUse, an unreadable
    # log) lets go of what was opened; once it serves, _shut_down takes all of it over. The process settings
    # serving changes are put back last.
    with ExitStack() as stack:
        opened = stack.enter_context(ExitStack())
        # Both ports first: a taken one is an error before the output directory or the log exist.
        http_socket = bind(options.host, options.port)
        opened.callback(_step, "HTTP port", http_socket.close)
        grpc_server, grpc_port = bind_grpc_server(
            options.host,
            options.grpc_port,
            max_message_bytes=options.max_body_bytes,
            memory_limit_bytes=options.memory_limit_bytes,
            tls=tls,
            max_connection_idle_s=options.limits.keepalive_timeout_s,
        )
        opened.callback(_step, "gRPC port", partial(_stop_grpc, grpc_server, None))
        stop_requested = stack.enter_context(_serving_settings())
        writer = TraceDirWriter(
            options.out, rotate_bytes=options.rotate_bytes, max_trace_bytes=options.max_trace_bytes
        )
        opened.callback(_step, "output files", writer.close)
        output = OutputLog(
            options.out,
            lambda wal: Assembler(
                writer,
                quiet_period_s=options.quiet_period_s,
                idle_timeout_s=options.idle_timeout_s,
                converter=options.converter,
                hook=options.hook,
                wal=wal,
                max_open_episodes=options.max_open_episodes,
            ),
            fsync=options.fsync,
            # A cap below a few segments could never be met (only whole segments are deleted): smaller ones.
            segment_bytes=min(options.wal_segment_bytes, max(options.wal_max_bytes // 4, 1 << 16))
            if options.wal_max_bytes and not options.spool_only
            else options.wal_segment_bytes,
            max_bytes=0 if options.spool_only else options.wal_max_bytes,
        )
        opened.callback(_step, "write-ahead log", output.close)
        forwarder = None
        if options.forward:
            forwarder = Forwarder(
                options.forward,
                max_queued_bytes=options.forward_queue_bytes,
                state_dir=options.out / FORWARD_DIR,
                headers=options.forward_headers,
                verify=(
                    ssl.create_default_context(cafile=str(options.forward_ca)) if options.forward_ca else True
                ),
            )
            opened.callback(_step, "forwarding", partial(forwarder.close, 0.0))
        ingest = Ingest(
            output.wal,
            output.assembler,
            forwarder=forwarder,
            max_queued_batches=options.max_queued_batches,
            memory_limit_bytes=options.memory_limit_bytes,
            spool_only=options.spool_only,
            owners=Owners(options.out / WAL_DIR, options.annotators) if options.senders else None,
        )
        stack.enter_context(gc_tuned_for_serving())
        replayed = ingest.replay()
        if replayed:
            print(
                f"orchestrace: replayed {replayed} batches from the write-ahead log, "
                f"{output.assembler.open_episodes} episodes open",
                file=sys.stderr,
                flush=True,
            )
        output.assembler.tick()
        ingest.start()
        opened.pop_all()  # it serves: from here _shut_down closes all of it, in its own order
        stack.callback(_shut_down, options, http_socket, grpc_server, ingest, output, writer, forwarder)
        allowed_hosts = LOOPBACK_NAMES if is_loopback(options.host) else None
        serve_grpc(grpc_server, ingest, options.credentials, allowed_hosts)
        app = create_app(
            ingest,
            max_body_bytes=options.max_body_bytes,
            credentials=options.credentials,
            allowed_hosts=allowed_hosts,
            body_timeout_s=options.body_timeout_s,
            feed=FeedIndex(options.out),
        )
        server = make_server(app, options.limits, tls_cert=options.tls_cert, tls_key=options.tls_key)
        scheme, http_port = "https" if options.tls_cert else "http", http_socket.getsockname()[1]
        print(
            f"orchestrace collector ready: {scheme}://{options.host}:{http_port}/v1/traces "
            f"grpc={options.host}:{grpc_port} out={options.out}",
            file=sys.stderr,
            flush=True,
        )
        if not stop_requested.is_set():
            server.run(sockets=[http_socket])


@contextmanager
def _serving_settings() -> Iterator[threading.Event]:
    """The switch interval and SIGTERM's and SIGINT's handlers while serving, put back on every way out (an
    in-process caller, a test, keeps running). Yields the event the handlers set."""
    switch_interval = sys.getswitchinterval()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    # A signal before uvicorn serves must still end in a clean flush; and uvicorn re-raises the signal that
    # stopped it once it has restored these handlers, which absorb it so the flush runs.
    stop_requested = threading.Event()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        for sig in handlers:
            signal.signal(sig, lambda signum, frame: stop_requested.set())
        yield stop_requested
    finally:
        sys.setswitchinterval(switch_interval)
        for sig, handler in handlers.items():
            if handler is not None:  # None: not set from Python, nothing to put back
                signal.signal(sig, handler)


def _shut_down(
    options: CollectorOptions,
    http_socket: socket.socket,
    grpc_server: grpc.Server,
    ingest: Ingest,
    output: OutputLog,
    writer: TraceDirWriter,
    forwarder: Forwarder | None,
) -> None:
    """A serving collector's stop, in the module docstring's order: the receivers, assembly, the WAL, the
    output files, forwarding. Each step on its own (a failing one, storage still broken, must not skip the
    others); all share one deadline. The HTTP socket is closed here too: uvicorn closes it once it served,
    not when a signal came first or its server could not be made (a TLS key it cannot load, say)."""
    deadline = time.monotonic() + options.shutdown_timeout_s
    _step("HTTP port", http_socket.close)
    _step("gRPC port", partial(_stop_grpc, grpc_server, min(GRPC_GRACE_S, options.shutdown_timeout_s)))
    left = _step("assembly", lambda: ingest.stop(_until(deadline))) or 0
    _step("write-ahead log", output.close)
    _step("output files", writer.close)
    if forwarder is not None:
        _step("forwarding", lambda: forwarder.close(_until(deadline)))
    print(
        f"orchestrace collector stopped: {ingest.accepted_spans} spans accepted, {ingest.rejected_spans} "
        f"rejected, {writer.written} traces written"
        + (
            f", {ingest.owners.refused_spans} spans refused as another sender's episode"
            if ingest.owners is not None and ingest.owners.refused_spans
            else ""
        )
        + (
            f", {ingest.too_large_requests} requests refused as too large (413)"
            if ingest.too_large_requests
            else ""
        )
        + (f", {left} episodes left in the write-ahead log for the next start" if left else "")
        + (
            f", {ingest.batches_left} batches left in the write-ahead log for the next start"
            if ingest.batches_left
            else ""
        )
        + (
            f"; forwarded {forwarder.sent}, dropped {forwarder.dropped}, rejected {forwarder.rejected}"
            if forwarder is not None
            else ""
        ),
        file=sys.stderr,
        flush=True,
    )


def _until(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _stop_grpc(server: grpc.Server, grace: float | None) -> None:
    """Stop a gRPC server and let go of its port, whether it served or not: grpc keeps a bound port until a
    started server stops (stopping, even deleting, one never started keeps it bound), so one that never
    started is started first (with no service, or before its requests are taken)."""
    with contextlib.suppress(ValueError):  # "Cannot start already-started server!": it serves
        server.start()
    server.stop(grace).wait()


def _step(what: str, action: Callable[[], T]) -> T | None:
    try:
        return action()
    except Exception:
        log.exception("orchestrace: shutdown: %s failed", what)
        return None
