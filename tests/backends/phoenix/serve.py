"""Start Phoenix for the backend test, with its OTLP/gRPC listener off.

Phoenix binds its gRPC receiver to every interface (``[::]``) and has no setting for its host; the test
sends OTLP over HTTP, which Phoenix serves on ``PHOENIX_HOST`` (loopback), so the gRPC server is disabled
rather than exposed. Everything else is Phoenix's own ``phoenix serve``.
"""

from __future__ import annotations

import sys
from typing import Any

from phoenix.server import grpc_server
from phoenix.server.main import main

_init = grpc_server.GrpcServer.__init__


def _disabled_init(self: grpc_server.GrpcServer, *args: Any, **kwargs: Any) -> None:
    kwargs["disabled"] = True
    _init(self, *args, **kwargs)


grpc_server.GrpcServer.__init__ = _disabled_init  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.argv = ["phoenix", "serve"]
    main()
