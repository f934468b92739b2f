"""Tables (:mod:`tbdtrace.report.tabular`) as CSV: a header row, then one row per record.

Cells hold the document's values in their units (ns, bytes, ratios 0..1): integers as
digits, floats in full precision (``repr``), booleans ``true``/``false``, null empty.
Text cells that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, TAB, CR
first) get a leading ``'`` (:func:`tbdtrace.safe_text.csv_cell`) unless ``raw``; numbers,
negative ones included, are never changed.
"""

from __future__ import annotations

import csv
from typing import Any, TextIO

from tbdtrace.report.tabular import Tab
from tbdtrace.safe_text import csv_cell


def cell(v: Any, raw: bool = False) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return v if raw else csv_cell(v)
    return str(v)


def write(tab: Tab, out: TextIO, raw: bool = False) -> None:
    """``tab`` as CSV: a header row, then its rows (see the module docstring)."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow([c if raw else csv_cell(c) for c in tab.columns])
    for r in tab.rows:
        w.writerow([cell(v, raw) for v in r])
