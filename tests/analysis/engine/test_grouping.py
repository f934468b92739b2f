"""unique_rows: the distinct rows of integer columns, as np.unique(axis=0) gives them."""

from __future__ import annotations

import numpy as np
import pytest

from tbdtrace.analysis.engine.grouping import unique_rows


@pytest.mark.parametrize("seed", range(20))
def test_unique_rows_is_numpys_unique_of_the_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    hi = [3, 50, 1 << 20, 1 << 40][seed % 4]  # the last does not pack: np.unique itself
    cols = [rng.integers(-2, hi, n) for _ in range(int(rng.integers(1, 5)))]
    if n == 0:
        cols = [np.zeros(0, np.int64)]
    u, inv = unique_rows(*cols)
    rows = [tuple(r) for r in zip(*(c.tolist() for c in cols), strict=True)]
    want = sorted(set(rows))  # lexicographic, as np.unique(axis=0)
    assert [tuple(r) for r in u.tolist()] == want
    assert [want[i] for i in inv.tolist()] == rows


@pytest.mark.parametrize("values", [[], [7], [7, 7, 7], [3, -1, 3, 9, -1], [-5] * 4])
def test_dense_codes_number_values_in_first_seen_order(values: list[int]) -> None:
    from tbdtrace.analysis.engine.grouping import dense_codes

    code, distinct = dense_codes(np.array(values, dtype=np.int64))
    first = list(dict.fromkeys(values))  # first-seen order, by hand
    assert distinct.tolist() == first
    assert code.tolist() == [first.index(v) for v in values]
    assert code.dtype == np.int64 and distinct.dtype == np.int64
