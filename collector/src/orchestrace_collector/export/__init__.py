"""``orchestrace export``: training sets a trainer takes as they are, from one or more output directories.

One row per unit (a turn, a TRL sample, an agent trajectory, an orchestrator decision) from the latest
revision of each trace, in a fixed schema (``schema.py``) so that files of any runs load together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .card import data_file, is_dataset_dir, write_card
from .decisions import decision_rows
from .filters import Filters
from .schema import DECISIONS, TOKENS, TRL, TRL_DPO, TRL_KTO, TURNS, features, schema_rows, write_rows
from .source import Episode, ExportError, episode_of, load_episodes
from .tokens import load_tokenizer, template_messages, token_rows
from .trl import TRL_KINDS, dpo_rows, kto_rows, sft_rows
from .turns import turn_rows

FORMATS = ("jsonl", "parquet", "trl", "tokens", "decisions")

__all__ = [
    "CONFIGS",
    "DECISIONS",
    "FORMATS",
    "TOKENS",
    "TRL",
    "TRL_DPO",
    "TRL_KINDS",
    "TRL_KTO",
    "TURNS",
    "Episode",
    "ExportError",
    "Filters",
    "episode_of",
    "export",
    "features",
    "load_episodes",
    "rows",
    "template_messages",
]


#: The dataset-card config of each schema (``card.py``).
CONFIGS = {"turns": TURNS, "trl": TRL, "trl_dpo": TRL_DPO, "trl_kto": TRL_KTO, "tokens": TOKENS,
           "decisions": DECISIONS}


def export(
    paths: Sequence[Path],
    fmt: str,
    to: Path,
    *,
    filters: Filters | None = None,
    trl_kind: str = "sft",
    tokenizer: Path | None = None,
    outcome: str | None = None,
    strict: bool = False,
    skipped: list[str] | None = None,
    include_fixed: bool = False,
) -> int:
    """Write ``fmt`` rows of the traces under ``paths`` to ``to``; returns the number of rows. The file is
    Parquet for ``parquet``, and for the other formats when ``to`` ends with ``.parquet``; else JSON lines.
    ``outcome``: the reward channel that is each episode's outcome (default: the sum of its team-unit
    channels, see ``orchestrace_collector.outcome``). ``tokens``: a trajectory that cannot be built is left
    out and its reason appended to ``skipped``, or, ``strict``, an ExportError.
    ``to`` an existing directory or a path without extension: a dataset directory (``card.py``) holding the
    file and a dataset card, Parquet for ``parquet`` and JSON lines for the others. ``include_fixed``:
    ``decisions`` rows also of the routes a graph's wiring took by itself. Nothing to export (no
    traces, or no row left) is an ``ExportError`` and writes nothing."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if trl_kind not in TRL_KINDS:
        raise ExportError(f"unknown TRL dataset {trl_kind!r}; use one of {', '.join(TRL_KINDS)}")
    if trl_kind != "sft" and fmt != "trl":
        raise ExportError("DPO pairs and KTO labels are --format trl options")
    if tokenizer is not None and fmt != "tokens":
        raise ExportError("--tokenizer is a --format tokens option")
    if include_fixed and fmt != "decisions":
        raise ExportError("--include-fixed is a --format decisions option")
    episodes = load_episodes(paths, outcome)
    if not episodes:
        raise ExportError(f"no traces in {', '.join(map(str, paths))}")
    skipped = [] if skipped is None else skipped
    config, rows = _rows(episodes, fmt, filters or Filters(), trl_kind, tokenizer, strict, skipped,
                         include_fixed)
    rows = list(rows)
    if not rows and skipped:
        raise ExportError(f"no {fmt} rows: {len(skipped)} trajectories could not be built, e.g. {skipped[0]}")
    if not rows:
        raise ExportError(f"no {fmt} rows to write from {len(episodes)} traces (the filters or the format, "
                          "e.g. trl without captured content, kept none)")
    if is_dataset_dir(to):
        file_format = "parquet" if fmt == "parquet" else "jsonl"
        written = write_rows(rows, CONFIGS[config], data_file(to, config, file_format,
                                                              (e.trace_id for e in episodes)), file_format)
        write_card(to, CONFIGS)
        return written
    file_format = "parquet" if fmt == "parquet" or to.suffix == ".parquet" else "jsonl"
    return write_rows(rows, CONFIGS[config], to, file_format)


def rows(episodes: list[Episode], fmt: str, *, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The ``fmt`` rows of ``episodes`` with no filter, as ``export`` writes them (the live feed's rows);
    ``skipped``: why trajectories of ``tokens`` could not be built."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    config, found = _rows(episodes, fmt, Filters(), "sft", None, False, [] if skipped is None else skipped,
                          False)
    return schema_rows(found, CONFIGS[config])


def _rows(episodes: list[Episode], fmt: str, filters: Filters, trl_kind: str, tokenizer: Path | None,
          strict: bool, skipped: list[str], include_fixed: bool) -> tuple[str, Iterable[Mapping[str, Any]]]:
    """The config (schema) and rows of one export format."""
    if fmt == "decisions":
        return "decisions", filters.apply(decision_rows(episodes, include_fixed=include_fixed))
    turns = list(turn_rows(episodes))
    if fmt in ("jsonl", "parquet"):
        return "turns", filters.apply(turns)
    if fmt == "tokens":
        # Trajectories the filters leave out are never built (a flag drops the row, not some of its turns).
        selected = replace(filters, drop_flagged=False).apply(turns)
        tok = load_tokenizer(tokenizer) if tokenizer else None
        return "tokens", filters.apply(token_rows(selected, tok, strict=strict, skipped=skipped))
    kept = list(filters.apply(turns))
    if trl_kind == "dpo":
        return "trl_dpo", dpo_rows(kept)
    if trl_kind == "kto":
        return "trl_kto", kto_rows(kept)
    return "trl", sft_rows(kept)
