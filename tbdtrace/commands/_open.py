"""Opening the TRACE argument of analysis commands."""

from __future__ import annotations

from pathlib import Path

import tbdtrace
from tbdtrace import importers
from tbdtrace.trace import Trace, from_tables


def open_or_import(arg: str) -> Trace:
    """A trace directory opened, or a profiler file imported in memory (nothing written),
    so ``report trace.json.gz`` works as ``import`` then ``report`` in one process."""
    p = Path(arg)
    if p.is_file():
        tables, meta = importers.import_files([p])
        return from_tables(tables, meta, p)
    return tbdtrace.open(p)
