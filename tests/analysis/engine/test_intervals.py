"""Interval union edge cases, checked against a brute-force coverage count."""

from __future__ import annotations

import numpy as np
import pytest

from tbdtrace.analysis.engine import intervals


def brute_union(iv):
    covered = set()
    for s, e in iv:
        covered.update(range(s, e))
    return len(covered)


CASES = {
    "empty": [],
    "single": [(0, 10)],
    "nested": [(0, 100), (10, 20), (30, 40)],
    "overlapping": [(0, 10), (5, 15), (12, 30)],
    "adjacent": [(0, 10), (10, 20), (20, 25)],
    "zero_length": [(5, 5), (0, 3), (3, 3), (7, 7)],
    "disjoint_unsorted": [(50, 60), (0, 10), (20, 30)],
    "identical": [(1, 9), (1, 9), (1, 9)],
    "inner_after_long": [(0, 100), (90, 95), (99, 120), (130, 131)],
}


@pytest.mark.parametrize("name", CASES)
def test_union_length(name):
    iv = CASES[name]
    s = [a for a, _ in iv]
    e = [b for _, b in iv]
    assert intervals.union_length(s, e) == brute_union(iv)


def test_merge_returns_disjoint_sorted():
    ms, me = intervals.merge([0, 5, 12, 40, 40], [10, 15, 30, 41, 40])
    assert ms.tolist() == [0, 40] and me.tolist() == [30, 41]


def test_random_against_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(0, 30))
        s = rng.integers(0, 200, n)
        e = s + rng.integers(0, 40, n)
        assert intervals.union_length(s, e) == brute_union(
            list(zip(s.tolist(), e.tolist(), strict=True))
        )


def test_span_and_overlap():
    assert intervals.span([], []) == 0
    assert intervals.span([5, 1], [6, 3]) == 5
    a = [(0, 10), (20, 30)]
    b = [(5, 25)]
    got = intervals.overlap_length([x for x, _ in a], [y for _, y in a], [5], [25])
    want = len(set().union(*(range(*x) for x in a)) & set(range(*b[0])))
    assert got == want == 10


def test_several_devices_and_streams_in_report(tmp_path):
    """Per device, streams overlap into one busy union; devices stay separate."""
    import tbdtrace
    from tbdtrace.analysis.passes import summary

    k = {  # device 0: two streams overlapping; device 1: adjacent kernels
        "start_ns": [0, 5, 100, 0, 10],
        "end_ns": [10, 20, 110, 10, 20],
        "device_id": [0, 0, 0, 1, 1],
        "stream_id": [7, 8, 7, 7, 7],
        "device_type": ["cuda"] * 5,
        "name": ["a", "b", "a", "c", "c"],
    }
    m = {"start_ns": [20], "end_ns": [30], "device_id": [0], "device_type": ["cuda"], "bytes": [64]}
    tbdtrace.write(tmp_path / "t", {"kernels": k, "memcpy": m}, {"source": "test"})
    rows = {r["device_id"]: r for r in summary.run(tbdtrace.open(tmp_path / "t")).to_pylist()}
    assert rows[0]["span_ns"] == 110 and rows[0]["busy_ns"] == 40
    assert rows[0]["compute_busy_ns"] == 30 and rows[0]["kernel_time_ns"] == 35
    assert rows[1]["span_ns"] == 20 and rows[1]["busy_ns"] == 20
    assert rows[1]["utilization"] == 1.0


def test_order_check_by_blocks_agrees_with_the_whole_comparison(monkeypatch):
    import numpy as np

    from tbdtrace.analysis.engine import intervals as iv

    monkeypatch.setattr(iv, "_CHECK_ROWS", 3)  # blocks of 3 comparisons
    rng = np.random.default_rng(21)

    def whole(s, e):  # the definition, over all rows at once
        ds = np.diff(s)
        return bool(((ds > 0) | ((ds == 0) & (np.diff(e) <= 0))).all())

    s = np.sort(rng.integers(0, 30, 20))
    e = s + rng.integers(0, 5, 20)
    order = np.lexsort((-e, s))
    s, e = s[order], e[order]
    assert iv.by_start_then_longer(s, e) and whole(s, e)
    for i in range(1, 20):  # a violation at every position, block edges included
        t = s.copy()
        t[i] = t[i - 1] - 1
        assert iv.by_start_then_longer(t, e) == whole(t, e) is False
    tie = np.array([0, 1, 1, 2]), np.array([5, 2, 3, 4])  # equal starts, the longer second
    assert iv.by_start_then_longer(*tie) == whole(*tie) is False
    for n in (0, 1):
        assert iv.by_start_then_longer(s[:n], e[:n])


@pytest.mark.parametrize("check_rows", [1 << 22, 5])
@pytest.mark.parametrize("case", ["ties", "unsorted", "sorted", "duplicates"])
def test_rows_by_start_then_longer_is_the_stable_lexsort(case, check_rows, monkeypatch):
    """The reordered rows are those of a stable sort by (start, end descending), written
    here as Python's sort of (start, -end, position) on the rows the thread holds; rows
    checked in one gather or (more than a check block) block by block first."""
    monkeypatch.setattr(intervals, "_CHECK_ROWS", check_rows)
    rng = np.random.default_rng(7)
    n = 400
    s = np.sort(rng.integers(0, 60, n)) if case != "unsorted" else rng.integers(0, 60, n)
    e = s + rng.integers(0, 4 if case == "duplicates" else 50, n)
    if case == "sorted":
        order = sorted(range(n), key=lambda i: (int(s[i]), -int(e[i]), i))
        s, e = s[order], e[order]
    rows = np.flatnonzero(rng.random(n) < 0.7).astype(np.int32)  # one thread's rows
    want = sorted(rows.tolist(), key=lambda r: (int(s[r]), -int(e[r]), r))
    got = intervals.by_start_then_longer_rows(s, e, rows)
    assert got.tolist() == want
    assert got.dtype == rows.dtype
    if case == "sorted":
        assert got is rows  # already in order: no copy
    if case == "ties":
        assert got is not rows  # equal starts with the shorter first were reordered


@pytest.mark.parametrize("name", [n for n in CASES if CASES[n]])
@pytest.mark.parametrize("block", [1, 2, 3, 1000])
def test_span_and_union_of_rows_by_blocks(name, block):
    # The rows in the table's own order and reversed (a start before the open interval:
    # merged whole); expected values from the brute-force coverage count.
    iv = CASES[name]
    s = np.array([a for a, _ in iv], dtype=np.int64)
    e = np.array([b for _, b in iv], dtype=np.int64)
    for rows in (np.arange(s.size, dtype=np.int32), np.arange(s.size, dtype=np.int32)[::-1]):
        want_span = max(e) - min(s)
        got = intervals.span_and_union_of_rows(s, e, rows, block_rows=block)
        assert got == (want_span, brute_union(iv))


def test_span_and_union_of_rows_random_subsets_against_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        s = np.sort(rng.integers(0, 200, n)).astype(np.int64)  # a thread's rows: by start
        e = s + rng.integers(0, 30, n)
        rows = np.flatnonzero(rng.random(n) < 0.6).astype(np.int32)
        if rows.size == 0:
            continue
        if rng.random() < 0.3:
            rng.shuffle(rows)  # out of order too
        sub = [(int(s[i]), int(e[i])) for i in rows]
        want = (max(b for _, b in sub) - min(a for a, _ in sub), brute_union(sub))
        got = intervals.span_and_union_of_rows(s, e, rows, block_rows=int(rng.integers(1, 8)))
        assert got == want
