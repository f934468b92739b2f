"""The kernels pass's per-name statistics against a brute-force computation per name."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction

import numpy as np
import pytest

from tbdtrace.analysis.passes import kernels


@pytest.mark.parametrize("batch_rows", [1 << 20, 50, 1])
def test_partition_stats_equal_each_names_own_statistics(
    monkeypatch: pytest.MonkeyPatch, batch_rows: int
) -> None:
    """Count, total, min, max, median and the sample standard deviation of each name,
    many names' moments summed in one batch or one name at a time: equal to the exact
    rational variance's square root (wide durations: a float sum, to 1e-12)."""
    monkeypatch.setattr(kernels, "_STD_BATCH_ROWS", batch_rows)
    rng = np.random.default_rng(7)
    sizes = [1, 2, 3, 40, 1, 500, 7, 2000, 1, 64]
    codes = np.repeat(np.arange(len(sizes)), sizes)
    dur = rng.integers(0, 5_000_000, codes.size).astype(np.int64)
    wide = codes == 6  # deviations over 2**31 ns: the float fallback
    dur[wide] = rng.integers(0, 1 << 40, int(wide.sum()))
    perm = rng.permutation(codes.size)
    codes, dur = codes[perm], dur[perm]
    counts = np.bincount(codes)
    present = np.flatnonzero(counts)
    got = kernels._partition_stats(codes, dur.copy(), counts, present)
    for i, code in enumerate(got["code"].tolist()):
        xs = sorted(dur[codes == code].tolist())
        n = len(xs)
        assert got["count"][i] == n
        assert got["total_ns"][i] == sum(xs)
        assert (got["min_ns"][i], got["max_ns"][i]) == (xs[0], xs[-1])
        assert got["median_ns"][i] == (xs[(n - 1) // 2] + xs[n // 2]) / 2
        if n == 1:
            assert got["std_ns"][i] == 0.0
            continue
        mean = Fraction(sum(xs), n)
        var = sum((Fraction(x) - mean) ** 2 for x in xs) / (n - 1)
        if code == 6:
            assert got["std_ns"][i] == pytest.approx(statistics.stdev(xs), rel=1e-12)
        else:
            assert got["std_ns"][i] == math.sqrt(var)
