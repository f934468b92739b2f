"""join_pairs and join_ids: the first equal (hi, lo) pair (or id) of b for each of a, on
every path, nulls never matching."""

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


_first_pairs = _first


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


@pytest.mark.parametrize("seed", range(24))
def test_join_ids_dense_and_sparse_paths_give_the_first_equal_id(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tbdtrace.analysis.engine.joins import join_ids

    # Small blocks: the table is filled over several blocks, last block first.
    monkeypatch.setattr(joins, "_BLOCK", int(np.random.default_rng(seed).integers(1, 64)))
    rng = np.random.default_rng(100 + seed)
    nb, na = int(rng.integers(1, 400)), int(rng.integers(1, 400))
    if seed % 2:  # dense ids (external ids of one rank): the lookup table
        b = rng.permutation(nb).astype(np.int64) + int(rng.integers(-40, 40))
        if seed % 4 == 1:
            b[rng.integers(0, nb, 7)] = b[int(rng.integers(0, nb))]  # repeats: first row wins
    else:  # sparse ids: the sort
        b = rng.integers(0, 50 * nb + 9000, nb)
    b[rng.random(nb) < 0.1] = NULL_ID
    a = np.concatenate([rng.choice(b, na // 2), rng.integers(-50, nb + 60, na - na // 2)])
    a[rng.random(na) < 0.1] = NULL_ID
    one_a, one_b = np.zeros(a.size, np.int64), np.zeros(b.size, np.int64)
    assert join_ids(a, b).tolist() == _first(one_a, a, one_b, b)


def test_join_ids_takes_the_table_for_dense_ids_only() -> None:
    b = np.arange(5000, dtype=np.int64)[::-1].copy()
    got = joins._dense_ids(np.array([0, 4999, 5000, NULL_ID], np.int64), b)
    assert got is not None and got.tolist() == [4999, 0, -1, -1]
    assert joins._dense_ids(b, b * 100) is None  # too sparse for ~4 keys per row


@pytest.mark.parametrize("seed", range(12))
def test_dense_ids_blocks_without_nulls_and_ids_inside_the_range(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of b without a null id and blocks of a inside b's range (read unmasked),
    next to blocks with nulls and ids outside: the first equal id, -1 otherwise."""
    monkeypatch.setattr(joins, "_BLOCK", int(np.random.default_rng(seed).integers(1, 40)))
    rng = np.random.default_rng(200 + seed)
    nb = int(rng.integers(50, 300))
    b = rng.integers(0, nb // 3 + 1, nb).astype(np.int64) + 1000  # many repeats
    if seed % 3 == 0:
        b[nb // 2 : nb // 2 + 3] = NULL_ID  # a null in one block only
    a = rng.choice(b[b != NULL_ID], int(rng.integers(1, 300)))
    if seed % 3 == 1:
        a[-1] = 999 if seed % 2 else NULL_ID  # outside the range: the last block masked
    got = joins._dense_ids(a, b)
    assert got is not None
    zb, za = np.zeros(b.size, np.int64), np.zeros(a.size, np.int64)
    assert got.tolist() == _first(za, a, zb, b)
