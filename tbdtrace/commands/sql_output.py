"""``tbdtrace sql --output FILE``: the query result written by tbdtrace, not by DuckDB.

The query itself has no file access (tbdtrace/analysis/sql.py); the result is written here,
in a format chosen by the file's extension, to a temporary file beside FILE that then
replaces it, so an interrupted write never leaves half a file. A path inside the trace
being queried (or the profiler file itself) is refused: the trace's own files are never
overwritten.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa

from tbdtrace.errors import TraceError

FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet"}


def check(output: str, trace_arg: str) -> Path:
    """The output path, made absolute; raises TraceError when it cannot be used."""
    out = Path(output).expanduser().absolute()
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise TraceError(
            f"{output}: unknown output format {out.suffix or '(no extension)'!r}; "
            f"name the file {', '.join('*' + s for s in FORMATS)}"
        )
    src = Path(trace_arg).expanduser().resolve()
    real = out.resolve()
    if real == src or (src.is_dir() and real.is_relative_to(src)):
        raise TraceError(
            f"{output}: inside the trace {trace_arg}; tbdtrace never overwrites a trace's "
            "own files: write the result elsewhere"
        )
    if out.is_dir():
        raise TraceError(f"{output}: is a directory; give a file name")
    if not out.parent.is_dir():
        raise TraceError(f"{output}: directory {out.parent} does not exist; create it first")
    return out


def write(table: pa.Table, out: Path) -> None:
    """Write ``table`` to ``out`` (format by extension), replacing it atomically."""
    fmt = FORMATS[out.suffix.lower()]
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as e:
        raise TraceError(f"{out}: cannot write ({e.strerror}); choose another path") from e
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with os.fdopen(fd, "wb") as fb:
                pq.write_table(table, fb)
        else:
            from tbdtrace.report.sql_view import records, write_csv

            rows = records(table)
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
                if fmt == "json":
                    json.dump(rows, f, indent=2, default=str)
                    f.write("\n")
                else:
                    write_csv(f, table.column_names, rows)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, out)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise TraceError(f"{out}: cannot write ({e.strerror}); choose another path") from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
