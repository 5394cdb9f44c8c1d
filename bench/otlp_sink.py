"""A loopback OTLP/HTTP receiver that acknowledges every export and keeps nothing: what the benchmarked
application's exporter talks to, so that export runs as users run it (real HTTP requests on 127.0.0.1) while
the receiver's own work stays out of the figures and is the same for every mode.

``python -m bench.otlp_sink`` prints its port, then serves until killed.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the exporter's session reuses its connection

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        # An empty ExportTraceServiceResponse: everything accepted.
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
