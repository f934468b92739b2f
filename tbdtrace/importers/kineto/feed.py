"""Feeding Kineto files to the C++ parser, on a thread of its own (standard library only).

The parse (``tbdtrace._native.KinetoParser``, which releases the GIL) needs neither
pyarrow nor numpy, so it can start before they are imported: :func:`start` runs it on a
background thread and returns a :class:`ParseJob`; :mod:`tbdtrace.importers.kineto.tables`
turns the finished job into tables. ``tbdtrace report FILE`` starts the job first and
loads the analysis modules while the file is parsed (docs/DECISIONS.md).

Each file is read in pieces (gzip decompressed on yet another thread, with ``isal``, while
the parser works on the previous piece). A file the parser cannot read ends the job with a
:class:`ParseFailure`; :mod:`tbdtrace.importers.kineto.repair` says what is wrong in one
line, or gives a :class:`FileFix` (the file's repaired text, traceEvents lists to pass
over, the time base to add) with which the files are parsed again.

The few values the C++ parser reads by Python's rules (a time written as text, an integer
in Unicode digits, a name that is a list) it asks of :func:`python_value`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import threading
import types
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tbdtrace.errors import TraceError
from tbdtrace.importers import validate
from tbdtrace.importers.kineto.vocab import ROUTES, STEP_RE, _any_int

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

# Compressed bytes read at a time. Each decompress call hands back the input it has not
# consumed yet as a new bytes object (``unconsumed_tail``), so a larger read copies more:
# inflating the 1M-kernel file (155 MiB) took 0.84 CPU s with 256 KiB reads, 0.62 s with
# 128 KiB, 0.63-0.66 s with 64 and 32 KiB (docs/DECISIONS.md 236).
READ_BYTES = 1 << 17
PIECE_BYTES = 1 << 20  # most decompressed bytes handed to the parser at a time
PREFETCH_PIECES = 2  # pieces decompressed ahead of the parser
# The least of a piece worth cutting in two for the parser's second thread
# (``KinetoParser.set_threads``; a piece is up to PIECE_BYTES).
SPLIT_BYTES = 1 << 16


# Parser::HookKind and TimeState (csrc/kineto/parser.h, json.h).
HOOK_TIME, HOOK_INT, HOOK_TEXT, HOOK_STEP, HOOK_DUMP = range(5)
_TIME_STATES = {"time_not_finite": 3, "time_out_of_range": 4, "time_not_a_number": 5}


def available() -> bool:
    """The extension is built, from sources as new as this package (the two-thread
    parse)."""
    return _native is not None and hasattr(getattr(_native, "KinetoParser", None), "set_threads")


def parse_threads(files: Iterable[Path] = ()) -> int:
    """Threads for the body of traceEvents (``KinetoParser.set_threads``): 2 where this
    process may run on more than one CPU, else 1; and 1 on two CPUs when a file is
    gzipped, whose inflation takes the second one (the 1M-kernel file: no faster on two
    parse threads, ~0.3 CPU s more; its plain JSON 2.7-2.9 s instead of 3.0-3.7 s;
    docs/DECISIONS.md 254). The parse's result is the same either way."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    if cpus < 2:
        return 1
    if cpus == 2 and any(_gzipped(p) for p in files):
        return 1
    return 2


def _gzipped(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:  # the read that follows names the problem
        return False


def python_value(kind: int, data: bytes) -> bytes:
    """The parser's hook (``KinetoParser.set_hook``): a value read by Python's rules."""
    text = data.decode("utf-8", errors="replace")
    if kind == HOOK_TIME:  # the value's JSON text; decimals stay text, as Kineto wrote them
        ns = validate.us_to_ns_checked(json.loads(text, parse_float=str))
        return f"{_TIME_STATES[ns]} 0".encode() if isinstance(ns, str) else f"1 {ns}".encode()
    if kind == HOOK_INT:  # a string value read as an integer
        try:
            x = _any_int(text)
        except ValueError as e:  # int() refuses text that str.isdigit() accepts
            return b"!" + str(e).encode()
        return b"" if x is None else str(x).encode()
    if kind == HOOK_TEXT:  # str() of a list, object, NaN or Infinity
        return str(json.loads(text, parse_float=str)).encode(errors="replace")
    if kind == HOOK_STEP:
        return b"1" if STEP_RE.match(text) else b"0"
    if kind == HOOK_DUMP:  # Input Dims and the like holding an object (last key wins)
        return json.dumps(json.loads(text, parse_float=str), separators=(",", ":")).encode()
    raise ValueError(f"unknown hook kind {kind}")


@dataclass(frozen=True)
class FileFix:
    """How to parse one file again (:mod:`tbdtrace.importers.kineto.repair`)."""

    source: bytes | None = None  # repaired content, parsed instead of the file's
    skip_lists: int = 0  # traceEvents members to pass over (the last one counts)
    base: int | None = None  # baseTimeNanoseconds for the parser to add
    error: str | None = None  # the parser's first complaint about the file as it is


class ParseFailure(Exception):
    """The parser (or the file's reading) stopped on file ``index`` of the job."""

    def __init__(self, path: Path, index: int, what: str, error: BaseException):
        super().__init__(f"{path}: {error}")
        self.path, self.index, self.what, self.error = path, index, what, error


@dataclass
class FileParse:
    """What the parser saw of one file."""

    path: Path
    rows: list[int]  # rows added to each staging table
    events: int
    top_level_list: bool
    header: bytes  # JSON text of the top-level keys other than traceEvents
    skipped: dict[str, int]  # events left out, by reason (tbdtrace/importers/validate.py)
    base_added: int = 0  # baseTimeNanoseconds the parser already added to the times


@dataclass
class ParseJob:
    """A parse of ``files`` running on a background thread; :meth:`wait` joins it.

    In batch mode (``batch_rows`` > 0) the rows leave the parser as they are parsed: every
    ``batch_rows`` staging rows, and at the end of each file, ``Parser.take_batch`` hands
    them over to :attr:`batches` (a queue of ``(file index, batch)`` items, then
    ``None``), which holds at most :data:`BATCHES_AHEAD` of them: the parse waits for its
    consumer, so memory holds a bounded window of rows however long the file is."""

    files: list[Path]
    parser: Any = None
    fixes: dict[int, FileFix] = field(default_factory=dict)  # by file index
    parsed: list[FileParse] = field(default_factory=list)
    error: BaseException | None = None
    thread: threading.Thread | None = None
    batch_rows: int = 0
    batches: queue.Queue[Any] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    # Called from the parse thread with the bytes of the files read so far (as stored:
    # compressed for gzip), for a progress display (tbdtrace.progress).
    progress: Callable[[int], None] | None = None

    def wait(self) -> ParseJob:
        """Joins the thread; raises :class:`ParseFailure` (or what the parse raised)."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.error is not None:
            raise self.error
        return self

    def next_batch(self) -> tuple[int, dict[str, Any]] | None:
        """Batch mode: the next ``(file index, batch)``, None after the last; raises what
        the parse raised (:meth:`wait`) once its batches are consumed."""
        assert self.batches is not None
        item = self.batches.get()
        if item is None:
            self.wait()
        return cast("tuple[int, dict[str, Any]] | None", item)

    def cancel(self) -> None:
        """Stops a parse whose batches are no longer wanted (the thread ends at its next
        hand-over) and joins it; its error, if any, is dropped."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def _put(self, item: Any) -> None:
        assert self.batches is not None
        while not self.stop.is_set():
            try:
                self.batches.put(item, timeout=0.05)
                return
            except queue.Full:
                continue
        raise _Cancelled


BATCHES_AHEAD = 1  # batches parsed ahead of their consumer (besides the one it holds)
BATCH_ROWS = 1 << 20  # staging rows per batch of the streaming import (~60-100 MB)


class _Cancelled(Exception):
    """The consumer of a batch-mode job stopped taking batches (ParseJob.cancel)."""


class GzipError(Exception):
    """The gzip stream of a file is cut short, corrupt, or followed by other bytes."""


def start(
    files: list[Path],
    background: bool = True,
    fixes: dict[int, FileFix] | None = None,
    batch_rows: int = 0,
) -> ParseJob:
    """Begin parsing ``files`` into one parser (on a thread when ``background``);
    ``fixes``: by file index, how to parse a file again (:class:`FileFix`);
    ``batch_rows`` > 0: batch mode (:class:`ParseJob`), which needs ``background``."""
    if not available():
        raise TraceError(
            "tbdtrace._native is missing or older than this checkout's Kineto parser: "
            "build the extension (`make native`)"
        )
    job = ParseJob(list(files), _native.KinetoParser(ROUTES), dict(fixes or {}))
    job.parser.set_hook(python_value)
    job.parser.set_threads(parse_threads(job.files), SPLIT_BYTES)
    if batch_rows > 0:
        assert background, "batch mode hands batches to another thread"
        job.batch_rows = batch_rows
        job.batches = queue.Queue(BATCHES_AHEAD)
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
    read_before = 0  # bytes of the files before this one, for the progress display
    try:
        for i, path in enumerate(job.files):
            parser.begin_file()
            fix = job.fixes.get(i, FileFix())
            if fix.base is not None:
                parser.set_base(fix.base)
            parser.set_skip_lists(fix.skip_lists)
            before = parser.rows()
            taken = [0] * len(before)  # rows handed over in batches, per staging table

            def cut(final: bool = False, i: int = i, taken: list[int] = taken) -> None:
                rows = parser.rows()
                if job.batches is None or not (final or sum(rows) >= job.batch_rows):
                    return
                if sum(rows):
                    for k, n in enumerate(rows):
                        taken[k] += n
                    job._put((i, parser.take_batch()))

            # job.progress may be set after the thread starts (the caller shows progress
            # once it knows the job): looked up at each piece.
            shown = functools.partial(_read_so_far, job, read_before)
            try:
                feed_file(parser, path, fix.source, cut, shown)
                cut(final=True)
            except OSError as e:
                raise ParseFailure(path, i, "read", e) from e
            except (GzipError, EOFError, DECOMPRESS_ERROR) as e:
                raise ParseFailure(path, i, "gzip", e) from e
            except ValueError as e:  # the parser's KinetoError is a ValueError
                raise ParseFailure(path, i, "parse", e) from e
            read_before += _size(path)
            rows = [t + b - a for t, a, b in zip(taken, before, parser.rows(), strict=True)]
            job.parsed.append(
                FileParse(
                    path,
                    rows,
                    parser.events,
                    parser.top_level_list,
                    b"" if parser.top_level_list else parser.header(),
                    parser.skipped(),
                    fix.base or 0,
                )
            )
    except _Cancelled:
        pass
    except BaseException as e:  # handed to wait()
        job.error = e
    finally:
        if job.batches is not None and not job.stop.is_set():
            with contextlib.suppress(_Cancelled):
                job._put(None)


def feed_file(
    parser: Any,
    path: Path,
    source: bytes | None = None,
    after: Callable[[], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Feeds the file's (decompressed) bytes, or ``source`` instead, to the parser and
    finishes it; ``after`` is called after each piece (batch mode takes its rows there),
    ``progress`` with the file's bytes read so far (as stored)."""
    read = [0]  # the file's bytes read (compressed for gzip), set by the reading thread
    if source is not None:
        view = memoryview(source)
        pieces: Iterator[Any] = (
            view[at : at + PIECE_BYTES] for at in range(0, len(source), PIECE_BYTES)
        )
        scale = _size(path) / max(len(source), 1)  # the repaired text stands for the file
    else:
        pieces = _prefetch(lambda: _pieces(path, read))
    fed = 0
    for piece in pieces:
        parser.feed(piece)
        fed += len(piece)
        if after is not None:
            after()
        if progress is not None:
            progress(read[0] if source is None else int(fed * scale))
    parser.finish()


def _read_so_far(job: ParseJob, before: int, n: int) -> None:
    if job.progress is not None:
        job.progress(before + n)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _pieces(path: Path, read: list[int] | None = None) -> Iterator[bytes]:
    """The file's content in pieces; ``read[0]``: the file's bytes read so far."""
    with path.open("rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            while piece := f.read(PIECE_BYTES):
                if read is not None:
                    read[0] = f.tell()
                yield piece
            return
        f.seek(0)
        for piece in _gunzip(f):
            if read is not None:
                read[0] = f.tell()
            yield piece


def _gunzip(f: Any) -> Iterator[bytes]:
    """gzip members one after another (as gzip.decompress); anything else after the last
    member, or a truncated member, raises GzipError (a CRC error: the zlib error)."""
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
                    raise GzipError("the data ends inside a gzip member")
                return
        if d.eof:  # the next member, or trailing bytes (an error, as gzip.decompress)
            pending += f.read(2) if len(pending) < 2 else b""
            if pending[:2] != b"\x1f\x8b":
                raise GzipError(f"not gzip data after the gzip stream: {pending[:2]!r}")
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
