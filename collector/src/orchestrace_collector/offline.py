"""``orchestrace convert``: dumps in, the same output directory ``collect`` writes out.

What was written before. The output directory remembers, as ``collect`` does, in ``OUT/wal``: the episodes
written (``written.idx``) and the spans of the newest ones (the assembler's retention budget, logged again
at the end: :meth:`Assembler.keep_retained`). The local engine replays that first, through the one
``output_log.OutputLog`` every writer of the directory uses, so a span of an episode an earlier convert wrote
(a straggler's dump converted later) makes its next revision, and a span already written (the same dump
again) is absorbed: one rule with the collector's (see ``assemble.py``).

Engines share one signature, ``engine(inputs, writer, *, converter=..., hook=None) -> ConvertResult``, and
are looked up by name in :data:`ENGINES`: ``local`` (:func:`convert_local`: one process, every span in
memory) and ``ray`` (``orchestrace_collector.ray_engine.convert_with_ray``, for dumps larger than one
machine's memory).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrace_collector.assemble import Assembler, Converter, EpisodeHook, default_converter
from orchestrace_collector.convert.gcpause import gc_paused
from orchestrace_collector.decode import PayloadError, decode_file
from orchestrace_collector.output import TraceDirWriter
from orchestrace_collector.output_log import OutputLog
from orchestrace_collector.spans import Span


class ConvertResult(Protocol):
    @property
    def files(self) -> int: ...
    @property
    def spans(self) -> int: ...
    @property
    def written(self) -> int: ...
    @property
    def failed(self) -> int: ...  # episodes the converter could not convert (logged)
    @property
    def bad_files(self) -> tuple[str, ...]: ...  # "path: reason" for each input that could not be read
    @property
    def duplicates(self) -> int: ...  # spans already written to the output (absorbed)


@dataclass(frozen=True)
class LocalConvertResult:
    files: int
    spans: int
    written: int
    failed: int
    bad_files: tuple[str, ...]
    duplicates: int = 0


Engine = Callable[..., ConvertResult]

#: ``--engine`` name -> ``module:function``.
ENGINES: dict[str, str] = {
    "local": "orchestrace_collector.offline:convert_local",
    "ray": "orchestrace_collector.ray_engine:convert_with_ray",
}


def load_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    module_name, _, attr = ENGINES[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"engine {name!r} is not available: {exc}") from None
    engine: Engine = getattr(module, attr)
    return engine


def input_files(inputs: Sequence[Path]) -> list[Path]:
    """Each file as given, and the files of each directory (sorted, hidden files skipped)."""
    files: list[Path] = []
    for path in inputs:
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith("."))
        else:
            files.append(path)
    return files


def convert_local(
    inputs: Sequence[Path],
    writer: TraceDirWriter,
    *,
    converter: Converter = default_converter,
    hook: EpisodeHook | None = None,
) -> LocalConvertResult:
    bad: list[str] = []
    spans: list[Span] = []
    files = input_files(inputs)
    before = writer.written
    with OutputLog(
        writer.out_dir, lambda wal: Assembler(writer, converter=converter, hook=hook, wal=wal)
    ) as output:
        assembler = output.assembler
        output.replay()
        replayed = assembler.duplicates
        # Decoding a dump allocates a few objects per span that all live until the end: without a pause the
        # cyclic collector's full passes over them cost a third of the run (see convert/gcpause.py).
        with gc_paused():
            for path in files:
                try:
                    spans.extend(decode_file(path))
                except PayloadError as exc:
                    bad.append(f"{path}: {exc}")
            assembler.add(spans)
    return LocalConvertResult(
        files=len(files),
        spans=len(spans),
        written=writer.written - before,
        failed=assembler.failed,
        bad_files=tuple(bad),
        duplicates=assembler.duplicates - replayed,
    )
