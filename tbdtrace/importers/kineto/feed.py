"""Feeding Kineto files to the C++ parser, on a thread of its own (standard library only).

The parse (``tbdtrace._native.KinetoParser``, which releases the GIL) needs neither
pyarrow nor numpy, so it can start before they are imported: :func:`start` runs it on a
background thread and returns a :class:`ParseJob`; :mod:`tbdtrace.importers.kineto.tables`
turns the finished job into tables. ``tbdtrace report FILE`` starts the job first and
loads the analysis modules while the file is parsed (docs/DECISIONS.md).

Each file is read in pieces (gzip decompressed on yet another thread, with ``isal``, while
the parser works on the previous piece).
"""

from __future__ import annotations

import queue
import threading
import types
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tbdtrace.importers.kineto.vocab import ROUTES

_zlib: types.ModuleType
try:
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is in requirements; zlib is the same API
    _zlib = zlib
DECOMPRESS_ERROR = cast(type[Exception], _zlib.error)

try:
    from tbdtrace import _native
except ImportError:  # pragma: no cover - the extension is built by `make native`
    _native = None  # type: ignore[assignment]

READ_BYTES = 1 << 18  # compressed bytes read at a time
PIECE_BYTES = 1 << 20  # most decompressed bytes handed to the parser at a time
PREFETCH_PIECES = 2  # pieces decompressed ahead of the parser


class Declined(Exception):
    """The native parser does not take this file; the Python path reads it instead."""


def available() -> bool:
    return _native is not None and hasattr(_native, "KinetoParser")


@dataclass
class FileParse:
    """What the parser saw of one file."""

    path: Path
    rows: list[int]  # rows added to each staging table
    events: int
    top_level_list: bool
    header: bytes  # JSON text of the top-level keys other than traceEvents
    skipped: dict[str, int]  # events left out, by reason (tbdtrace/importers/validate.py)


@dataclass
class ParseJob:
    """A parse of ``files`` running on a background thread; :meth:`wait` joins it."""

    files: list[Path]
    parser: Any = None
    parsed: list[FileParse] = field(default_factory=list)
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def wait(self) -> ParseJob:
        """Joins the thread; raises :class:`Declined` (or what the parse raised)."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.error is not None:
            raise self.error
        return self


def start(files: list[Path], background: bool = True) -> ParseJob:
    """Begin parsing ``files`` into one parser (on a thread when ``background``)."""
    if not available():
        raise Declined("tbdtrace._native has no Kineto parser (run `make native`)")
    job = ParseJob(list(files), _native.KinetoParser(ROUTES))
    if background:
        job.thread = threading.Thread(
            target=_run, args=(job,), name="tbdtrace-kineto-parse", daemon=True
        )
        job.thread.start()
    else:
        _run(job)
    return job


def _run(job: ParseJob) -> None:
    parser = job.parser
    try:
        for path in job.files:
            parser.begin_file()
            before = parser.rows()
            try:
                feed_file(parser, path)
            # The parser's KinetoError is a ValueError.
            except (ValueError, OSError, EOFError, DECOMPRESS_ERROR) as e:
                raise Declined(f"{path}: {e}") from e
            job.parsed.append(
                FileParse(
                    path,
                    [b - a for a, b in zip(before, parser.rows(), strict=True)],
                    parser.events,
                    parser.top_level_list,
                    b"" if parser.top_level_list else parser.header(),
                    parser.skipped(),
                )
            )
    except BaseException as e:  # handed to wait()
        job.error = e


def feed_file(parser: Any, path: Path) -> None:
    """Feeds the file's (decompressed) bytes to the parser and finishes it."""
    for piece in _prefetch(lambda: _pieces(path)):
        parser.feed(piece)
    parser.finish()


def _pieces(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            while piece := f.read(PIECE_BYTES):
                yield piece
            return
        f.seek(0)
        yield from _gunzip(f)


def _gunzip(f: Any) -> Iterator[bytes]:
    """gzip members one after another (as gzip.decompress); anything else after the last
    member, a truncated member or a CRC error raises Declined (the Python path reports it)."""
    d = _zlib.decompressobj(31)
    pending = b""
    while True:
        if not pending:
            pending = f.read(READ_BYTES)
            if not pending:
                tail = d.flush()
                if tail:
                    yield tail
                if not d.eof:
                    raise Declined(f"{f.name}: gzip data ends inside a member")
                return
        if d.eof:  # the next member, or trailing bytes the Python path rejects
            pending += f.read(2) if len(pending) < 2 else b""
            if pending[:2] != b"\x1f\x8b":
                raise Declined(f"{f.name}: data after the gzip stream")
            d = _zlib.decompressobj(31)
        out = d.decompress(pending, PIECE_BYTES)
        pending = d.unused_data if d.eof else d.unconsumed_tail
        if out:
            yield out


_END = object()


def _prefetch(make: Callable[[], Iterator[bytes]], depth: int = PREFETCH_PIECES) -> Iterator[bytes]:
    """The items of make() produced on a worker thread, up to `depth` ahead."""
    q: queue.Queue[Any] = queue.Queue(depth)
    stop = threading.Event()

    def put(x: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(x, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        it = make()
        try:
            for x in it:
                if not put(x):
                    return
            put(_END)
        except BaseException as e:  # handed to the consumer, raised there
            put(e)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    t = threading.Thread(target=run, name="tbdtrace-kineto-read", daemon=True)
    t.start()
    try:
        while True:
            x = q.get()
            if x is _END:
                return
            if isinstance(x, BaseException):
                raise x
            yield x
    finally:
        stop.set()
        t.join()
