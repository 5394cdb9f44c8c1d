"""A small JSON-lines file of ``{"key": ..., ...}`` entries kept next to the WAL (``written.idx``,
``senders.idx``): appended one line at a time, read back at start (the last line of a key wins), bounded.

Rewritten with only the entries still remembered whenever it holds twice ``limit`` lines (at start and while
running), so it stays under ``2 * limit`` lines. Not fsync-ed: what it records is also in the WAL until that
segment is retired, long after the page cache reached the disk. A line cut by a crash is skipped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Entry = dict[str, Any]


class KeyedIndex:
    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.lines = 0  # in the file now
        self._fd = -1
        self._failing = False

    def load(self) -> OrderedDict[str, Entry]:
        """The last entry of each key, oldest key first, at most ``limit`` of them."""
        entries: OrderedDict[str, Entry] = OrderedDict()
        lines = 0
        with contextlib.suppress(FileNotFoundError), self.path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                lines += 1
                try:
                    entry = json.loads(line)
                    key = str(entry["key"])
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a crash
                entries.pop(key, None)
                entries[key] = entry
        while len(entries) > self.limit:
            entries.popitem(last=False)
        self.lines = lines
        if lines > len(entries):
            self._rewrite(entries.values())
        return entries

    def append(self, entry: Entry, remembered: Callable[[], Iterable[Entry]]) -> None:
        """Append one entry; ``remembered()``: every entry still kept, for the rewrite when the file is full
        (called only then). A function, not a generator: mypyc compiles a generator expression into a list,
        so a compiled caller would build every entry on each append (quadratic in the entries)."""
        try:
            if self.lines >= 2 * self.limit:
                self._rewrite(remembered())
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self._fd, _line(entry).encode())
            self.lines += 1
            self._failing = False
        except OSError as exc:
            # What it records matters only after a restart whose WAL no longer holds it; logged once.
            if not self._failing:
                log.warning("orchestrace: %s not updated: %s", self.path, exc)
            self._failing = True

    def _rewrite(self, entries: Iterable[Entry]) -> None:
        """Replace the file with ``entries`` (atomically: a crash leaves one or the other)."""
        tmp = self.path.with_suffix(".tmp")
        text = "".join(map(_line, entries))
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(self.path)
        self.lines = text.count("\n")
        if self._fd >= 0:  # the next append opens the new file
            os.close(self._fd)
            self._fd = -1


def _line(entry: Entry) -> str:
    return json.dumps(entry, separators=(",", ":")) + "\n"
