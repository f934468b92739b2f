"""Kernel time by category (gemm, conv, elementwise, ...): from the launching op, the
kernel's own name, else ``other``.

Two data tables, both regular expressions searched case-insensitively:

* ``data/kernel_categories.csv``: (category, kind, pattern) rows in priority order,
  matched against the kernel's *function name* only (:mod:`._kernel_names`: template
  and parameter lists, return type and ``(anonymous namespace)`` removed). ``kind`` is
  ``name`` for patterns that name a kernel family (``nvjet_``, ``ncclDevKernel``,
  ATen's ``vectorized_elementwise_kernel``) and ``hint`` for generic words (``add``,
  ``copy``, ``index``) that only suggest a category.
* ``data/op_categories.csv``: (category, pattern) rows for launching ops
  (``aten::addmm`` gemm, ``aten::convolution`` conv, ``nccl:all_reduce`` communication).

A kernel's category: its name's category when a ``name`` row matches (an elementwise
bias-add launched by ``aten::linear`` stays elementwise); else the category of the op
that launched it (the innermost op, :mod:`.attribution`) when that op is in the op
table; else its name's ``hint`` category; else ``other``. Names and ops are classified
once per distinct label and the launching op is looked up only when some kernel's name
is not decisive, so the cost grows with distinct names, not kernels.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import categories as vocab
from tbdtrace.analysis.engine import outputs, shared_arrays
from tbdtrace.analysis.engine.categories import (
    BY_NAME,
    BY_NONE,
    BY_OP,
    CAT_INDEX,
    CATEGORIES,
    OTHER,
    _lut,
    _op_path,
    kernel_codes,
)
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.passes import kernels

SCHEMA = outputs.CATEGORIES.arrow_schema()  # declared in analysis/engine/outputs.py

# Kept for code written before the classification moved to the engine
# (engine/categories.py).
classify = vocab.classify
kernel_categories = vocab.kernel_categories
name_categories = vocab.name_categories
other_share = vocab.other_share


def run(ctx: Source, config: None = None) -> pa.Table:
    """Device time by category, one row per category with any time, largest first.

    Kernels are classified as the module docstring says; rows of the memcpy and memset
    tables count as ``memcpy`` and ``memset``. Columns: category; count (rows); total_ns
    (sum of durations, ns); share = total_ns / sum over all categories (ratio 0..1);
    by_op_ns and by_name_ns: the part of total_ns whose category came from the launching
    op and from the kernel's name (the rest: ``other``, and memcpy/memset table rows).
    """
    ctx = of(ctx)
    n = len(CATEGORIES)
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros((n, 3), dtype=np.int64)
    if _op_path(ctx) is None:
        # From the per-name table (shared with the kernels pass): no pass over the rows.
        per_name = kernels.run(ctx)
        cat, _ = _lut(per_name.column("name").to_pylist())
        src = np.where(cat == OTHER, BY_NONE, BY_NAME)
        np.add.at(count, cat, per_name.column("count").to_numpy())
        np.add.at(total, (cat, src), per_name.column("total_ns").to_numpy())
    else:
        kc = kernel_codes(ctx)
        dur = shared_arrays.durations(ctx, "kernels")
        count += np.bincount(kc.code, minlength=n)
        key = kc.code.astype(np.int64) * 3 + kc.source
        # float64 sums of int64 durations are exact below 2**53 ns (104 days).
        total += (
            np.rint(np.bincount(key, weights=dur, minlength=3 * n)).astype(np.int64).reshape(n, 3)
        )
    for table, c in (("memcpy", "memcpy"), ("memset", "memset")):
        d = shared_arrays.durations(ctx, table)
        count[CAT_INDEX[c]] += d.size
        total[CAT_INDEX[c], BY_NONE] += int(d.sum())
    return _table(count, total)


def _table(count: npt.NDArray[np.int64], total: npt.NDArray[np.int64]) -> pa.Table:
    per = total.sum(axis=1)
    grand = int(per.sum())
    keep = [i for i in range(len(CATEGORIES)) if count[i] > 0]
    keep.sort(key=lambda i: (-int(per[i]), i))
    return pa.table(
        {
            "category": [CATEGORIES[i] for i in keep],
            "count": [int(count[i]) for i in keep],
            "total_ns": [int(per[i]) for i in keep],
            "share": [int(per[i]) / grand if grand else 0.0 for i in keep],
            "by_op_ns": [int(total[i, BY_OP]) for i in keep],
            "by_name_ns": [int(total[i, BY_NAME]) for i in keep],
        },
        schema=SCHEMA,
    )
