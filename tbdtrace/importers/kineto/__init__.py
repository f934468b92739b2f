"""Import PyTorch profiler (Kineto) Chrome-trace JSON into tbdtrace tables.

Handles current and pre-1.10 category names (kernel/Kernel, gpu_memcpy/Memcpy,
gpu_memset/Memset, cuda_runtime/Runtime, cpu_op/Operator), ROCm traces, CPU-only traces,
traces without distributedInfo, ``baseTimeNanoseconds`` (newer Kineto writes times
relative to it) and sub-microsecond timestamps.

Times: Kineto writes microseconds, as integers or decimals. They are converted from the
decimal *text* to integer nanoseconds (no float in between), so ``ts`` 1.5 is exactly
1500 ns. Digits finer than 1 ns are rounded half to even.

Modules: :mod:`.vocab` (categories, routes, name patterns), :mod:`.header` (what a file's
top-level keys say), :mod:`.feed` (the C++ parser, ``csrc/kineto``, fed on a thread),
:mod:`.tables` (its staging columns -> tables), :mod:`.repair` (damaged JSON). This module
loads neither pyarrow nor numpy: :func:`start` can begin a parse before they are imported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.importers import sniff as _sniff
from tbdtrace.importers.kineto.feed import Declined, ParseJob, available, start

__all__ = ["Declined", "ParseJob", "available", "import_files", "sniff", "start"]

log = logging.getLogger(__name__)


def import_files(
    paths: Sequence[str | Path], parser: str = "auto", job: Any = None
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Read Kineto files; returns (tables as mappings of Arrow columns, meta) for trace.write.

    Several files (one per rank) become one trace; each row keeps its file's rank
    (distributedInfo.rank, else the file's position in ``paths``). Columns that are null
    in every row are left out, as are tables without rows.

    ``parser``: "auto" reads with the C++ parser (:mod:`.tables`) and falls back to the
    Python one for a file it declines (damaged JSON to repair or to report, values it does
    not reproduce); "native" raises :class:`Declined` instead; "python" skips it.
    ``job``: the native parse of ``paths`` already started (:func:`start`).
    """
    files = [Path(p) for p in paths]
    if parser not in ("auto", "native", "python"):
        raise ValueError(f"parser must be auto, native or python, not {parser!r}")
    if parser != "python":
        from tbdtrace.importers.kineto import tables

        try:
            return tables.import_files(files, job)
        except Declined as e:
            if parser == "native":
                raise
            log.debug("native Kineto parser declined (%s); using the Python parser", e)
    from tbdtrace.importers.kineto import python_rows

    return python_rows.import_files(files)


sniff = _sniff.kineto  # the format test (tbdtrace.importers.sniff)
