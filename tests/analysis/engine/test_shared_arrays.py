"""Shared per-trace arrays and the fast paths behind them, each against a brute force."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tbdtrace
from tbdtrace.analysis.engine import context, intervals, shared_arrays
from tbdtrace.analysis.engine.joins import NULL_ID, join_sorted
from tbdtrace.analysis.passes import hotspots, idle
from tests.analysis.tiny import kernels, make


def _brute_join(a, b):
    first = {}
    for i, x in enumerate(b.tolist()):
        first.setdefault(x, i)
    return np.array([-1 if x == NULL_ID else first.get(x, -1) for x in a.tolist()])


@pytest.mark.parametrize(
    "case", ["dense", "sparse", "unsorted", "duplicates", "nulls", "inside", "inside-blocks"]
)
def test_join_sorted_matches_a_dictionary(case, monkeypatch):
    rng = np.random.default_rng(3)
    b = np.arange(10, 2010, dtype=np.int64)  # dense and increasing: the lookup table
    if case == "sparse":
        b = np.sort(rng.choice(10**9, 500, replace=False)).astype(np.int64)
    elif case == "unsorted":
        b = rng.permutation(b)
    elif case == "duplicates":
        b = np.sort(rng.integers(0, 300, 1000)).astype(np.int64)
    elif case == "nulls":
        b = b.copy()
        b[::5] = NULL_ID
    a = np.concatenate([rng.choice(b, 400), rng.integers(-5, 3000, 400), [NULL_ID]])
    if case.startswith("inside"):  # every id inside b's range: read without a mask
        a = rng.permutation(b)[:700]
        if case == "inside-blocks":  # blocks of 64: the last one masked, the rest not
            from tbdtrace.analysis.engine import joins

            monkeypatch.setattr(joins, "_BLOCK", 64)
            a[-1] = NULL_ID
    assert np.array_equal(join_sorted(a, b), _brute_join(a, b))


def test_merge_first_names_the_opening_interval():
    rng = np.random.default_rng(4)
    s = rng.integers(0, 200, 300)
    e = s + rng.integers(0, 15, 300)
    ms, me, first = intervals.merge_first(s, e)
    ref_s, ref_e = intervals.merge(s, e)
    assert np.array_equal(ms, ref_s) and np.array_equal(me, ref_e)
    for m, f in zip(ms.tolist(), first.tolist(), strict=True):
        opening = [i for i in range(s.size) if s[i] == m and e[i] > s[i]]
        assert f == opening[0]


def test_run_max():
    v = np.array([5, 1, 9, 3, 7, 2])
    lo, hi = np.array([0, 2, 4, 1, 5]), np.array([2, 4, 6, 3, 6])
    assert idle._run_max(v, lo, hi).tolist() == [max(v[a:b]) for a, b in zip(lo, hi, strict=False)]


def test_covered_total_is_symmetric():
    rng = np.random.default_rng(5)
    ms, me = intervals.merge(
        *(lambda s: (s, s + rng.integers(1, 20, 50)))(rng.integers(0, 1000, 50))
    )
    ws = np.sort(rng.choice(1000, 40, replace=False))[::2].astype(np.int64)
    we = ws + rng.integers(0, 3, ws.size)  # disjoint windows, some empty
    cover = np.zeros(1100, bool)
    for a, b in zip(ms, me, strict=False):
        cover[a:b] = True
    expect = sum(int(cover[a:b].sum()) for a, b in zip(ws, we, strict=False))
    assert idle._covered_total(ms, me, ws, we) == expect
    many_ws = np.arange(0, 1000, 7, dtype=np.int64)
    many_we = many_ws + 3
    expect = sum(int(cover[a:b].sum()) for a, b in zip(many_ws, many_we, strict=False))
    assert idle._covered_total(ms, me, many_ws, many_we) == expect  # more windows: other side


def test_launch_codes_pack_exactly(tmp_path: Path):
    grid = [(1, 1, 1), (2**20, 3, 1), (1, 1, 1), (7, 65535, 64)]
    block = [(128, 1, 1), (1024, 1, 1), (128, 1, 1), (32, 32, 1)]
    k = kernels(
        [(i * 10, i * 10 + 5, "k") for i in range(5)],
        grid_x=[g[0] for g in grid] + [None],
        grid_y=[g[1] for g in grid] + [None],
        grid_z=[g[2] for g in grid] + [None],
        block_x=[b[0] for b in block] + [None],
        block_y=[b[1] for b in block] + [None],
        block_z=[b[2] for b in block] + [None],
    )
    tr = make(tmp_path, {"kernels": k})
    codes, label = hotspots._launch_codes(tr)
    assert codes[4] == -1 and codes[0] == codes[2] and len(set(codes[:4].tolist())) == 3
    assert [label(int(c)) for c in codes[:4]] == [
        f"grid=({g[0]},{g[1]},{g[2]}) block=({b[0]},{b[1]},{b[2]})"
        for g, b in zip(grid, block, strict=True)
    ]


def test_launch_codes_with_constant_and_too_wide_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def labels_of(grid, block, name):
        k = kernels(
            [(i * 10, i * 10 + 5, "k") for i in range(len(grid))],
            **{f"grid_{a}": [g[i] for g in grid] for i, a in enumerate("xyz")},
            **{f"block_{a}": [b[i] for b in block] for i, a in enumerate("xyz")},
        )
        codes, label = hotspots._launch_codes(make(tmp_path, {"kernels": k}, name=name))
        return codes, [label(int(c)) for c in codes]

    def expect(grid, block):
        return [
            f"grid=({g[0]},{g[1]},{g[2]}) block=({b[0]},{b[1]},{b[2]})"
            for g, b in zip(grid, block, strict=True)
        ]

    # z sizes the same on every row (known from the file's statistics, not decoded)
    grid = [(4, 2, 1), (8, 2, 1), (4, 2, 1), (4, 3, 1)]
    block = [(256, 1, 7), (256, 1, 7), (256, 1, 7), (64, 1, 7)]
    codes, got = labels_of(grid, block, "constant")
    assert got == expect(grid, block)
    assert codes[0] == codes[2] and len(set(codes.tolist())) == 3
    # codes order as the sizes, compared from block_z down to grid_x
    order = sorted(range(4), key=lambda i: (*block[i][::-1], *grid[i][::-1]))
    assert sorted(range(4), key=lambda i: (int(codes[i]), i)) == order
    # sizes too wide to pack in 62 bits: hashed codes, the same labels
    big = 2**31 - 1
    grid = [(big, big, 1), (big - 1, big - 2, 1), (big, big, 1)]
    block = [(big, 1, 1), (big - 3, 1, 1), (big, 1, 1)]
    hashed = []
    real = hotspots._hashed_launch_codes
    monkeypatch.setattr(hotspots, "_hashed_launch_codes", lambda *a: hashed.append(a) or real(*a))
    codes, got = labels_of(grid, block, "wide")
    assert len(hashed) == 1  # 3 x 31 bits: the hash path ran
    assert got == expect(grid, block)
    assert codes[0] == codes[2] != codes[1]


def test_device_rows_split_in_file_order(tmp_path: Path):
    k = kernels([(0, 1, "a"), (2, 3, "b"), (4, 5, "c"), (6, 7, "d")], device_id=[1, 0, 1, 0])
    tr = make(tmp_path, {"kernels": k})
    rows = dict(shared_arrays.device_rows(context.of(tr), "kernels"))
    by_dev = {k_ & 0xFFFFFFFF: r.tolist() for k_, r in rows.items()}
    assert by_dev == {2: [0, 2], 1: [1, 3]}  # key holds device_id + 1
    one = make(tmp_path, {"kernels": kernels([(0, 1, "a"), (2, 3, "b")])}, name="one")
    assert [r for _, r in shared_arrays.device_rows(context.of(one), "kernels")] == [slice(None)]


def test_constant_columns_are_broadcast_from_the_statistics(tmp_path: Path):
    from tbdtrace.analysis.engine.joins import NULL_ID as NULL

    k = kernels(
        [(0, 1, "a"), (2, 3, "b"), (4, 6, "c")],
        rank=[4, 4, 4],  # one rank
        tid=[None, None, None],  # a GPU kernel has no thread
        pid=[7, 8, 7],  # differs
        flops=[None, None, None],
    )
    tr = make(tmp_path, {"kernels": k})
    ctx = context.of(tr)
    rank = shared_arrays.ints(ctx, "kernels", "rank")
    tid = shared_arrays.ints(ctx, "kernels", "tid", NULL)
    assert rank.tolist() == [4, 4, 4] and tid.tolist() == [NULL] * 3
    assert rank.strides == (0,) and not rank.flags.writeable  # a view of one value
    assert shared_arrays.ints(ctx, "kernels", "pid").tolist() == [7, 8, 7]
    assert not shared_arrays.has_values(ctx, "kernels", "flops")
    assert shared_arrays.has_values(ctx, "kernels", "pid")
    # none of the constant columns was decoded; the one that differs was
    assert {c for t, c in tr._columns if t == "kernels"} == {"pid"}
    # the same values where the statistics are not there (a trace in memory)
    mem = context.of(tbdtrace.trace.from_tables({"kernels": k}, {}))
    assert shared_arrays.ints(mem, "kernels", "rank").tolist() == [4, 4, 4]
    assert shared_arrays.ints(mem, "kernels", "tid", NULL).tolist() == [NULL] * 3
    assert not shared_arrays.has_values(mem, "kernels", "flops")


def test_label_mask_of_a_column_nothing_holds_keeps_small_codes(tmp_path: Path):
    # ops.category read for its masks only: kept as int8 codes, not as a column; the
    # masks equal a per-row comparison of the labels written (a null matches nothing).
    cats = ["cpu_op", "python_function", None, "python_function", "user_annotation"]
    n = len(cats)
    ops = {
        "start_ns": list(range(n)),
        "end_ns": [i + 1 for i in range(n)],
        "name": [f"op{i}" for i in range(n)],
        "category": cats,
    }
    tr = make(tmp_path, {"ops": ops})
    ctx = context.of(tr)
    py = shared_arrays.label_mask(ctx, "ops", "category", lambda x: x == "python_function")
    assert py.tolist() == [c == "python_function" for c in cats]
    anno = shared_arrays.label_mask(ctx, "ops", "category", lambda x: x.endswith("annotation"))
    assert anno.tolist() == [c is not None and c.endswith("annotation") for c in cats]
    assert not ctx.holds("ops", "category")
    small, labels = ctx.cache.get(shared_arrays.SMALL_CODES, lambda: None, "ops", "category")
    assert small.dtype == np.int8
    assert [labels[c] if c < len(labels) else None for c in small] == cats
    # a column already held is read from the column (the same masks)
    ctx.column("ops", "name")
    odd = shared_arrays.label_mask(ctx, "ops", "name", lambda x: int(x[2:]) % 2 == 1)
    assert odd.tolist() == [i % 2 == 1 for i in range(n)]
    assert not ctx.cache.contains(shared_arrays.SMALL_CODES, "ops", "name")
