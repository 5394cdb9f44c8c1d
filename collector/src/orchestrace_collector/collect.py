"""``orchestrace collect``: wires the write-ahead log, the receivers, assembly, forwarding and the output dir.

Start-up order: replay the WAL left by a previous run (its unfinished episodes are reassembled and complete as
usual), start the assembly thread, the gRPC server, then the HTTP server, and print one ``ready`` line.
SIGTERM / SIGINT stop the receivers first, then every queued batch is assembled and every open episode
written, then the log and the files are closed.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from orchestrace_collector.assemble import Assembler, Converter, EpisodeHook, default_converter
from orchestrace_collector.forward import Forwarder
from orchestrace_collector.ingest import Ingest
from orchestrace_collector.output import WAL_DIR, TraceDirWriter
from orchestrace_collector.receiver_grpc import start_grpc_server
from orchestrace_collector.receiver_http import create_app
from orchestrace_collector.wal import FsyncPolicy, WriteAheadLog

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
#: The assembly thread is CPU-bound; a request needs the GIL a few times before it is acknowledged, and with
#: CPython's default 5 ms switch interval each of those waits for it. 0.5 ms doubled the acknowledged rate
#: under load (bench/, section 3) at no measurable cost in total CPU or time to written traces.
SWITCH_INTERVAL_S = 0.0005


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
    rotate_bytes: int = 128 << 20
    hook: EpisodeHook | None = None
    converter: Converter = default_converter


def run_collector(options: CollectorOptions) -> None:
    # A signal before uvicorn serves must still end in a clean flush; and uvicorn re-raises the signal that
    # stopped it once it has restored these handlers, which absorb it so the flush below runs.
    stop_requested = threading.Event()
    previous_switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop_requested.set())
    writer = TraceDirWriter(options.out, rotate_bytes=options.rotate_bytes)
    wal = WriteAheadLog(options.out / WAL_DIR, fsync=options.fsync, segment_bytes=options.wal_segment_bytes)
    assembler = Assembler(
        writer,
        quiet_period_s=options.quiet_period_s,
        idle_timeout_s=options.idle_timeout_s,
        converter=options.converter,
        hook=options.hook,
        wal=wal,
    )
    forwarder = Forwarder(options.forward) if options.forward else None
    ingest = Ingest(wal, assembler, forwarder=forwarder, max_queued_batches=options.max_queued_batches)
    replayed = ingest.replay()
    if replayed:
        print(
            f"orchestrace: replayed {replayed} batches from the write-ahead log, "
            f"{assembler.open_episodes} episodes open",
            file=sys.stderr,
            flush=True,
        )
    assembler.tick()
    ingest.start()
    grpc_server = None
    try:
        grpc_server, grpc_port = start_grpc_server(
            ingest, HOST, options.grpc_port, max_message_bytes=options.max_body_bytes
        )
        config = uvicorn.Config(
            create_app(ingest, max_body_bytes=options.max_body_bytes),
            host=HOST,
            port=options.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        server = uvicorn.Server(config)
        print(
            f"orchestrace collector ready: http://{HOST}:{options.port}/v1/traces grpc={HOST}:{grpc_port} "
            f"out={options.out}",
            file=sys.stderr,
            flush=True,
        )
        if not stop_requested.is_set():
            server.run()
    finally:
        if grpc_server is not None:
            grpc_server.stop(grace=2.0).wait()
        ingest.stop()
        wal.close()
        writer.close()
        if forwarder is not None:
            forwarder.close()
        sys.setswitchinterval(previous_switch_interval)
        print(
            f"orchestrace collector stopped: {ingest.accepted_spans} spans accepted, {ingest.rejected_spans} "
            f"rejected, {writer.written} traces written",
            file=sys.stderr,
            flush=True,
        )
