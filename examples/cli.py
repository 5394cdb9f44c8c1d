"""The command line every example shares: where its traces go."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import orchestrace as ot


def parse_args(doc: str | None, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the tracing options of an example whose module docstring is ``doc``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--exporter",
        default="otlp",
        help='where spans go: otlp (OTLP/HTTP, the default), otlp-grpc, jaeger, console, "file:PATH", none',
    )
    parser.add_argument("--endpoint", help="OTLP endpoint, e.g. http://127.0.0.1:4318 (default: OTEL_*)")
    parser.add_argument("--trace-dir", help="also write orchestration traces to this directory, in-process")
    # None when absent, so OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT still decides.
    parser.add_argument(
        "--capture-content", action="store_true", default=None, help="record prompts and completions"
    )
    return parser.parse_args(argv)


def configure_tracing(service_name: str, doc: str | None, argv: Sequence[str] | None) -> ot.TracingHandle:
    """``ot.configure`` as an app would call it, with the example's command-line options."""
    args = parse_args(doc, argv)
    return ot.configure(service_name, exporter=args.exporter, endpoint=args.endpoint,
                        trace_dir=args.trace_dir, capture_content=args.capture_content)
