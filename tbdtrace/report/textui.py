"""Plain-text tables and lines for the command-line reports.

A small renderer instead of a general one: the commands print a few box-drawn tables of
short cells, and a general renderer (rich) cost a report of a 54 MB profiler file ~0.05 s
of its ~0.3 s to import and lay out. Layout rules:

* each column is as wide as its widest cell (or header), one space of padding each side;
* when a table is wider than the console, left-justified text columns (kernel, op and
  module names) give up width, widest first, down to 12 characters, and their cells end
  in "…"; numbers are never cut;
* cells are plain text: brackets in kernel names are printed as they are;
* names come from the profiled program: every control character in a title, header,
  cell or printed message (C0 and C1 controls, ESC, CR, DEL, bidirectional overrides) is
  shown as an escape such as ``\\x1b`` (:func:`tbdtrace.safe_text.printable`), so a
  name cannot move the cursor, clear the screen or forge a link; messages keep their
  newlines;
* on a terminal, titles and ``[bold]...[/bold]``, ``[green]``, ``[red]`` spans in
  :meth:`Console.print` messages are rendered with ANSI styles, elsewhere dropped.
"""

from __future__ import annotations

import io
import re
import shutil
import sys
from typing import Any, Literal, TextIO

from tbdtrace.report.fmt import cell_len, clip
from tbdtrace.safe_text import printable

_MIN_TEXT_WIDTH = 12
_MARKUP = re.compile(r"\[(/?)(bold|green|red|dim)\]")
_ANSI = {"bold": "\033[1m", "green": "\033[32m", "red": "\033[31m", "dim": "\033[2m"}
_RESET = "\033[0m"
Justify = Literal["left", "right"]


class Table:
    """A titled table of text cells: titles are left-aligned, cells never wrap (text
    columns are cut to fit, see the module docstring)."""

    def __init__(self, title: str | None = None, show_header: bool = True):
        self.title = None if title is None else printable(title)
        self.show_header = show_header
        self.headers: list[str] = []
        self.justify: list[Justify] = []
        self.rows: list[list[str]] = []

    def add_column(self, header: str = "", justify: Justify = "left") -> None:
        self.headers.append(printable(header))
        self.justify.append(justify)

    def add_row(self, *cells: Any) -> None:
        row = ["" if c is None else printable(_strip_markup(str(c))) for c in cells]
        row += [""] * (len(self.headers) - len(row))
        self.rows.append(row)

    def widths(self, room: int) -> list[int]:
        """Column widths (cell text only) that fit ``room`` columns of console if they can."""
        w = [cell_len(h) if self.show_header else 0 for h in self.headers]
        for r in self.rows:
            for i, c in enumerate(r):
                n = cell_len(c)
                if n > w[i]:
                    w[i] = n
        over = sum(w) + 3 * len(w) + 1 - room
        text = [i for i, j in enumerate(self.justify) if j == "left"]
        while over > 0 and text:
            i = max(text, key=lambda k: w[k])
            if w[i] <= _MIN_TEXT_WIDTH:
                break
            cut = min(over, w[i] - _MIN_TEXT_WIDTH)
            w[i] -= cut
            over -= cut
        return w

    def render(self, room: int, styled: bool = False) -> list[str]:
        w = self.widths(room)

        def line(cells: list[str], sep: str, edge_l: str, edge_r: str) -> str:
            parts = []
            for c, width, just in zip(cells, w, self.justify, strict=True):
                c = clip(c, width)
                pad = " " * (width - cell_len(c))
                parts.append(f" {pad}{c} " if just == "right" else f" {c}{pad} ")
            return edge_l + sep.join(parts) + edge_r

        def rule(left: str, mid: str, right: str, fill: str) -> str:
            return left + mid.join(fill * (x + 2) for x in w) + right

        out = []
        if self.title:
            out.append(f"\033[3m{self.title}{_RESET}" if styled else self.title)
        if self.show_header:
            out.append(rule("┏", "┳", "┓", "━"))
            head = line(self.headers, "┃", "┃", "┃")
            out.append(_bold(head) if styled else head)
            out.append(rule("┡", "╇", "┩", "━"))
        else:
            out.append(rule("┌", "┬", "┐", "─"))
        out.extend(line(r, "│", "│", "│") for r in self.rows)
        out.append(rule("└", "┴", "┘", "─"))
        return out


def _bold(s: str) -> str:
    return f"{_ANSI['bold']}{s}{_RESET}"


def _strip_markup(s: str) -> str:
    return _MARKUP.sub("", s) if "[" in s else s


class Console:
    """Where the text goes (the subset of rich.console.Console the commands use).

    ``width`` defaults to the terminal's width, or 160 columns when output is not a
    terminal; ``record=True`` keeps what was printed for :meth:`export_text`.
    """

    def __init__(
        self,
        width: int | None = None,
        file: TextIO | None = None,
        stderr: bool = False,
        record: bool = False,
    ):
        self._file = file
        self._stderr = stderr
        self._record: io.StringIO | None = io.StringIO() if record else None
        self._width = width

    @property
    def file(self) -> TextIO:
        if self._file is not None:
            return self._file
        return sys.stderr if self._stderr else sys.stdout

    @property
    def width(self) -> int:
        if self._width is not None:
            return self._width
        if self.is_terminal:
            return shutil.get_terminal_size((160, 24)).columns
        return 160

    @property
    def is_terminal(self) -> bool:
        isatty = getattr(self.file, "isatty", None)
        return bool(isatty and isatty()) and self._record is None

    def print(self, obj: Any = "", end: str = "\n") -> None:
        styled = self.is_terminal
        if isinstance(obj, Table):
            text = "\n".join(obj.render(self.width, styled))
        else:
            text = printable(str(obj), keep_newlines=True)
            if "[" in text:
                text = _MARKUP.sub(
                    (lambda m: _RESET if m.group(1) else _ANSI[m.group(2)]) if styled else "",
                    text,
                )
        if self._record is not None:
            self._record.write(text + end)
        else:
            self.file.write(text + end)

    def export_text(self) -> str:
        """Everything printed so far (``record=True``)."""
        return self._record.getvalue() if self._record is not None else ""
