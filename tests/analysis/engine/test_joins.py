"""join_pairs: the first equal (hi, lo) pair of b for each pair of a, on every path."""

from __future__ import annotations

import numpy as np
import pytest

from tbdtrace.analysis.engine import joins
from tbdtrace.analysis.engine.joins import NULL_ID, join_pairs


def _first(a_hi: np.ndarray, a_lo: np.ndarray, b_hi: np.ndarray, b_lo: np.ndarray) -> list[int]:
    """The expected rows, by a loop over b (the first row with the same pair)."""
    first: dict[tuple[int, int], int] = {}
    for j, (h, lo) in enumerate(zip(b_hi.tolist(), b_lo.tolist(), strict=True)):
        if lo != NULL_ID:
            first.setdefault((h, lo), j)
    return [
        -1 if lo == NULL_ID else first.get((h, lo), -1)
        for h, lo in zip(a_hi.tolist(), a_lo.tolist(), strict=True)
    ]


@pytest.mark.parametrize("seed", range(40))
def test_join_pairs_gives_the_first_equal_pair(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nb, na, ranks = int(rng.integers(1, 300)), int(rng.integers(1, 300)), int(rng.integers(1, 4))
    b_hi = rng.integers(-1, ranks, nb)
    if seed % 2:  # dense ids (correlation ids): the lookup-table path
        b_lo = rng.permutation(nb) + int(rng.integers(0, 50))
        if seed % 4 == 1:
            b_lo[rng.integers(0, nb, 5)] = b_lo[0]  # repeated ids: the first row wins
    else:  # sparse ids: the sort
        b_lo = rng.integers(0, 10 * nb + 5000, nb)
    b_lo[rng.random(nb) < 0.1] = NULL_ID
    a_hi = rng.integers(-1, ranks + 1, na)
    a_lo = np.concatenate([rng.choice(b_lo, na // 2), rng.integers(-5, nb + 60, na - na // 2)])
    a_lo[rng.random(na) < 0.1] = NULL_ID
    assert join_pairs(a_hi, a_lo, b_hi, b_lo).tolist() == _first(a_hi, a_lo, b_hi, b_lo)


def test_dense_path_taken_for_consecutive_ids_and_refused_for_sparse_ones() -> None:
    b_lo = np.arange(1000, dtype=np.int64)
    b_hi = np.zeros(1000, np.int64)
    ok = b_lo >= 0
    got = joins._dense_pairs(b_hi[:10], b_lo[:10], ok[:10], b_hi, b_lo, ok)
    assert got is not None and got.tolist() == list(range(10))
    # Too sparse for a table of ~4 keys per row: the caller sorts.
    assert joins._dense_pairs(b_hi, b_lo, ok, b_hi, b_lo * 100, ok) is None
