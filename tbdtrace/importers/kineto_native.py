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
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace.importers import kineto_header
from tbdtrace.importers.kineto_feed import (  # noqa: F401 - part of this module's API
    DECOMPRESS_ERROR,
    ROUTES,
    Declined,
    ParseJob,
    available,
    feed_file,
    start,
)
from tbdtrace.importers.kineto_tables import Staging, assemble


def import_files(
    files: list[Path], job: ParseJob | None = None
) -> tuple[dict[str, dict[str, pa.Array]], dict[str, Any]]:
    """Same contract as :func:`tbdtrace.importers.kineto.import_files`; ``job``: a parse
    of ``files`` already started with :func:`tbdtrace.importers.kineto_feed.start`."""
    job = (job or start(files, background=False)).wait()
    imp = kineto_header.FileHeaders()  # devices and per-file meta, as on the Python path
    segments: list[tuple[kineto_header.FileInfo, list[int]]] = []
    for i, fp in enumerate(job.parsed):
        doc = {} if fp.top_level_list else _header(fp.header)
        info = imp.begin_file(fp.path, doc, i if len(files) > 1 else None)
        imp.skipped.update(fp.skipped)
        imp.end_file(info, fp.events, fp.skipped)
        segments.append((info, fp.rows))
    staging = Staging(job.parser.take(), segments)
    try:
        tables = assemble(staging)
    except (OverflowError, ValueError) as e:  # what the Python path does differently
        raise Declined(str(e)) from e
    devices = imp.t["devices"]
    if len(devices):
        tables["devices"] = devices.arrow_columns()
    return tables, kineto_header.file_meta(imp, files, tables)


def _header(raw: bytes) -> dict[str, Any]:
    """The top-level keys other than traceEvents (the parser kept their JSON text)."""
    doc = json.loads("{" + raw.decode("utf-8", errors="replace") + "}", parse_float=str)
    assert isinstance(doc, dict)
    return doc
