"""orchestrace-collector: OTLP in, replayable multi-agent orchestration traces and per-turn samples out.

Python entry point: :func:`convert_spans`. :func:`compiled` says whether the mypyc-compiled conversion modules
are in use (``_compiled.py``). Command line: ``orchestrace`` (``cli.py``). In-process output:
:class:`~orchestrace_collector.inprocess.TraceDirExporter`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

# First: installs the finder of the compiled conversion modules before any of them can be imported.
from orchestrace_collector._compiled import compiled
from orchestrace_collector.model import Trace, Turn
from orchestrace_collector.spans import Span

if TYPE_CHECKING:
    from orchestrace_collector.assemble import ConvertedEpisode

__all__ = ["Span", "Trace", "Turn", "compiled", "convert_spans"]


class _TraceList:
    def __init__(self) -> None:
        self.traces: list[Trace] = []

    def write_episode(self, episode: ConvertedEpisode, *, revision: int = 0) -> None:
        self.traces.append(episode.trace)

    def sync(self) -> None:
        pass  # in memory


def convert_spans(spans: Iterable[Span], *, credit: str = "causal") -> list[Trace]:
    """Group spans into episodes (as ``orchestrace collect`` does) and convert each to a Trace, in memory,
    with the ``credit`` strategy (``uniform`` or ``causal``)."""
    # Imported here: keeps ``import orchestrace_collector`` light.
    from orchestrace_collector.assemble import Assembler, EpisodeConverter

    sink = _TraceList()
    assembler = Assembler(sink, converter=EpisodeConverter(credit))
    assembler.add(spans)
    assembler.flush()
    return sink.traces
