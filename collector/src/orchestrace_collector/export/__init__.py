"""``orchestrace export``: training sets a trainer takes as they are, from one or more output directories.

One row per unit (a turn, a TRL sample, an agent trajectory, an orchestrator decision) from the latest
revision of each trace, in a fixed schema (``schema.py``) so that files of any runs load together.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .decisions import decision_rows
from .filters import Filters
from .schema import DECISIONS, TOKENS, TRL, TRL_DPO, TRL_KTO, TURNS, features, write_rows
from .source import Episode, ExportError, load_episodes
from .tokens import load_tokenizer, template_messages, token_rows
from .trl import TRL_KINDS, dpo_rows, kto_rows, sft_rows
from .turns import turn_rows

FORMATS = ("jsonl", "parquet", "trl", "tokens", "decisions")

__all__ = [
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
    "export",
    "features",
    "load_episodes",
    "template_messages",
]


def export(
    paths: Sequence[Path],
    fmt: str,
    to: Path,
    *,
    filters: Filters | None = None,
    trl_kind: str = "sft",
    tokenizer: Path | None = None,
    outcome: str | None = None,
) -> int:
    """Write ``fmt`` rows of the traces under ``paths`` to ``to``; returns the number of rows. The file is
    Parquet for ``parquet``, and for the other formats when ``to`` ends with ``.parquet``; else JSON lines.
    ``outcome``: the reward channel that is each episode's outcome (default: the sum of its team-unit
    channels, see ``orchestrace_collector.outcome``)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if trl_kind not in TRL_KINDS:
        raise ExportError(f"unknown TRL dataset {trl_kind!r}; use one of {', '.join(TRL_KINDS)}")
    if trl_kind != "sft" and fmt != "trl":
        raise ExportError("DPO pairs and KTO labels are --format trl options")
    if tokenizer is not None and fmt != "tokens":
        raise ExportError("--tokenizer is a --format tokens option")
    filters = filters or Filters()
    episodes = load_episodes(paths, outcome)
    file_format = "parquet" if fmt == "parquet" or to.suffix == ".parquet" else "jsonl"
    if fmt == "decisions":
        return write_rows(filters.apply(decision_rows(episodes)), DECISIONS, to, file_format)
    turns = list(turn_rows(episodes))
    if fmt in ("jsonl", "parquet"):
        return write_rows(filters.apply(turns), TURNS, to, file_format)
    if fmt == "tokens":
        rows = token_rows(turns, load_tokenizer(tokenizer) if tokenizer else None)
        return write_rows(filters.apply(rows), TOKENS, to, file_format)
    kept = list(filters.apply(turns))
    if trl_kind == "dpo":
        return write_rows(dpo_rows(kept), TRL_DPO, to, file_format)
    if trl_kind == "kto":
        return write_rows(kto_rows(kept), TRL_KTO, to, file_format)
    return write_rows(sft_rows(kept), TRL, to, file_format)
