"""Tables (:mod:`tbdtrace.report.tabular`) as CSV: a header row, then one row per record.

Cells hold the document's values in their units (ns, bytes, ratios 0..1): integers as
digits, floats in full precision (``repr``), booleans ``true``/``false``, null empty.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, TextIO

from tbdtrace.report.tabular import Tab


def cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write(tab: Tab, out: TextIO) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(tab.columns)
    for r in tab.rows:
        w.writerow([cell(v) for v in r])


def write_dir(tabs: list[Tab], directory: Path) -> list[Path]:
    """One ``<table name>.csv`` per table in ``directory`` (made when missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in tabs:
        p = directory / f"{t.name}.csv"
        with p.open("w", newline="", encoding="utf-8") as f:
            write(t, f)
        paths.append(p)
    return paths
