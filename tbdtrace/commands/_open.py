"""Opening the TRACE argument of analysis commands."""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    from tbdtrace.trace import Trace


# A profiler file this large is imported through a temporary trace directory, in bounded
# memory (tbdtrace/importers/kineto/stream.py); a smaller one in memory, which is faster.
# Sizes of the file as stored: gzip shrinks Kineto JSON ~8-10x, so both mean ~2 GiB of
# JSON, which the in-memory import holds as ~1.1 GiB of tables (docs/DECISIONS.md perf.2).
STREAM_GZIP_BYTES = 256 << 20
STREAM_PLAIN_BYTES = 2 << 30
TEMP_PREFIX = "tbdtrace-report-"
_temporary: list[Path] = []  # folders of temporary traces, removed at exit


class PendingOpen:
    """A trace being opened: :meth:`trace` gives it."""

    def __init__(self, arg: str, stream: bool | None = None):
        self.path = Path(arg)
        self.pending: Any = None
        self.error: TraceError | None = None
        self.stream = False
        if self.path.is_file():
            from tbdtrace import importers

            self.stream = is_big(self.path) if stream is None else stream
            try:
                self.pending = importers.begin_import([self.path], streamed=self.stream)
            except TraceError as e:  # raised by trace(), after the command's usage checks
                self.error = e

    def trace(self) -> Trace:
        from tbdtrace import trace as trace_io

        if self.error is not None:
            raise self.error
        if self.pending is not None and self.stream:
            return self._through_directory()
        if self.pending is not None:
            tables, meta = self.pending.result()
            self.pending = None
            _note_skipped(self.path, meta)
            tr = trace_io.from_tables(tables, meta, self.path)
            _trim_heap()
            return tr
        return trace_io.open(self.path)

    def _through_directory(self) -> Trace:
        """The file imported into a temporary trace directory (uncompressed table files,
        read once), opened as a trace named after the file; removed at exit."""
        import shutil
        import tempfile

        from tbdtrace import trace as trace_io

        folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        _temporary.append(folder)
        spool = folder / "spool"
        spool.mkdir()
        try:
            tables, meta, _ = self.pending.streamed(spool)
            self.pending = None
            _note_skipped(self.path, meta)
            out = trace_io.write(folder / "trace", tables, meta, compression=None)
        except OSError as e:
            from tbdtrace import outdir

            raise TraceError(
                f"{self.path}: cannot import it through a temporary folder in "
                f"{folder.parent} ({outdir.describe_os_error(e)}); free space there or "
                "set TMPDIR to a folder with room, or import it with `tbdtrace import`"
            ) from None
        finally:
            shutil.rmtree(spool, ignore_errors=True)
        return trace_io.open(out, shown_as=self.path)


def is_big(path: Path) -> bool:
    """Is ``path`` a profiler file to import in bounded memory (see STREAM_GZIP_BYTES)?"""
    try:
        with path.open("rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        size = path.stat().st_size
    except OSError:
        return False
    return size >= (STREAM_GZIP_BYTES if gz else STREAM_PLAIN_BYTES)


def remove_temporary() -> None:
    """Remove the temporary trace directories this process made (the CLI calls it before
    it exits; also registered with atexit)."""
    import shutil

    while _temporary:
        shutil.rmtree(_temporary.pop(), ignore_errors=True)


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


def begin_open(arg: str, stream: bool | None = None) -> PendingOpen:
    """Start opening ``arg``: a trace directory, or a profiler file imported in memory
    (nothing written; a big one through a temporary trace directory, ``stream``
    overriding the size rule), whose parse starts on a background thread; the caller can
    load what it needs meanwhile, then call ``.trace()``."""
    return PendingOpen(arg, stream)


def open_or_import(arg: str) -> Trace:
    """A trace directory opened, or a profiler file imported in memory (nothing written),
    so ``report trace.json.gz`` works as ``import`` then ``report`` in one process."""
    return begin_open(arg).trace()


atexit.register(remove_temporary)
