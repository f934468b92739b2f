"""Names from traces made safe for terminals and spreadsheets (docs/RELIABILITY.md, "Names").

Kernel, op, thread and file names come from the profiled program, so from whoever wrote
or shared the trace. Printed raw, an ``ESC`` sequence in one can clear the screen, forge
a hyperlink (``ESC]8;;``) or rewrite the terminal's title, and a bare CR can overwrite a
line already printed; in a CSV file, a cell starting with ``=`` can be run as a formula
by a spreadsheet (``=HYPERLINK(...)``).

* :func:`printable` is for text shown on a terminal: every C0 control (``\\x00``-``\\x1f``,
  CR, ESC and TAB included), DEL, every C1 control (``\\x80``-``\\x9f``) and the Unicode
  bidirectional overrides and isolates (which reorder what is displayed) become visible
  escapes such as ``\\x1b`` or ``\\u202e``; ``keep`` names controls left as they are
  (newline, for messages of several lines). Other text, brackets and backslashes
  included, is unchanged, so names without controls print exactly.
* :func:`csv_cell` makes a CSV text cell safe to open in a spreadsheet and to print on
  a terminal: its control characters become escapes as above, then the OWASP rule for
  CSV injection: a cell starting with ``=``, ``+``, ``-``, ``@``, TAB or CR gets a
  leading ``'`` (a spreadsheet then shows it as text), unless the whole cell is a plain
  number (``-12``, ``+1.5e3``), which a spreadsheet reads as a number, not a formula, or
  a lone ``-`` (the placeholder of an empty value, which no spreadsheet runs). The CSV
  writers' ``raw`` option (``--raw-csv``) skips it: cells exactly as they are.

JSON, Parquet, Perfetto and Chrome outputs keep names exact: they do not go through here.
"""

from __future__ import annotations

import re

# C1, DEL, and the bidirectional marks, embeddings, overrides and isolates
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f{_OTHERS}]")
_UNSAFE_KEEP_NL = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHERS}]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str, keep_newlines: bool = False) -> str:
    """``text`` with its control characters shown as escapes (see the module docstring);
    ``keep_newlines`` leaves ``\\n`` as it is."""
    pattern = _UNSAFE_KEEP_NL if keep_newlines else _UNSAFE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


def csv_cell(text: str) -> str:
    """A CSV text cell that no spreadsheet runs as a formula and no terminal obeys (see
    the module docstring)."""
    text = printable(text)
    if text.startswith(_FORMULA_START) and text != "-" and _NUMBER.fullmatch(text) is None:
        return "'" + text
    return text


__all__ = ["csv_cell", "printable"]
