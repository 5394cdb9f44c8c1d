"""An export directory that ``datasets.load_dataset(DIR)`` reads with no code: data files plus a dataset card.

``orchestrace export ... --to DIR`` (an existing directory, or a path without a file extension) writes
``DIR/<config>/<name>.jsonl|parquet`` and ``DIR/README.md``, whose YAML header is what the Hugging Face Hub
and ``datasets`` read: ``configs`` (each config's files: ``turns/*.jsonl`` ...) and ``dataset_info`` with each
config's ``features``, the fixed schema of ``schema.py``. With the features declared, the ``json`` builder no
longer takes the column types from the first file it reads, so exports of runs with and without tool calls
load together. A file is named after the traces it holds (a digest of their ids): exporting the same traces
again replaces it, exporting other runs adds a file beside it. The card lists every config present in the
directory; ``turns`` (else the first) is the default that ``load_dataset(DIR)`` loads.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from .source import ExportError

CARD = "README.md"
DATA_EXTENSIONS = ("jsonl", "parquet")
#: The config the card marks ``default: true`` when present.
DEFAULT_CONFIG = "turns"

_DTYPES = {pa.string(): "string", pa.float64(): "float64", pa.int64(): "int64", pa.bool_(): "bool"}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./*-]*")
_YAML_WORDS = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n"})


def is_dataset_dir(to: Path) -> bool:
    """``--to`` names a dataset directory (not a file): it is one already, or it has no file extension."""
    return to.is_dir() or not to.suffix


def data_file(to: Path, config: str, file_format: str, trace_ids: Iterable[str]) -> Path:
    """Where an export of ``trace_ids`` goes in the dataset directory ``to``; refuses to mix file formats in
    one config (a config's files are read by one builder)."""
    other = next((ext for ext in DATA_EXTENSIONS if ext != file_format), file_format)
    if any((to / config).glob(f"*.{other}")):
        raise ExportError(f"{to / config} holds .{other} files: export there as {other}, or elsewhere")
    digest = hashlib.sha256("\n".join(sorted(trace_ids)).encode()).hexdigest()[:16]
    return to / config / f"{digest}.{file_format}"


def write_card(to: Path, schemas: Mapping[str, pa.Schema]) -> Path:
    """(Re)write ``to/README.md`` for every config of ``schemas`` that has files in ``to``."""
    present = {
        config: ext
        for config in schemas
        for ext in DATA_EXTENSIONS
        if any((to / config).glob(f"*.{ext}"))
    }
    default = DEFAULT_CONFIG if DEFAULT_CONFIG in present else next(iter(present), None)
    configs: list[dict[str, Any]] = []
    infos: list[dict[str, Any]] = []
    for config, ext in present.items():
        entry: dict[str, Any] = {"config_name": config}
        if config == default:
            entry["default"] = True
        entry["data_files"] = [{"split": "train", "path": f"{config}/*.{ext}"}]
        configs.append(entry)
        infos.append({"config_name": config, "features": hf_features(schemas[config])})
    header = "\n".join(_yaml({"configs": configs, "dataset_info": infos}))
    body = (
        f"# orchestrace export\n\nTraining data written by `orchestrace export` from orchestration traces: "
        f"configs {', '.join(f'`{c}`' for c in present)}, one file per export of a set of traces, in a "
        "schema that is the same for every run.\n\n```python\nfrom datasets import load_dataset\n\n"
        f'data = load_dataset("{to.name or to}", split="train")'
        + (f'  # or load_dataset(..., "{next(iter(present))}")' if len(present) > 1 else "")
        + "\n```\n"
    )
    card = to / CARD
    card.write_text(f"---\n{header}\n---\n{body}", encoding="utf-8")
    return card


def hf_features(schema: pa.Schema) -> list[dict[str, Any]]:
    """The ``features`` of a dataset card for an Arrow schema, as ``datasets.Features`` writes them."""
    return [{"name": f.name, **_feature(f.type)} for f in schema]


def _feature(kind: pa.DataType) -> dict[str, Any]:
    if pa.types.is_list(kind):
        item = _feature(kind.value_type)
        return {"list": item["dtype"] if "dtype" in item else item.get("struct", item)}
    if pa.types.is_struct(kind):
        return {"struct": [{"name": f.name, **_feature(f.type)} for f in kind]}
    if kind not in _DTYPES:
        raise TypeError(f"no dataset card type for {kind}")
    return {"dtype": _DTYPES[kind]}


def _yaml(value: Any, indent: str = "") -> list[str]:
    """Block-style YAML of nested dicts, lists and scalars (the card's header; no YAML library needed)."""
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                lines.append(f"{indent}{key}:")
                lines += _yaml(item, indent + "  " if isinstance(item, dict) else indent)
            else:
                lines.append(f"{indent}{key}: {_scalar(item)}")
        return lines
    for item in value:
        nested = isinstance(item, dict | list)
        inner = _yaml(item, indent + "  ") if nested else [f"{indent}  {_scalar(item)}"]
        lines.append(f"{indent}- {inner[0][len(indent) + 2 :]}")
        lines += inner[1:]
    return lines


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    plain = _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS
    return text if plain else json.dumps(text)
