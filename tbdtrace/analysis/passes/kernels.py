"""Kernel time by kernel name, with the statistics of nsys stats' cuda_gpu_kern_sum."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import outputs, shared_arrays
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.context import Source, of

SCHEMA = outputs.KERNELS.arrow_schema()  # declared in analysis/engine/outputs.py


STATS: Entry[pa.Table] = Entry("kernels.stats", "the kernels pass's table")


def run(ctx: Source, config: None = None) -> pa.Table:
    """One row per kernel name, sorted by total_ns descending (ties by name).

    Columns: name; count; total_ns, mean_ns, median_ns, min_ns, max_ns, std_ns (ns; std is
    the sample standard deviation, n-1, 0 for a single instance, as nsys reports it);
    share = total_ns / sum of all kernel durations (ratio 0..1).
    """
    ctx = of(ctx)

    def compute() -> pa.Table:
        codes, labels = shared_arrays.codes(ctx, "kernels", "name")
        return stats(codes, labels, shared_arrays.durations(ctx, "kernels"))

    return ctx.cache.get(STATS, compute)


# Above this many distinct names, one sort of packed (name, duration) keys beats a
# partition per name.
_PARTITION_MAX_GROUPS = 4096


def stats(codes: np.ndarray, labels: list[str | None], dur: np.ndarray) -> pa.Table:
    """The per-name table of :func:`run` from name codes and durations (ns)."""
    if dur.size == 0:
        return SCHEMA.empty_table()
    counts = np.bincount(codes, minlength=len(labels))
    present = np.flatnonzero(counts)
    if present.size > _PARTITION_MAX_GROUPS:
        cols = _sorted_stats(codes, dur)
    else:
        cols = _partition_stats(codes, dur, counts, present)
    totals = cols["total_ns"]
    grand = int(totals.sum())
    names = [labels[i] if labels[i] is not None else "<unknown>" for i in cols["code"]]
    out = pa.table(
        {
            "name": names,
            "count": cols["count"],
            "total_ns": totals,
            "mean_ns": cols["mean_ns"],
            "median_ns": cols["median_ns"],
            "min_ns": cols["min_ns"],
            "max_ns": cols["max_ns"],
            "std_ns": cols["std_ns"],
            "share": totals / grand if grand else np.zeros(len(names)),
        },
        schema=SCHEMA,
    )
    idx = sorted(range(out.num_rows), key=lambda i: (-int(totals[i]), names[i]))
    return out.take(pa.array(idx, type=pa.int64()))


def _partition_stats(
    codes: np.ndarray, dur: np.ndarray, counts: np.ndarray, present: np.ndarray
) -> dict[str, np.ndarray]:
    """Group rows by name (Arrow's counting sort), then per name: sums by reduceat and
    the median by partitioning that name's durations in place (linear time overall)."""
    order = pc.array_sort_indices(pa.array(codes, type=pa.int32())).to_numpy()
    d = dur[order]
    del order
    c = counts[present]
    starts = np.concatenate([[0], np.cumsum(c)[:-1]])
    totals = np.add.reduceat(d, starts)
    mins = np.minimum.reduceat(d, starts)
    maxs = np.maximum.reduceat(d, starts)
    means = totals / c
    medians = np.empty(c.size)
    for i, (a, n) in enumerate(zip(starts.tolist(), c.tolist(), strict=True)):
        seg = d[a : a + n]
        lo = (n - 1) // 2
        seg.partition(lo)
        # An even count's upper middle value: the least of the values above the lower
        # one (one pass, not a second selection).
        upper = seg[lo] if n % 2 else seg[lo + 1 :].min()
        medians[i] = (seg[lo] + upper) / 2.0
    std = _std_of_groups(d, starts, c, totals)
    return {
        "code": present,
        "count": c.astype(np.int64),
        "total_ns": totals.astype(np.int64),
        "mean_ns": means,
        "median_ns": medians,
        "min_ns": mins,
        "max_ns": maxs,
        "std_ns": std,
    }


# Rows per batch of names whose moments are summed together (each name's own rows at
# least): the temporaries stay a few MB at 10M kernels.
_STD_BATCH_ROWS = 1 << 20


def _std_of_groups(
    d: np.ndarray, starts: np.ndarray, counts: np.ndarray, totals: np.ndarray
) -> np.ndarray:
    """:func:`_std_exact` of each group ``d[starts[i] : starts[i] + counts[i]]`` (its sum
    ``totals[i]``), the moments of many small groups summed by one ``reduceat`` per batch
    of rows rather than by a pass per group; the same integers, the same floats."""
    std = np.zeros(counts.size)
    ends = starts + counts
    i = 0
    while i < counts.size:
        j = max(i + 1, int(np.searchsorted(ends, starts[i] + _STD_BATCH_ROWS, side="right")))
        a0 = int(starts[i])
        seg = d[a0 : int(ends[j - 1])]
        at = starts[i:j] - a0
        n_of = counts[i:j]
        dev = seg - np.repeat(totals[i:j] // n_of, n_of)
        wide = np.maximum.reduceat(np.abs(dev), at) >= 1 << 31
        sq = (dev * dev).astype(np.uint64)  # wraps only in a wide group, not used
        high = np.add.reduceat(sq >> np.uint64(32), at).tolist()
        sq &= np.uint64(0xFFFFFFFF)
        low = np.add.reduceat(sq, at).tolist()
        s1_of = np.add.reduceat(dev, at).tolist()
        del dev, sq
        for k, n in enumerate(n_of.tolist()):
            if n < 2:
                continue
            if wide[k]:
                g = int(starts[i + k])
                std[i + k] = _std_exact(d[g : g + n], int(totals[i + k]))
                continue
            s2, s1 = (high[k] << 32) + low[k], s1_of[k]
            std[i + k] = float(np.sqrt((n * s2 - s1 * s1) / (n * (n - 1))))
        i = j
    return std


def _std_exact(seg: np.ndarray, total: int) -> float:
    """Sample standard deviation of the int64 durations ``seg`` from exact integer
    moments, so the result does not depend on the order of the rows (a trace directory
    and the same import in memory hold them in different orders; their reports must be
    bit-identical). Deviations from an integer mean keep the squares in 64 bits; sums of
    their high and low 32-bit halves are exact. Durations over 2**31 ns from the mean
    fall back to a sorted float sum."""
    n = seg.size
    dev = seg - total // n
    if int(np.abs(dev).max()) >= 1 << 31:
        srt = np.sort(seg).astype(np.float64)
        return float(np.sqrt(((srt - total / n) ** 2).sum() / (n - 1)))
    sq = (dev * dev).astype(np.uint64)
    s2 = (int((sq >> np.uint64(32)).sum()) << 32) + int((sq & np.uint64(0xFFFFFFFF)).sum())
    s1 = int(dev.sum())
    return float(np.sqrt((n * s2 - s1 * s1) / (n * (n - 1))))


def _sorted_stats(codes: np.ndarray, dur: np.ndarray) -> dict[str, np.ndarray]:
    c, d = _sorted_by_code_then_duration(codes.astype(np.int64), dur)
    bounds = np.flatnonzero(np.diff(c)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [c.size]])
    counts = ends - starts
    totals = np.add.reduceat(d, starts)
    lo = starts + (counts - 1) // 2
    hi = starts + counts // 2
    means = totals / counts
    sq = np.add.reduceat((d.astype(np.float64) - np.repeat(means, counts)) ** 2, starts)
    std = np.where(counts > 1, np.sqrt(sq / np.maximum(counts - 1, 1)), 0.0)
    return {
        "code": c[starts],
        "count": counts.astype(np.int64),
        "total_ns": totals.astype(np.int64),
        "mean_ns": means,
        "median_ns": (d[lo] + d[hi]) / 2.0,
        "min_ns": d[starts],
        "max_ns": d[ends - 1],
        "std_ns": std,
    }


_DUR_BITS = 40  # durations below 2**40 ns (18 minutes) pack beside the name code


def _sorted_by_code_then_duration(
    codes: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(codes, durations) sorted by code, then duration.

    One np.sort of a packed int64 key is several times faster than lexsort on 10M rows;
    rows that do not pack (negative or very long durations, many names) use lexsort.
    """
    if (
        dur.size
        and dur.min() >= 0
        and dur.max() < (1 << _DUR_BITS)
        and codes.max() < (1 << (62 - _DUR_BITS))
    ):
        key = np.sort((codes << _DUR_BITS) | dur)
        return key >> _DUR_BITS, key & ((1 << _DUR_BITS) - 1)
    order = np.lexsort((dur, codes))
    return codes[order], dur[order]
