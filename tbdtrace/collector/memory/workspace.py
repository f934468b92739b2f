"""Workspace: blocks allocated and freed inside one framework operator.

A block is workspace when some ``ops`` row on the same thread, of an operator category
(``cpu_op``: aten ops and autograd engine functions; not ``python_function`` or user
annotations, which can span a whole step), starts at or before the alloc and ends at or
after the free. cuBLAS/cuDNN workspaces and an op's internal temporaries fall here; a
tensor that outlives the op that made it does not.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine.grouping import dict_codes
from tbdtrace.analysis.engine.memory_blocks import INT64_MAX, INT64_MIN, Blocks
from tbdtrace.arrow_ints import int_column

OP_CATEGORIES = frozenset({"cpu_op", "Operator"})


def _op_windows(ops: pa.Table) -> dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Per thread: op starts (sorted) and the running maximum of their ends."""
    codes, labels = dict_codes(ops, "category")
    keep = np.array([lbl in OP_CATEGORIES for lbl in labels], dtype=bool)
    sel = keep[codes] if codes.size else np.zeros(0, dtype=bool)
    tid = int_column(ops, "tid", -1)[sel]
    start = int_column(ops, "start_ns", 0)[sel]
    end = int_column(ops, "end_ns", 0)[sel]
    out = {}
    for t in np.unique(tid):
        m = tid == t
        order = np.argsort(start[m], kind="stable")
        out[int(t)] = (start[m][order], np.maximum.accumulate(end[m][order]))
    return out


def inside_one_op(mem: pa.Table, blocks: Blocks, ops: pa.Table) -> npt.NDArray[np.bool_]:
    """For each block: True when one operator on its thread spans its whole life.

    Since ops on a thread nest, an op covering [alloc, free] exists exactly when the
    largest end among ops starting at or before the alloc reaches the free.
    """
    out = np.zeros(len(blocks), dtype=bool)
    if not len(blocks) or not ops.num_rows:
        return out
    windows = _op_windows(ops)
    tid = int_column(mem, "tid", -1)
    closed = (
        (blocks.alloc_ts_ns != INT64_MIN)
        & (blocks.free_ts_ns != INT64_MAX)
        & (blocks.alloc_row >= 0)
    )
    for b in np.flatnonzero(closed):
        w = windows.get(int(tid[blocks.alloc_row[b]]))
        if w is None:
            continue
        i = int(np.searchsorted(w[0], blocks.alloc_ts_ns[b], side="right")) - 1
        out[b] = i >= 0 and w[1][i] >= blocks.free_ts_ns[b]
    return out
