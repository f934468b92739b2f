"""Kineto import through the C++ parser (``csrc/kineto``, ``tbdtrace._native.KinetoParser``).

Each file is read in pieces (gzip decompressed on a second thread while the parser, which
releases the GIL, works on the previous piece) and fed to one parser, which appends every
event's fields to typed staging columns and interns strings into one dictionary. Peak
memory is set by the rows, not the file: the parser holds one piece plus one event of
JSON. This module then turns the staging columns into the tables of
:mod:`tbdtrace.importers.kineto` without a Python object per row: each file's time base
and rank are applied to its rows, steps are found among the markers, and
names are mapped to enums once per distinct string. The result equals the Python path's
(``tests/importers/test_kineto_native.py`` checks it on every fixture).

A file the parser declines (invalid JSON, which the Python path repairs or reports; a
value whose Python behaviour it does not reproduce) raises :class:`Declined`, and
``kineto.import_files`` reads it with the Python path.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

from tbdtrace.importers import kineto

try:
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is in requirements; zlib is the same API
    import zlib as _zlib  # type: ignore[no-redef]
_DECOMPRESS_ERROR = cast(type[Exception], _zlib.error)

try:
    from tbdtrace import _native
except ImportError:  # pragma: no cover - the extension is built by `make native`
    _native = None  # type: ignore[assignment]

READ_BYTES = 1 << 18  # compressed bytes read at a time
PIECE_BYTES = 1 << 20  # most decompressed bytes handed to the parser at a time
PREFETCH_PIECES = 2  # pieces decompressed ahead of the parser

# Category -> staging table of "X" events (the Route enum of csrc/kineto/columns.h).
_ROUTE_IDS = {
    "kernels": 0,
    "memcpy": 1,
    "memset": 2,
    "runtime": 3,
    "sync": 4,
    "ops": 5,
    "markers": 6,
}
ROUTES = sorted(
    [(c, _ROUTE_IDS["kernels"]) for c in kineto.KERNEL_CATS]
    + [(c, _ROUTE_IDS["memcpy"]) for c in kineto.MEMCPY_CATS]
    + [(c, _ROUTE_IDS["memset"]) for c in kineto.MEMSET_CATS]
    + [(c, _ROUTE_IDS["runtime"]) for c in kineto.RUNTIME_CATS | kineto.DRIVER_CATS]
    + [(c, _ROUTE_IDS["sync"]) for c in kineto.SYNC_CATS]
    + [(c, _ROUTE_IDS["ops"]) for c in kineto.OP_CATS]
    + [(c, _ROUTE_IDS["markers"]) for c in kineto.ANNOTATION_CATS]
)


class Declined(Exception):
    """The native parser does not take this file; the Python path reads it instead."""


def available() -> bool:
    return _native is not None and hasattr(_native, "KinetoParser")


def import_files(files: list[Path]) -> tuple[dict[str, dict[str, pa.Array]], dict[str, Any]]:
    """Same contract as :func:`tbdtrace.importers.kineto.import_files`."""
    if not available():
        raise Declined("tbdtrace._native has no Kineto parser (run `make native`)")
    from tbdtrace.importers.kineto_tables import Staging, assemble

    parser = _native.KinetoParser(ROUTES)
    imp = kineto.KinetoImporter()  # devices and per-file meta, as on the Python path
    segments: list[tuple[kineto.FileInfo, list[int]]] = []
    for i, path in enumerate(files):
        parser.begin_file()
        before = parser.rows()
        try:
            feed_file(parser, path)
        except (ValueError, OSError, EOFError, _DECOMPRESS_ERROR) as e:  # KinetoError: ValueError
            raise Declined(f"{path}: {e}") from e
        doc = {} if parser.top_level_list else _header(parser.header())
        info = imp.begin_file(path, doc, i if len(files) > 1 else None)
        imp.end_file(info, parser.events)
        segments.append((info, [b - a for a, b in zip(before, parser.rows(), strict=True)]))
    staging = Staging(parser.take(), segments)
    try:
        tables = assemble(staging)
    except (OverflowError, ValueError) as e:  # what the Python path does differently
        raise Declined(str(e)) from e
    devices = imp.t["devices"]
    if len(devices):
        tables["devices"] = devices.arrow_columns()
    return tables, kineto.file_meta(imp, files, tables)


def _header(raw: bytes) -> dict[str, Any]:
    """The top-level keys other than traceEvents (the parser kept their JSON text)."""
    doc = json.loads("{" + raw.decode("utf-8", errors="replace") + "}", parse_float=str)
    assert isinstance(doc, dict)
    return doc


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
