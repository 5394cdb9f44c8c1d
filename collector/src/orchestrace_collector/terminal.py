"""The ``orchestrace`` command's consoles: rich on a terminal, whole lines everywhere else.

Rich wraps its output at 80 columns (or at the width of whatever terminal stdin is) when the output is not
a terminal, so a log or a script reading ``orchestrace`` through a pipe would get errors, trace ids and paths
cut across lines. Off a terminal the width is unlimited unless ``COLUMNS`` asks for one.
"""

from __future__ import annotations

import os

from rich.console import Console, ConsoleDimensions

#: Wide enough for any line the command prints; tables still take only the width their cells need.
UNLIMITED = 1 << 16


class LineConsole(Console):
    """A ``Console`` that never wraps when its output is a pipe or a file."""

    def _size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)  # type: ignore[attr-defined]
        if self._width is None and not self.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
            return ConsoleDimensions(UNLIMITED, size.height)
        return size

    size = property(_size, Console.size.fset)  # type: ignore[attr-defined]
