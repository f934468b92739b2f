"""Importers: other profilers' files into tbdtrace tables.

``detect(path)`` names the format of a file from its content; ``import_files(paths)``
returns ``(tables, meta)`` ready for :func:`tbdtrace.trace.write`; ``begin_import(paths)``
does the same in two halves, the parse of Kineto files starting on a background thread
at once (before pyarrow is even loaded) and ``.result()`` giving the tables. Each format
lives in its own module and exposes ``sniff(head: bytes) -> bool`` (its test, kept with the
others in :mod:`tbdtrace.importers.sniff`) and ``import_files(paths)``.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers.sniff import SNIFFERS, lookalike

# Format name -> module (named after the format); detection tries the formats in the
# order of sniff.SNIFFERS, the first whose test accepts the file wins.
FORMATS: dict[str, str] = {fmt: f"tbdtrace.importers.{fmt}" for fmt in SNIFFERS}


HEAD_BYTES = 1 << 16  # what detection reads of a file (decompressed)
SHORT_BYTES = 32  # content shorter than this, matching no format, is "too short"


def _head(path: Path, n: int = HEAD_BYTES) -> bytes:
    """The first ``n`` bytes of the file's content (decompressed when gzipped); an empty,
    truncated or corrupt gzip stream raises TraceError saying which."""
    try:
        with path.open("rb") as f:
            raw = f.read(n)
            if raw[:2] != b"\x1f\x8b":
                return raw
            f.seek(0)
            return _gunzip_head(path, f, n)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror}); check the path") from e


def _gunzip_head(path: Path, f: Any, n: int) -> bytes:
    """The first ``n`` bytes of content, across gzip members (as gzip.decompress reads a
    file of several); inflates no more than that."""
    d = zlib.decompressobj(31)
    out = b""
    try:
        while len(out) < n:
            if d.eof:  # the next member, if any (anything else is the parse's to refuse)
                rest = d.unused_data or f.read(1 << 16)
                if rest[:2] != b"\x1f\x8b":
                    break
                d = zlib.decompressobj(31)
                out += d.decompress(rest, n - len(out))
                continue
            chunk = d.unconsumed_tail or f.read(1 << 16)
            if not chunk:
                raise TraceError(
                    f"{path}: truncated gzip data (the file ends inside the compressed "
                    f"stream, after {len(out):,} bytes of content); copy or export it again"
                )
            out += d.decompress(chunk, n - len(out))
    except zlib.error as e:
        raise TraceError(f"{path}: corrupt gzip data ({e}); copy or export it again") from e
    if not out.strip():
        raise TraceError(f"{path}: empty file (gzip of no content); re-export the trace")
    return out


def _truncated_json(head: bytes) -> bool:
    """All of a JSON document that stops before its end (the file was cut short)."""
    import json

    text = head.decode("utf-8", errors="replace")
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        # Cut inside a string, the error points at its opening quote.
        return e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
    except (ValueError, RecursionError):
        return False
    return False


def detect(path: Path) -> str:
    """The format of ``path`` from its content; TraceError (one line saying what the file
    is: empty, too short, truncated, a trace of another tool...) when none fits."""
    head = _head(path)
    if not head.strip():
        what = "empty file (0 bytes)" if not head else "empty file (only whitespace)"
        raise TraceError(f"{path}: {what}; it holds no trace: re-export it from the profiler")
    for fmt, sniff in SNIFFERS.items():
        if sniff(head):
            return fmt
    like = lookalike(head)
    if like is not None:
        raise TraceError(f"{path}: looks like {like}")
    whole = len(head) < HEAD_BYTES
    if whole and head.lstrip()[:1] in (b"{", b"[") and _truncated_json(head):
        raise TraceError(
            f"{path}: truncated JSON ({len(head):,} bytes, cut before its end); "
            "copy or export it again"
        )
    if whole and len(head.strip()) < SHORT_BYTES:
        raise TraceError(
            f"{path}: only {len(head.strip())} bytes, too short to be a profiler file; "
            "check that the export finished"
        )
    raise TraceError(
        f"{path}: unrecognised file format; supported: {', '.join(FORMATS)} "
        "(use --format to force one)"
    )


def import_files(
    paths: Sequence[str | Path], fmt: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    return begin_import(paths, fmt, background=False).result()


class PendingImport:
    """An import under way: :meth:`result` gives ``(tables, meta)`` in memory,
    :meth:`streamed` the same for :func:`tbdtrace.trace.write` in bounded memory."""

    def __init__(self, files: list[Path], fmt: str, job: Any = None, forced: bool = False):
        self.files, self.fmt, self.job, self.forced = files, fmt, job, forced
        self.taken: list[Any] = []  # batches taken by in_memory_or_none, for streamed()

    def in_memory_or_none(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """:meth:`result` when the input is small enough to hold in memory: a Kineto file
        parsed in batches (``begin_import(..., batch_rows=N)``) whose rows all came in its
        first batch, any other format; None when a Kineto file had more (its import then
        goes on with :meth:`streamed`, the batches taken kept)."""
        if self.fmt != "kineto" or self.job is None or self.job.batches is None:
            return self.result()
        from tbdtrace.importers.kineto import tables

        got = tables.in_memory_or_none(self.files, self.job, self.taken)
        if got is None:
            from tbdtrace.importers.kineto import BATCH_ROWS

            self.job.batch_rows = BATCH_ROWS  # the rest in the streaming import's batches
            return None
        self.job = None
        tables_, meta = got
        meta.setdefault("skipped_events", {})
        self._check_rows(event_rows(tables_), meta)
        return tables_, meta

    def result(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(tables, meta)``; TraceError when the files hold no event of the format (and
        none was skipped for a bad value: those are counted in meta instead)."""
        mod = importlib.import_module(FORMATS[self.fmt])
        kw = {"job": self.job} if self.job is not None else {}
        tables, meta = mod.import_files(self.files, **kw)
        meta.setdefault("skipped_events", {})  # reason -> count (importers/validate.py)
        self._check_rows(event_rows(tables), meta)
        return tables, meta

    def streamed(self, folder: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
        """``(tables, meta, rows per table)``, the tables ready for
        :func:`tbdtrace.trace.write`: for Kineto, a spool in ``folder`` (a private,
        empty working folder the caller removes afterwards) merged while they are written
        (:mod:`tbdtrace.importers.kineto.stream`); other formats in memory."""
        if self.fmt == "nsys":
            return self._nsys(folder)
        if self.fmt != "kineto":
            tables, meta = self.result()
            return tables, meta, {t: n for t in tables if (n := table_rows(tables[t]))}
        from tbdtrace.importers.kineto import stream

        imp = stream.spool_files(self.files, folder, self.job, self.taken)
        self.job, self.taken = None, []
        meta = imp.meta
        meta.setdefault("skipped_events", {})
        rows = imp.rows()
        self._check_rows(sum(n for t, n in rows.items() if t != "devices"), meta)
        return imp.tables(), meta, rows

    def _nsys(self, folder: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
        from tbdtrace import trace
        from tbdtrace.importers import nsys
        from tbdtrace.importers.spool import Merge

        spool, meta, devices = nsys.spool_files(self.files, folder)
        got = spool.rows()
        rows = {n: got[n] for n in nsys.EVENT_TABLES if n in got}
        self._check_rows(sum(rows.values()), meta)
        tables: dict[str, Any] = {
            n: trace.Streamed(sp.decl.arrow_schema(), lambda sp=sp: Merge(sp).batches())
            for n, sp in spool.tables.items()
            if sp.rows
        }
        if devices is not None:
            tables["devices"] = devices
            rows["devices"] = table_rows(devices)
        return tables, meta, rows

    def _check_rows(self, rows: int, meta: dict[str, Any]) -> None:
        if rows or meta["skipped_events"]:
            return
        names = ", ".join(map(str, self.files))
        how = "read as --format" if self.forced else "detected as"
        raise TraceError(
            f"{names}: no {self.fmt} events found ({how} {self.fmt}); "
            + (
                "is it that format? try without --format"
                if self.forced
                else "the profile recorded nothing tbdtrace imports: profile again"
            )
        )


def table_rows(cols: Any) -> int:
    """Rows of one table of an importer's result (an Arrow table or columns)."""
    if hasattr(cols, "num_rows"):
        return int(cols.num_rows)
    return max((len(v) for v in cols.values()), default=0)


def event_rows(tables: dict[str, Any]) -> int:
    """Rows of the event tables (all but ``devices``) of an importer's result."""
    return sum(table_rows(cols) for name, cols in tables.items() if name != "devices")


def begin_import(
    paths: Sequence[str | Path],
    fmt: str | None = None,
    background: bool = True,
    streamed: bool = False,
    batch_rows: int = 0,
) -> PendingImport:
    """Check the files and name their format; Kineto files start parsing on a thread
    (``streamed``: in batches, for :meth:`PendingImport.streamed`; ``batch_rows``: the
    first batch's rows, for :meth:`PendingImport.in_memory_or_none`)."""
    files = [Path(p) for p in paths]
    for p in files:
        if not p.is_file():
            raise TraceError(f"{p}: no such file; check the path")
    forced = fmt is not None
    if fmt is None:
        kinds = {detect(p) for p in files}
        if len(kinds) > 1:
            raise TraceError(
                f"{', '.join(map(str, files))}: files of different formats ({', '.join(kinds)}); "
                "import them separately"
            )
        fmt = kinds.pop()
    if fmt not in FORMATS:
        raise TraceError(f"unknown format {fmt!r}; supported: {', '.join(FORMATS)}")
    job = None
    if fmt == "kineto" and background:
        from tbdtrace.importers import kineto

        if kineto.available():
            rows = batch_rows or (kineto.BATCH_ROWS if streamed else 0)
            job = kineto.start(files, batch_rows=rows)
    return PendingImport(files, fmt, job, forced)
