"""Covered lengths (covered_in_windows) and innermost ranges of tbdtrace.passes.intervals
against brute force on random intervals."""

from __future__ import annotations

import numpy as np
import pytest

from tbdtrace.analysis.engine import intervals
from tbdtrace.analysis.engine.intervals import covered_in_windows, innermost


@pytest.fixture(params=["native", "numpy"])
def search_path(request, monkeypatch) -> str:
    """Each innermost test runs on the compiled search and on the numpy one."""
    if request.param == "native":
        if intervals._native_innermost() is None:
            pytest.skip("tbdtrace._native has no innermost_sorted (make native)")
    else:
        monkeypatch.setattr(intervals, "_native_innermost", lambda: None)
    return str(request.param)


def _brute_cover(s, e, ws, we):
    out = []
    for a, b in zip(ws, we, strict=True):
        pts = np.zeros(max(int(max(e.max(), b)) + 1, 1), dtype=bool)
        for x, y in zip(s, e, strict=True):
            pts[x:y] = True
        out.append(int(pts[a:b].sum()))
    return out


def test_covered_in_windows_matches_a_pixel_count() -> None:
    rng = np.random.default_rng(1)
    s = rng.integers(0, 500, 60)
    e = s + rng.integers(0, 40, 60)
    ws = rng.integers(0, 500, 30)
    we = ws + rng.integers(0, 120, 30)
    assert covered_in_windows(s, e, ws, we).tolist() == _brute_cover(s, e, ws, we)


def test_covered_in_windows_empty_sets() -> None:
    z = np.zeros(0, dtype=np.int64)
    assert covered_in_windows(z, z, [0, 5], [10, 6]).tolist() == [0, 0]


def test_innermost_is_the_latest_starting_containing_range(search_path) -> None:
    rng = np.random.default_rng(7)
    s = rng.integers(0, 1000, 200)
    e = s + rng.integers(0, 300, 200)
    q = rng.integers(-10, 1400, 500)
    got = innermost(s, e, q)
    for t, g in zip(q, got, strict=True):
        cands = [i for i in range(s.size) if s[i] <= t <= e[i]]
        if not cands:
            assert g == -1
        else:
            best = max(s[i] for i in cands)
            # Among ranges with that start, the shortest (the inner one) wins.
            shortest = min(e[i] for i in cands if s[i] == best)
            assert s[g] == best and e[g] == shortest


def test_innermost_nested_example(search_path) -> None:
    # outer [0,100], child [10,50], grandchild [20,30], sibling [60,90]
    s = np.array([0, 10, 20, 60])
    e = np.array([100, 50, 30, 90])
    assert innermost(s, e, np.array([5, 15, 25, 40, 55, 70, 95, 101])).tolist() == [
        0,
        1,
        2,
        1,
        0,
        3,
        0,
        -1,
    ]


def _brute_innermost(s, e, q):
    out = []
    for t in q:
        cands = [i for i in range(s.size) if s[i] <= t <= e[i]]
        if not cands:
            out.append(None)
            continue
        best = max(s[i] for i in cands)
        out.append((best, min(e[i] for i in cands if s[i] == best)))
    return out


def _as_pairs(s, e, got):
    return [None if g < 0 else (s[g], e[g]) for g in got]


def test_innermost_deep_nesting_and_the_table_fallback(monkeypatch, search_path) -> None:
    # 150 levels deep (the chain walk gives up after _MAX_STEPS, 64 steps in the compiled
    # search, and finishes in a table or tree search), then random siblings.
    rng = np.random.default_rng(11)
    s = np.concatenate([np.arange(150), rng.integers(0, 2000, 100)])
    e = np.concatenate([10_000 - np.arange(150), np.zeros(100, dtype=np.int64)])
    e[150:] = s[150:] + rng.integers(0, 50, 100)
    q = np.concatenate([rng.integers(-5, 10_100, 400), [149, 150, 9850, 9851, 10_000]])
    want = _brute_innermost(s, e, q)
    assert _as_pairs(s, e, innermost(s, e, q)) == want
    monkeypatch.setattr(intervals, "_MAX_STEPS", 0)  # numpy: every query through the table
    assert _as_pairs(s, e, innermost(s, e, q)) == want
    # Shuffled rows (sorted inside), a 2-D query array, no ranges and no queries.
    perm = rng.permutation(s.size)
    got = innermost(s[perm], e[perm], q.reshape(5, -1))
    assert got.shape == (5, q.size // 5)
    assert _as_pairs(s[perm], e[perm], got.reshape(-1)) == want
    z = np.zeros(0, dtype=np.int64)
    assert innermost(z, z, q[:3]).tolist() == [-1, -1, -1]
    assert innermost(s, e, z).tolist() == []


def test_innermost_compiled_and_numpy_agree_on_nested_random_ranges(monkeypatch) -> None:
    if intervals._native_innermost() is None:
        pytest.skip("tbdtrace._native has no innermost_sorted (make native)")
    rng = np.random.default_rng(21)
    for depth in (1, 3, 70, 300):
        # Nested stacks of ranges, each stack `depth` deep, plus ties on start.
        base = np.repeat(rng.integers(0, 10**6, 40) * 10**4, depth)
        lvl = np.tile(np.arange(depth), 40)
        s = base + lvl
        e = base + 2 * depth + 10**3 - lvl - rng.integers(0, 2, lvl.size)
        q = np.concatenate([rng.integers(0, 10**10, 2000), s[::7], e[::5], e[::5] + 1])
        native = innermost(s, e, q)
        monkeypatch.setattr(intervals, "_native_innermost", lambda: None)
        assert native.tolist() == innermost(s, e, q).tolist()
        monkeypatch.undo()


def test_previous_ge_matches_a_scan() -> None:
    from tbdtrace.analysis.engine.intervals import previous_ge

    rng = np.random.default_rng(12)
    for e in (rng.integers(0, 20, 300), np.arange(50), np.arange(50)[::-1], np.zeros(5)):
        want = [next((j for j in range(i - 1, -1, -1) if e[j] >= e[i]), -1) for i in range(e.size)]
        assert previous_ge(np.asarray(e, dtype=np.int64)).tolist() == want


def test_innermost_over_rows_in_place_is_the_search_over_their_copies(monkeypatch) -> None:
    """A thread's rows of a table searched in place (int32 rows: the compiled search reads
    them without gathering) give the positions the search over the gathered copies gives,
    deep nesting (the max-tree descent) and ties on start included."""
    if intervals._native_innermost_rows() is None:
        pytest.skip("tbdtrace._native has no innermost_rows (make native)")
    calls = []
    real = intervals._native_innermost_rows()
    monkeypatch.setattr(
        intervals, "_native_innermost_rows", lambda: lambda *a: calls.append(1) or real(*a)
    )
    rng = np.random.default_rng(22)
    for depth in (1, 3, 70, 300):
        base = np.repeat(np.sort(rng.integers(0, 10**6, 40)) * 10**4, depth)
        lvl = np.tile(np.arange(depth), 40)
        s = (base + lvl).astype(np.int64)
        e = (base + 2 * depth + 10**3 - lvl - rng.integers(0, 2, lvl.size)).astype(np.int64)
        order = np.lexsort((-e, s))
        s, e = s[order], e[order]
        # the thread's rows: every other stack's rows and some single rows left out
        rows = np.flatnonzero(rng.random(s.size) < 0.7).astype(np.int32)
        q = np.concatenate([rng.integers(0, 10**10, 2000), s[::7], e[::5], e[::5] + 1])
        want = innermost(s[rows], e[rows], q)
        n_calls = len(calls)
        assert innermost(s, e, q, rows).tolist() == want.tolist()
        assert len(calls) == n_calls + 1  # read in place
        # int64 rows, or rows out of order: the gathered search, the same answer
        assert innermost(s, e, q, rows.astype(np.int64)).tolist() == want.tolist()
        shuffled = rows[::-1].copy()
        assert (
            innermost(s, e, q, shuffled).tolist() == innermost(s[shuffled], e[shuffled], q).tolist()
        )
        assert len(calls) == n_calls + 1
    empty = np.zeros(0, np.int32)
    assert innermost(s, e, q[:3], empty).tolist() == [-1, -1, -1]
    with pytest.raises(IndexError):
        real(s, e, np.array([0, s.size], np.int32), q[:2])
