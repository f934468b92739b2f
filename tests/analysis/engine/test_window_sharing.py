"""A window view sharing the whole trace's arrays, and the fast paths of the 10M-kernel
report (bench/README.md), each against a plain-Python reading of the rows written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tbdtrace.analysis.engine import context, grouping, intervals, shared_arrays, window
from tbdtrace.analysis.passes import idle
from tests.analysis.tiny import US, make

# Measured steps 1-2: [200, 400) us; step 0 is warm-up.
STEPS = [(0, 100, 200, True), (1, 200, 300, False), (2, 300, 400, False)]
# (start_us, end_us, correlation id, launch_us or None); kernels in start order.
KERNELS = [
    (150, 160, 1, 140),  # launched before the window
    (210, 220, 2, 205),
    (230, 250, 3, 225),
    (260, 270, 4, None),  # no runtime call: placed at its own start
    (310, 330, 5, 305),
    (410, 420, 6, 405),  # launched after the window
]


# A kernel launched before the window that runs inside it: the window's kernels are
# no longer one run of rows.
QUEUED = (240, 245, 7, 150)


def _kernels(queued: bool) -> list[tuple[int, int, int, int | None]]:
    return sorted([*KERNELS, QUEUED]) if queued else KERNELS


def _tables(queued: bool) -> dict[str, Any]:
    """Kernels and their launch calls."""
    kernels = _kernels(queued)
    calls = sorted((launch, c) for _, _, c, launch in kernels if launch is not None)
    return {
        "kernels": {
            "start_ns": [s * US for s, *_ in kernels],
            "end_ns": [e * US for _, e, *_ in kernels],
            "correlation_id": [c for _, _, c, _ in kernels],
            "name": ["k"] * len(kernels),
            "rank": [0] * len(kernels),
            "device_id": [0] * len(kernels),
            "device_type": ["cuda"] * len(kernels),
        },
        "runtime": {
            "start_ns": [s * US for s, _ in calls],
            "end_ns": [s * US + 2 * US for s, _ in calls],
            "correlation_id": [c for _, c in calls],
            "name": ["cudaLaunchKernel"] * len(calls),
            "rank": [0] * len(calls),
        },
        "steps": {
            "step": [n for n, *_ in STEPS],
            "start_ns": [s * US for _, s, _, _ in STEPS],
            "end_ns": [e * US for _, _, e, _ in STEPS],
            "warmup": [w for *_, w in STEPS],
            "rank": [0] * len(STEPS),
        },
    }


def _expected(queued: bool) -> tuple[list[int], list[int], list[int]]:
    """The view's kernels (their durations), runtime matches and launch times, read from
    the rows: a row is in [200, 400) us by its launch call's start (else its own); a
    kernel matches the first of the view's runtime calls with its id."""
    kernels = _kernels(queued)
    calls = sorted((launch, c) for _, _, c, launch in kernels if launch is not None)
    view_calls = [(s, c) for s, c in calls if 200 <= s < 400]
    first: dict[int, int] = {}
    for i, (_, c) in enumerate(view_calls):
        first.setdefault(c, i)
    dur, match, launch = [], [], []
    for s, e, c, ls in kernels:
        placed = s if ls is None else min(t for t, cc in calls if cc == c)
        if 200 <= placed < 400:
            dur.append((e - s) * US)
            m = first.get(c, -1)
            match.append(m)
            launch.append(view_calls[m][0] * US if m >= 0 else -1)
    return dur, match, launch


@pytest.mark.parametrize("queued", [False, True])
def test_view_shares_the_base_arrays(tmp_path: Path, queued: bool):
    tr = make(tmp_path, _tables(queued))
    view = context.of(tr).windowed(window.resolve(context.of(tr)))
    dur, match, launch = _expected(queued)
    assert shared_arrays.durations(view, "kernels").tolist() == dur
    assert shared_arrays.runtime_match(view, "kernels").tolist() == match
    assert shared_arrays.launch_times(view, "kernels").tolist() == launch
    # One run of rows: kept as its bounds, the matches taken from the base's; else the
    # kept rows are listed and the view joins its own rows.
    carried = shared_arrays._carried_matches(view, "kernels")
    if queued:
        assert view.row_run("kernels") is None and carried is None
        assert view.kept_rows("kernels").tolist() == [1, 2, 4, 5]
    else:
        assert view.row_run("kernels") == (1, 5) and carried is not None
        assert view.kept_rows("kernels").tolist() == [1, 2, 3, 4]


def test_queued_per_gap_subtracts_the_sync_waits_under_each_gap():
    rng = np.random.default_rng(7)
    busy_s = np.sort(rng.choice(5000, 300, replace=False)).astype(np.int64)
    ms, me = intervals.merge(busy_s, busy_s + rng.integers(1, 20, busy_s.size))
    ga, gb = me[:-1], ms[1:]
    cut = ga + ((gb - ga) * rng.random(ga.size)).astype(np.int64)  # inside its gap
    ss = np.sort(rng.choice(5000, 30, replace=False)).astype(np.int64)
    sync = intervals.merge(ss, ss + rng.integers(1, 150, ss.size))
    cover = np.zeros(6000, bool)
    for a, b in zip(*sync, strict=True):
        cover[a:b] = True
    expect = [int(b - c) - int(cover[c:b].sum()) for c, b in zip(cut, gb, strict=True)]
    assert idle._queued_per_gap(sync, cut, gb).tolist() == expect
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert idle._queued_per_gap(none, cut, gb).tolist() == (gb - cut).tolist()


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("codes", ["wide", "sparse", "dense"])
def test_group_sum_is_exact(big: bool, codes: str):
    rng = np.random.default_rng(8)
    a = rng.integers(0, 5, 400).astype(np.int32)
    if codes == "wide":  # recoded first, then few pairs: counted directly
        b = rng.integers(0, 1 << 40, 7)[rng.integers(0, 7, 400)]
    elif codes == "sparse":  # packs as it is, too many possible pairs: hashed
        b = rng.integers(0, 1 << 20, 400)
    else:  # packs, few possible pairs: counted directly
        b = rng.integers(-1, 9, 400)
    v = rng.integers(0, 1 << 60 if big else 1000, 400)  # big: beyond float64's exact range
    if big:
        v[0] = -3  # negative: the exact np.add.at path
    want: dict[tuple[int, int], list[int]] = {}
    for x, y, z in zip(a.tolist(), b.tolist(), v.tolist(), strict=True):
        s = want.setdefault((x, y), [0, 0])
        s[0] = (s[0] + z + (1 << 63)) % (1 << 64) - (1 << 63)  # int64 wrap-around
        s[1] += 1
    ga, gb, sums, counts = grouping.group_sum(a, b, v)
    got = {
        (x, y): [s, c]
        for x, y, s, c in zip(ga.tolist(), gb.tolist(), sums.tolist(), counts.tolist(), strict=True)
    }
    assert got == want
    _, _, ones, _ = grouping.group_sum(a, b, None)
    assert sorted(ones.tolist()) == sorted(c for _, c in want.values())


def test_one_rank_key(tmp_path: Path):
    def k(rank: list[Any]) -> dict[str, Any]:
        n = len(rank)
        return {
            "start_ns": list(range(n)),
            "end_ns": list(range(1, n + 1)),
            "name": ["k"] * n,
            "rank": rank,
        }

    for name, rank, want in [
        ("one", [3, 3, 3], 3),
        ("two", [3, 4, 3], None),
        ("null", [None, None], window.NO_RANK),
        ("some", [None, 2], None),
    ]:
        tr = make(tmp_path, {"kernels": k(rank)}, name=name)
        assert grouping.one_rank_key(context.of(tr), "kernels") == want
        keys = grouping.row_rank_keys(context.of(tr), "kernels")
        if want is not None:
            assert set(keys.tolist()) == {want}


@pytest.mark.parametrize("pattern", ["run-and-strays", "scattered", "short", "two-runs"])
def test_window_rows_taken_as_a_run_and_strays_equal_a_take(pattern: str) -> None:
    """A window's kept rows (one long run and a few rows before and after it) read as
    the same column values as ``Table.take`` of them."""
    import pyarrow as pa

    from tbdtrace.analysis.engine.context import _main_run, _take_rows
    from tbdtrace.tablefile import combine

    rng = np.random.default_rng(1)
    n = 20_000
    tbl = pa.table(
        {
            "t": pa.array(rng.integers(0, 1 << 40, n)),
            "name": pa.array(rng.integers(0, 9, n).astype(str)).dictionary_encode(),
            "v": pa.array(np.where(rng.random(n) < 0.2, None, rng.integers(0, 5, n))),
        }
    )
    kept = {
        "run-and-strays": np.r_[[3, 40], np.arange(500, n - 300), [n - 7]],
        "scattered": np.sort(rng.choice(n, 3000, replace=False)),
        "short": np.arange(10, 20),
        "two-runs": np.r_[np.arange(0, 2000), np.arange(5000, 9000)],
    }[pattern]
    # The longest run of consecutive rows, by a walk over the rows.
    best, a = (0, 0), 0
    for i in range(1, kept.size + 1):
        if i == kept.size or kept[i] != kept[i - 1] + 1:
            best, a = (max(best, (a, i), key=lambda r: r[1] - r[0]), i)
    run = best if kept.size > 1024 and 2 * (best[1] - best[0]) >= kept.size else None
    assert _main_run(kept) == run
    assert (run is None) == (pattern in ("scattered", "short"))
    got, want = _take_rows(tbl, kept, run), tbl.take(pa.array(kept))
    for c in tbl.column_names:
        assert combine(got.column(c)).to_pylist() == combine(want.column(c)).to_pylist(), c


@pytest.mark.parametrize("queued", [False, True])
def test_whole_trace_lets_go_of_the_columns_a_window_copies(tmp_path: Path, queued: bool):
    tr = make(tmp_path, _tables(queued))
    whole = context.of(tr)
    view = whole.windowed(window.resolve(whole))
    cols = [("kernels", ["start_ns", "end_ns", "name"])]
    whole.prefetch_tables(cols)
    shared_arrays.ints(whole, "kernels", "start_ns")  # a cached int64 view of the column
    view.prefetch_tables(cols)
    context.release_copied(view, cols)
    # Rows kept by index are copies: the whole trace lets go of its columns and views;
    # one run of rows is a slice of them: kept.
    assert tr.holds("kernels", "start_ns") is not queued
    assert whole.cache.contains(shared_arrays.INTS, "kernels", "start_ns", -1) is not queued
    assert view.holds("kernels", "start_ns")
    # Both read the rows written (the whole trace's read again where let go of).
    kernels = _kernels(queued)
    rows = view.kept_rows("kernels").tolist()
    starts = shared_arrays.ints(view, "kernels", "start_ns").tolist()
    assert starts == [kernels[i][0] * US for i in rows]
    ends = shared_arrays.ints(whole, "kernels", "end_ns").tolist()
    assert ends == [e * US for _, e, *_ in kernels]
