"""The pair join (engine/joins.py): the first equal (hi, lo) pair, nulls never matching."""

from __future__ import annotations

import numpy as np

from tbdtrace.analysis.engine.joins import NULL_ID, join_pairs


def _first_pairs(a_hi, a_lo, b_hi, b_lo) -> list[int]:
    """The reference: a dict of each pair's first row, built by a loop."""
    first: dict[tuple[int, int], int] = {}
    for j, (h, lo) in enumerate(zip(b_hi.tolist(), b_lo.tolist(), strict=True)):
        if lo != NULL_ID:
            first.setdefault((h, lo), j)
    return [
        -1 if lo == NULL_ID else first.get((h, lo), -1)
        for h, lo in zip(a_hi.tolist(), a_lo.tolist(), strict=True)
    ]


def test_first_equal_pair_with_nulls_on_both_sides() -> None:
    rng = np.random.default_rng(11)
    b_hi, b_lo = rng.integers(-1, 3, 400), rng.integers(0, 60, 400)  # repeated pairs
    a_hi, a_lo = rng.integers(-1, 4, 700), rng.integers(0, 80, 700)
    a_lo[::5] = NULL_ID
    b_lo[::3] = NULL_ID
    got = join_pairs(a_hi, a_lo, b_hi, b_lo)
    assert got.tolist() == _first_pairs(a_hi, a_lo, b_hi, b_lo)
    assert (got >= 0).sum() > 100  # the case matches rows, not only -1


def test_one_side_all_null_matches_nothing() -> None:
    a_hi, a_lo = np.zeros(5, np.int64), np.full(5, NULL_ID, np.int64)
    b_hi, b_lo = np.zeros(3, np.int64), np.arange(3, dtype=np.int64)
    assert join_pairs(a_hi, a_lo, b_hi, b_lo).tolist() == [-1] * 5
    assert join_pairs(b_hi, b_lo, a_hi, a_lo).tolist() == [-1] * 3


def test_ids_past_the_packed_key_take_the_general_path() -> None:
    rng = np.random.default_rng(12)
    b_hi, b_lo = rng.integers(-1, 3, 300), rng.integers(0, 50, 300) + (1 << 50)
    a_hi, a_lo = rng.integers(-1, 3, 300), rng.integers(0, 60, 300) + (1 << 50)
    got = join_pairs(a_hi, a_lo, b_hi, b_lo)
    ref = _first_pairs(a_hi, a_lo, b_hi, b_lo)
    # the general path finds an equal pair (not necessarily the first of repeats)
    for i, r in enumerate(ref):
        if r < 0:
            assert got[i] == -1
        else:
            assert (b_hi[got[i]], b_lo[got[i]]) == (a_hi[i], a_lo[i])


def test_join_ids_is_the_pair_join_of_one_rank() -> None:
    from tbdtrace.analysis.engine.joins import join_ids

    rng = np.random.default_rng(13)
    b = rng.integers(-5, 60, 500)  # negative ids too, repeated ids
    a = rng.integers(-5, 80, 800)
    a[::4] = NULL_ID
    b[::6] = NULL_ID
    one_a, one_b = np.full(a.size, 2), np.full(b.size, 2)
    ref = _first_pairs(one_a, a, one_b, b)
    assert join_ids(a, b).tolist() == ref
    assert sum(r >= 0 for r in ref) > 100
    assert join_ids(a[:0], b).tolist() == [] and join_ids(a, b[:0]).tolist() == [-1] * a.size
