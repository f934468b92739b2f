"""Opening the TRACE argument of analysis commands."""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    from tbdtrace.trace import Trace


# A profiler file this large is imported through a temporary trace directory, in bounded
# memory (tbdtrace/importers/kineto/stream.py) and in a child process whose heap is gone
# before the analysis (_import_child.py); a smaller one in memory, which is faster.
# Sizes of the file as stored: gzip shrinks Kineto JSON ~8-10x, so both mean ~2 GiB of
# JSON, which the in-memory import holds as ~1.1 GiB of tables (docs/DECISIONS.md 137).
STREAM_GZIP_BYTES = 256 << 20
STREAM_PLAIN_BYTES = 2 << 30
# A smaller file too when its events are more than this (rows of the parser's staging
# tables, ~90 bytes each): a highly compressible file can hold tens of millions of
# events. It is parsed in batches of this size; one that ends within the first batch is
# analysed in memory, else the import goes on through the temporary directory.
IN_MEMORY_ROWS = 6 << 20
TEMP_PREFIX = "tbdtrace-report-"
_temporary: list[Path] = []  # folders of temporary traces, removed at exit


class PendingOpen:
    """A trace being opened: :meth:`trace` gives it."""

    def __init__(
        self,
        arg: str,
        strict: bool = False,
        stream: bool | None = None,
        read_ahead: Any = None,
    ):
        self.path = Path(arg)
        self.strict = strict
        self.pending: Any = None
        self.error: TraceError | None = None
        self.stream = False
        self.reading: Any = None  # the progress line of the file's parse
        self.opening: Any = None  # a trace directory opened on a thread (read_ahead)
        self.child: Any = None  # a big file's import in a process of its own
        if read_ahead and self.path.is_dir():
            self.opening = _OpenAhead(self.path, strict, read_ahead)
        elif self.path.is_file():
            from tbdtrace import importers

            self.stream = is_big(self.path) if stream is None else stream
            if self.stream and self._start_child():
                return
            try:
                # Batches of the streaming import's size from the start for a big file;
                # else a first batch of IN_MEMORY_ROWS, which holds a small file whole.
                self.pending = importers.begin_import(
                    [self.path],
                    streamed=self.stream,
                    batch_rows=0 if self.stream else IN_MEMORY_ROWS,
                )
            except TraceError as e:  # raised by trace(), after the command's usage checks
                self.error = e
            else:
                self.reading = show_reading(self.pending, [self.path])

    def trace(self) -> Trace:
        from tbdtrace import trace as trace_io

        if self.error is not None:
            raise self.error
        if self.child is not None:
            return self._from_child()
        if self.pending is not None and self.stream:
            return self._through_directory()
        if self.pending is not None:
            try:
                got = self.pending.in_memory_or_none()
            except BaseException:
                self.reading.close()
                raise
            if got is None:  # more events than IN_MEMORY_ROWS: bounded memory
                return self._through_directory()
            self.reading.close()
            tables, meta = got
            self.pending = None
            _note_skipped(self.path, meta)
            tr = trace_io.from_tables(tables, meta, self.path)
            _trim_heap()
            return tr
        opened = self.opening.trace() if self.opening is not None else None
        if opened is None:
            opened = trace_io.open(self.path, strict=self.strict)
        _note_problems(opened)
        return opened

    def _start_child(self) -> bool:
        """A big file's import started in a process of its own (its heap is the system's
        again when it exits: tbdtrace/commands/_import_child.py), its format checked
        here first (an error then raised by trace(), as the import's own); False when no
        child could be started: the import runs in this process then."""
        import tempfile

        from tbdtrace import importers
        from tbdtrace.commands import _import_child

        try:
            importers.begin_import([self.path], background=False)  # the file and its format
        except TraceError as e:
            self.error = e
            return True
        try:
            folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        except OSError:
            return False  # the import in this process says why, as before
        self.child = _import_child.start(self.path, folder, remove_temporary)
        if self.child is None:
            folder.rmdir()
            return False
        _temporary.append(folder)
        return True

    def _from_child(self) -> Trace:
        from tbdtrace import trace as trace_io

        out, skipped = self.child.result()
        self.child = None
        _note_skipped(self.path, {"skipped_events": skipped})
        return trace_io.open(out, shown_as=self.path)

    def _through_directory(self) -> Trace:
        """The file imported into a temporary trace directory in this process (see
        :func:`import_into`), opened as a trace named after the file; removed at exit."""
        import tempfile

        from tbdtrace import trace as trace_io

        folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        _temporary.append(folder)
        out, _ = import_into(
            self.pending, self.reading, self.path, folder, lambda m: _note_skipped(self.path, m)
        )
        self.pending = None
        _trim_heap()  # the import's freed batches, before the analysis grows the heap
        return trace_io.open(out, shown_as=self.path)


def import_into(
    pending: Any, reading: Any, path: Path, folder: Path, parsed: Any = None
) -> tuple[Path, dict[str, Any]]:
    """``pending`` (the import of ``path``, streamed; ``reading``: its progress line)
    written as a trace directory ``folder/trace`` (uncompressed table files, read once)
    through a spool in ``folder/spool``, removed after: (the trace directory, its meta).
    ``folder``: a private temporary folder, removed by the caller; ``parsed``: called
    with the meta once the file is parsed, before the tables are written."""
    import shutil

    from tbdtrace import trace as trace_io

    spool = folder / "spool"
    spool.mkdir()
    try:
        try:
            tables, meta, rows = pending.streamed(spool)
        finally:
            reading.close()
        if parsed is not None:
            parsed(meta)
        with show_writing(tables, rows, "importing into a temporary trace") as shown:
            out = trace_io.write(folder / "trace", shown, meta, compression=None)
    except OSError as e:
        from tbdtrace import outdir

        raise TraceError(
            f"{path}: cannot import it through a temporary folder in "
            f"{folder.parent} ({outdir.describe_os_error(e)}); free space there or "
            "set TMPDIR to a folder with room, or import it with `tbdtrace import`"
        ) from None
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    return out, meta


# A trace directory of at most this many event rows is read ahead (READ_AHEAD of the
# command): its columns held for the whole command cost little memory (~8 bytes per row
# and column), and a bigger trace keeps the memory of the columns its passes read once.
READ_AHEAD_ROWS = 2 << 20


class _OpenAhead:
    """A trace directory opened on a thread of its own, which then decodes the columns
    the command will read first (``wanted``: (table, columns) pairs, in the order it
    reads them; :meth:`tbdtrace.trace.ColumnStore.read_ahead`) while the command loads
    its analysis modules and starts on the first columns: Parquet decoding releases the
    GIL, so on a machine of two cores or more the decoding and the analysis go side by
    side (docs/DECISIONS.md 245). Only a small trace (:data:`READ_AHEAD_ROWS`); an
    error of the open is raised by :meth:`trace`, where the open would have raised it."""

    def __init__(self, path: Path, strict: bool, wanted: Any):
        # Everything the thread runs is imported here first: two threads importing the
        # same modules at once could meet in an import cycle.
        from tbdtrace import meta, outdir, safe_text, schema, tablefile, trace_check  # noqa: F401
        from tbdtrace import trace as trace_io

        tablefile.load_parquet()
        self.opened = threading.Event()
        self.got: Any = None

        def run() -> None:
            try:
                tr = trace_io.open(path, strict=strict)
            except BaseException as e:  # raised by trace(), on the command's thread
                self.got = e
                self.opened.set()
                return
            ahead = tr.read_ahead(wanted) if event_rows(tr) <= READ_AHEAD_ROWS else None
            self.got = tr
            self.opened.set()
            if ahead is not None:
                ahead()

        try:
            threading.Thread(target=run, name="tbdtrace-read-ahead", daemon=True).start()
        except RuntimeError:  # no new thread (a process at its limit): opened when asked
            self.opened.set()

    def trace(self) -> Trace | None:
        """The trace, or None when no thread could open it (then the caller opens it)."""
        self.opened.wait()
        if isinstance(self.got, BaseException):
            raise self.got
        tr: Trace | None = self.got
        return tr


def event_rows(tr: Trace) -> int:
    """Rows of a trace's event tables (every table but ``devices``)."""
    from tbdtrace import schema

    return sum(tr.num_rows(t.name) for t in schema.TABLES if t.name != "devices")


def show_reading(pending: Any, files: list[Path]) -> Any:
    """A progress line for the parse of ``files`` (bytes read of their size; shown on a
    terminal for a big input, tbdtrace.progress)."""
    from tbdtrace import progress

    total = sum(p.stat().st_size for p in files)
    names = files[0].name if len(files) == 1 else f"{len(files)} files"
    task = progress.task(f"reading {names}", total, "bytes", progress.is_big(total))
    job = getattr(pending, "job", None)
    if task.shown and job is not None:
        job.progress = lambda n: task.update(n)
    return task


def show_writing(tables: dict[str, Any], rows: dict[str, int], label: str) -> Any:
    """``tables`` for :func:`tbdtrace.trace.write` with their streamed batches counted on a
    progress line (rows written of ``rows``), and the line (a context manager)."""
    from tbdtrace import progress
    from tbdtrace import trace as trace_io

    # The event tables' rows: streamed ones counted batch by batch, ones held in memory
    # (an in-memory import) table by table as their files are written; the devices' few
    # rows are written at once.
    total = sum(rows.get(n, 0) for n in tables if n != "devices")
    task = progress.task(label, total, "rows", progress.is_big(rows=total))
    if not task.shown:
        return _Shown(tables, task)

    def counted(batches: Any) -> Any:
        for b in batches:
            yield b
            task.update(advance=b.num_rows)

    def written(n: int) -> None:
        task.update(advance=n)

    out = {
        n: trace_io.Streamed(t.schema, lambda t=t: counted(t.batches()))
        if isinstance(t, trace_io.Streamed)
        else (t if n == "devices" else trace_io.Counted(t, written))
        for n, t in tables.items()
    }
    return _Shown(out, task)


class _Shown:
    """``with show_writing(...) as tables``: the tables, the line closed at the end."""

    def __init__(self, tables: dict[str, Any], task: Any):
        self.tables, self.task = tables, task

    def __enter__(self) -> dict[str, Any]:
        return self.tables

    def __exit__(self, *exc: object) -> None:
        self.task.close()


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


def _note_problems(tr: Trace) -> None:
    """One line on stderr per table file the trace's check left out or ignored."""
    import sys

    for line in tr.problems:
        print(f"tbdtrace: warning: {line}", file=sys.stderr)


def _trim_heap() -> None:
    """Hand the parser's freed staging memory back to the system (glibc malloc_trim), so
    the analysis that follows does not grow the process on top of it."""
    from tbdtrace.heap import glibc

    libc = glibc()
    if libc is not None:
        libc.malloc_trim(0)


def begin_open(
    arg: str, strict: bool = False, stream: bool | None = None, read_ahead: Any = None
) -> PendingOpen:
    """Start opening ``arg``: a trace directory, or a profiler file imported in memory
    (nothing written; a big one through a temporary trace directory, ``stream``
    overriding the size rule), whose parse starts on a background thread; the caller can
    load what it needs meanwhile, then call ``.trace()``. A trace directory's table files
    are checked (tbdtrace/trace_check.py): each one left out is named on stderr, or with
    ``strict`` refused. ``read_ahead``: (table, columns) pairs the command reads first,
    decoded on a thread of their own meanwhile (a small trace directory's; see
    :class:`_OpenAhead`)."""
    return PendingOpen(arg, strict, stream, read_ahead)


def open_or_import(arg: str, strict: bool = False) -> Trace:
    """A trace directory opened, or a profiler file imported in memory (nothing written),
    so ``report trace.json.gz`` works as ``import`` then ``report`` in one process."""
    return begin_open(arg, strict).trace()


atexit.register(remove_temporary)
