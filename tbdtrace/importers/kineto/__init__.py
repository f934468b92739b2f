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
:mod:`.tables` (its staging columns -> tables), :mod:`.repair` (damaged files). The C++
parser is the one implementation of the events' meaning; tests/rawkineto.py, which shares
no code with it, is the tests' oracle. This module
loads neither pyarrow nor numpy: :func:`start` can begin a parse before they are imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.importers import sniff as _sniff
from tbdtrace.importers.kineto.feed import BATCH_ROWS, ParseJob, available, start

__all__ = ["BATCH_ROWS", "ParseJob", "available", "import_files", "sniff", "start"]


def import_files(
    paths: Sequence[str | Path], job: ParseJob | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Read Kineto files; returns (tables as mappings of Arrow columns, meta) for trace.write.

    Several files (one per rank) become one trace; each row keeps its file's rank
    (distributedInfo.rank, else the file's position in ``paths``). Columns that are null
    in every row are left out, as are tables without rows. The C++ parser reads every
    file; a damaged one is repaired and read again, or reported in one line (TraceError).

    ``job``: the parse of ``paths`` already started (:func:`start`).
    """
    from tbdtrace.importers.kineto import tables

    return tables.import_files([Path(p) for p in paths], job)


sniff = _sniff.kineto  # the format test (tbdtrace.importers.sniff)
