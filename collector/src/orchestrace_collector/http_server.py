"""The OTLP/HTTP server: uvicorn with the guards a shared service needs, on a socket bound up front.

uvicorn closes a keep-alive connection that stays idle (``timeout_keep_alive``) but gives no limit to a client
that connects and sends nothing, or half of its headers, or that opens thousands of connections: at the
process's descriptor limit that stops every other client. :class:`_Guarded` adds a header timeout (a
connection whose request headers are not complete within ``header_timeout_s`` of connecting, or of its last
response, is closed) and a connection limit (a connection beyond ``max_connections`` is closed at once). The
body timeout is the app's (``receiver_http``: 408); the connection is then dropped at once, TLS or not.

HTTP/1.1 is parsed by ``httptools`` (C) and, where it exists (not on Windows), the event loop is ``uvloop``
(uvicorn picks it): against h11 and asyncio's own loop they halve the event loop's CPU per request, a few
percent of the collector's CPU per span (bench/, section 3).
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

GRACEFUL_SHUTDOWN_S = 3


@dataclass(frozen=True)
class HttpLimits:
    header_timeout_s: float = 10.0
    keepalive_timeout_s: float = 30.0
    max_connections: int = 1024


def bind(host: str, port: int) -> socket.socket:
    """Bind the listening socket now, so that a busy port is an error before ``ready`` is printed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT only; never SO_REUSEPORT
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot bind HTTP port {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def make_server(
    app: Starlette, limits: HttpLimits, *, tls_cert: Path | None = None, tls_key: Path | None = None
) -> uvicorn.Server:
    protocol = type(
        "GuardedHttp",
        (_Guarded,),
        {"header_timeout_s": limits.header_timeout_s, "max_connections": limits.max_connections},
    )
    config = uvicorn.Config(
        app,
        http=protocol,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=max(1, round(limits.keepalive_timeout_s)),
        # Requests in flight get this long at shutdown; a TLS peer that never answers the close (asyncio
        # waits 30 s for it) must not hold the shutdown.
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
    )
    return uvicorn.Server(config)


class _Guarded(HttpToolsProtocol):
    header_timeout_s = 10.0
    max_connections = 1024
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.close()
            return
        self._arm()

    def on_response_complete(self) -> None:
        if self.transport.is_closing() and self.cycle.more_body:
            # Answered before the request's body arrived (its body timeout): over TLS a close waits up to
            # 30 s for the peer's close_notify, which a stalled client never sends, so drop it at once.
            self.transport.abort()
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._check_headers, self.cycle)

    def _check_headers(self, cycle_then: object) -> None:
        # No request begun since the timer was armed (a new cycle starts once its headers are complete).
        if self.cycle is cycle_then and not self.transport.is_closing():
            self.transport.abort()  # nothing to say to it: no graceful (TLS) close to wait for
