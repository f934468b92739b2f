"""Opening the TRACE argument of analysis commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    from tbdtrace.trace import Trace


class PendingOpen:
    """A trace being opened: :meth:`trace` gives it."""

    def __init__(self, arg: str):
        self.path = Path(arg)
        self.pending: Any = None
        self.error: TraceError | None = None
        if self.path.is_file():
            from tbdtrace import importers

            try:
                self.pending = importers.begin_import([self.path])
            except TraceError as e:  # raised by trace(), after the command's usage checks
                self.error = e

    def trace(self) -> Trace:
        from tbdtrace import trace as trace_io

        if self.error is not None:
            raise self.error
        if self.pending is not None:
            tables, meta = self.pending.result()
            self.pending = None
            _note_skipped(self.path, meta)
            tr = trace_io.from_tables(tables, meta, self.path)
            _trim_heap()
            return tr
        return trace_io.open(self.path)


def _note_skipped(path: Path, meta: dict[str, Any]) -> None:
    """One line on stderr when the import left events out (their counts are in meta)."""
    from tbdtrace.importers import validate

    line = validate.summary(meta.get("skipped_events") or {})
    if line:
        import sys

        print(f"tbdtrace: {path}: {line}", file=sys.stderr)


def _trim_heap() -> None:
    """Hand the parser's freed staging memory back to the system (glibc malloc_trim), so
    the analysis that follows does not grow the process on top of it."""
    from tbdtrace.heap import glibc

    libc = glibc()
    if libc is not None:
        libc.malloc_trim(0)


def begin_open(arg: str) -> PendingOpen:
    """Start opening ``arg``: a trace directory, or a profiler file imported in memory
    (nothing written), whose parse starts on a background thread; the caller can load
    what it needs meanwhile, then call ``.trace()``."""
    return PendingOpen(arg)


def open_or_import(arg: str) -> Trace:
    """A trace directory opened, or a profiler file imported in memory (nothing written),
    so ``report trace.json.gz`` works as ``import`` then ``report`` in one process."""
    return begin_open(arg).trace()
