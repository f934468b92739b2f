"""Importers: other profilers' files into tbdtrace tables.

``detect(path)`` names the format of a file from its content; ``import_files(paths)``
returns ``(tables, meta)`` ready for :func:`tbdtrace.trace.write`; ``begin_import(paths)``
does the same in two halves, the parse of Kineto files starting on a background thread
at once (before pyarrow is even loaded) and ``.result()`` giving the tables. Each format
lives in its own module and exposes ``sniff(head: bytes) -> bool`` (its test, kept with the
others in :mod:`tbdtrace.importers.sniff`) and ``import_files(paths)``.
"""

from __future__ import annotations

import gzip
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers.sniff import SNIFFERS

# Format name -> module (named after the format); detection tries the formats in the
# order of sniff.SNIFFERS, the first whose test accepts the file wins.
FORMATS: dict[str, str] = {fmt: f"tbdtrace.importers.{fmt}" for fmt in SNIFFERS}


def _head(path: Path, n: int = 1 << 16) -> bytes:
    try:
        with path.open("rb") as f:
            raw = f.read(n)
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as g:
                try:
                    return g.read(n)
                except (OSError, EOFError):
                    return b""
        return raw
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror}); check the path") from e


def detect(path: Path) -> str:
    head = _head(path)
    for fmt, sniff in SNIFFERS.items():
        if sniff(head):
            return fmt
    raise TraceError(
        f"{path}: unrecognised file format; supported: {', '.join(FORMATS)} "
        "(use --format to force one)"
    )


def import_files(
    paths: Sequence[str | Path], fmt: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    return begin_import(paths, fmt, background=False).result()


class PendingImport:
    """An import under way: :meth:`result` gives ``(tables, meta)``."""

    def __init__(self, files: list[Path], fmt: str, job: Any = None):
        self.files, self.fmt, self.job = files, fmt, job

    def result(self) -> tuple[dict[str, Any], dict[str, Any]]:
        mod = importlib.import_module(FORMATS[self.fmt])
        kw = {"job": self.job} if self.job is not None else {}
        tables, meta = mod.import_files(self.files, **kw)
        meta.setdefault("skipped_events", {})  # reason -> count (importers/validate.py)
        return tables, meta


def begin_import(
    paths: Sequence[str | Path], fmt: str | None = None, background: bool = True
) -> PendingImport:
    """Check the files and name their format; Kineto files start parsing on a thread."""
    files = [Path(p) for p in paths]
    for p in files:
        if not p.is_file():
            raise TraceError(f"{p}: no such file; check the path")
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
        from tbdtrace.importers import kineto_feed

        if kineto_feed.available():
            job = kineto_feed.start(files)
    return PendingImport(files, fmt, job)
