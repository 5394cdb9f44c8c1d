"""Serving the view: bind first (a busy port is an error before the ready line), then uvicorn with the
collector's connection guards."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from orchestrace_collector.collect import LOOPBACK_NAMES, is_loopback
from orchestrace_collector.http_server import HttpLimits, bind, make_server
from orchestrace_collector.view.api import create_app
from orchestrace_collector.view.store import OutputStore


class ExposureError(ValueError):
    """Serving a non-loopback address without a token."""


def serve(paths: Sequence[Path], *, host: str, port: int, token: str | None) -> None:
    if not is_loopback(host) and token is None:
        raise ExposureError(
            f"--host {host} is not loopback: anyone who reaches it could read the prompts and completions. "
            "Give a token (--token-file or ORCHESTRACE_TOKEN)"
        )
    store = OutputStore(paths)
    app = create_app(store, token=token, allowed_hosts=LOOPBACK_NAMES if is_loopback(host) else None)
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    suffix = "?token=<token>" if token else ""
    print(f"orchestrace view: http://{shown}:{bound_port}/{suffix} ({store.status()['episodes']} episodes)",
          flush=True)
    for directory in store.status()["directories"]:
        if directory["error"]:
            print(f"orchestrace view: {directory['error']}", file=sys.stderr, flush=True)
    make_server(app, HttpLimits()).run(sockets=[sock])
