"""Kernel time by kernel name, with the statistics of nsys stats' cuda_gpu_kern_sum."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.passes._util import dict_codes, int_column
from tbdtrace.trace import Trace

SCHEMA = pa.schema([
    ("name", pa.string()), ("count", pa.int64()), ("total_ns", pa.int64()),
    ("mean_ns", pa.float64()), ("median_ns", pa.float64()), ("min_ns", pa.int64()),
    ("max_ns", pa.int64()), ("std_ns", pa.float64()), ("share", pa.float64()),
])


def run(trace: Trace, config: Any = None) -> pa.Table:
    """One row per kernel name, sorted by total_ns descending (ties by name).

    Columns: name; count; total_ns, mean_ns, median_ns, min_ns, max_ns, std_ns (ns; std is
    the sample standard deviation, n-1, 0 for a single instance, as nsys reports it);
    share = total_ns / sum of all kernel durations (ratio 0..1).
    """
    tbl = trace.table("kernels", ["start_ns", "end_ns", "name"])
    return by_name(tbl)


def by_name(tbl: pa.Table) -> pa.Table:
    if tbl.num_rows == 0:
        return SCHEMA.empty_table()
    dur = int_column(tbl, "end_ns") - int_column(tbl, "start_ns")
    codes, labels = dict_codes(tbl, "name")
    c, d = _sorted_by_code_then_duration(codes, dur)
    bounds = np.flatnonzero(np.diff(c)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [c.size]])
    counts = ends - starts
    totals = np.add.reduceat(d, starts)
    mins, maxs = d[starts], d[ends - 1]
    lo = starts + (counts - 1) // 2
    hi = starts + counts // 2
    medians = (d[lo] + d[hi]) / 2.0
    means = totals / counts
    sq = np.add.reduceat((d.astype(np.float64) - np.repeat(means, counts)) ** 2, starts)
    std = np.where(counts > 1, np.sqrt(sq / np.maximum(counts - 1, 1)), 0.0)
    grand = int(d.sum())
    names = [labels[i] if labels[i] is not None else "<unknown>" for i in c[starts]]
    out = pa.table({
        "name": names, "count": counts.astype(np.int64), "total_ns": totals.astype(np.int64),
        "mean_ns": means, "median_ns": medians, "min_ns": mins, "max_ns": maxs,
        "std_ns": std, "share": totals / grand if grand else np.zeros(len(names)),
    }, schema=SCHEMA)
    idx = sorted(range(out.num_rows), key=lambda i: (-int(totals[i]), names[i]))
    return out.take(pa.array(idx, type=pa.int64()))


_DUR_BITS = 40  # durations below 2**40 ns (18 minutes) pack beside the name code


def _sorted_by_code_then_duration(
    codes: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(codes, durations) sorted by code, then duration.

    One np.sort of a packed int64 key is several times faster than lexsort on 10M rows;
    rows that do not pack (negative or very long durations, many names) use lexsort.
    """
    if dur.size and dur.min() >= 0 and dur.max() < (1 << _DUR_BITS) and \
            codes.max() < (1 << (62 - _DUR_BITS)):
        key = np.sort((codes << _DUR_BITS) | dur)
        return key >> _DUR_BITS, key & ((1 << _DUR_BITS) - 1)
    order = np.lexsort((dur, codes))
    return codes[order], dur[order]
