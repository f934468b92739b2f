"""The attribution's compiled pieces (``_native.group_rows``, ``order_by_start_then_longer``,
``innermost_groups``) against computations written here in plain Python and numpy, on
random inputs and on real traces (the whole attribution with and without them)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pyarrow as pa
import pytest

from tbdtrace import trace as trace_io
from tbdtrace.analysis.engine import attribution, context, intervals
from tbdtrace.analysis.passes import hotspots
from tbdtrace.commands._open import open_or_import
from tbdtrace.importers import collectives, kineto
from tbdtrace.report import ReportOptions, build

from ...conftest import KINETO_TRACES, fixture

_native = pytest.importorskip("tbdtrace._native")
if not hasattr(_native, "innermost_groups"):
    pytest.skip(
        "tbdtrace._native is older than this checkout (make native)", allow_module_level=True
    )


# -- group_rows


def _groups_by_hand(keys: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)  # dicts keep first-appearance order
    return out


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("distinct", [1, 3, 16, 17, 40])  # a scan, and past 16 a hash
def test_group_rows_as_by_hand(dtype: type, distinct: int) -> None:
    rng = np.random.default_rng(distinct)
    values = rng.choice(np.array([-1, 0, 5, 2**31 - 2, *range(100, 200)]), distinct, False)
    keys: np.ndarray = values[rng.integers(0, distinct, 5000)].astype(dtype)
    keys[1000:2000] = keys[0]  # a long run of one key
    uniq, order, ends = _native.group_rows(keys)
    expect = _groups_by_hand(keys.tolist())
    assert uniq.tolist() == list(expect)
    assert (
        order.dtype == np.int32
        and ends.tolist() == np.cumsum([len(v) for v in expect.values()]).tolist()
    )
    starts = [0, *ends[:-1].tolist()]
    assert [order[a:b].tolist() for a, b in zip(starts, ends.tolist(), strict=True)] == list(
        expect.values()
    )


def test_group_rows_empty_and_bad_input() -> None:
    uniq, order, ends = _native.group_rows(np.zeros(0, np.int64))
    assert uniq.size == order.size == ends.size == 0
    with pytest.raises(ValueError, match="int32 or int64"):
        _native.group_rows(np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="contiguous"):
        _native.group_rows(np.arange(10, dtype=np.int64)[::2])


def test_thread_rows_native_as_arrow_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    pid = rng.choice([10, 11], 3000).astype(np.int64)
    tid = rng.choice([1, 7, 9, 2**31], 3000).astype(np.int64)
    got = attribution.thread_groups(pid, tid)
    monkeypatch.setattr(attribution, "_native_fn", lambda name: None)
    fallback = attribution.thread_groups(pid, tid)
    assert list(got) == list(fallback)
    assert all(np.array_equal(got[k], fallback[k]) for k in got)
    # And written out from the ids: each thread's rows, ascending.
    for (p, t), rows in got.items():
        assert rows.tolist() == np.flatnonzero((pid == p) & (tid == t)).tolist()


# -- order_by_start_then_longer


def _lexsorted(s: np.ndarray, e: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort((-e[rows], s[rows]))]


@pytest.mark.parametrize("kind", ["ordered", "ties", "shuffled"])
def test_order_rows_as_lexsort(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    n = 4000
    s = np.sort(rng.integers(0, 500, n)).astype(np.int64)  # many equal starts
    e = s + rng.integers(0, 50, n)
    rows = np.arange(0, n, 2, dtype=np.int32)  # one thread's rows: every other row
    if kind == "ordered":
        rows = _lexsorted(s, e, rows).astype(np.int32)
    elif kind == "shuffled":
        rows = rng.permutation(rows).astype(np.int32)
    expect = _lexsorted(s, e, rows)
    work = rows.copy()
    changed = _native.order_by_start_then_longer(s, e, work)
    assert work.tolist() == expect.tolist()
    assert changed == (kind != "ordered")
    with pytest.raises(IndexError, match="outside"):
        _native.order_by_start_then_longer(s, e, np.array([0, n], np.int32))


# -- innermost_groups


def _innermost_by_hand(
    s: np.ndarray, e: np.ndarray, keep: np.ndarray, rows: list[int], t: int
) -> int:
    """The kept row of ``rows`` holding ``t`` that starts last; of equal starts the
    shorter; of equal ranges the later row."""
    hits = [r for r in rows if keep[r] and s[r] <= t <= e[r]]
    return max(hits, key=lambda r: (s[r], -e[r], r)) if hits else -1


def _random_ranges(rng: np.random.Generator, n: int, deep: bool) -> tuple[np.ndarray, np.ndarray]:
    if deep:  # nested 200 deep: the searches past 64 steps (the max-tree)
        s = np.arange(n, dtype=np.int64) * 2
        e = np.int64(4 * n) - s
        e[n // 2 :] = s[n // 2 :] + 1  # then short ranges side by side
        return s, e
    s = rng.integers(0, 10_000, n).astype(np.int64)
    return s, s + rng.integers(0, 400, n)


@pytest.mark.parametrize("deep", [False, True])
@pytest.mark.parametrize("order", ["ascending", "descending", "random"])
@pytest.mark.parametrize("qtype", [np.int32, np.int64])
def test_innermost_groups_as_by_hand(deep: bool, order: str, qtype: type) -> None:
    rng = np.random.default_rng(7 + deep)
    n = 600
    s, e = _random_ranges(rng, n, deep)
    thread = rng.integers(0, 3, n)
    keep = rng.random(n) < 0.8
    q = 500
    t = rng.integers(-10, int(e.max()) + 10, q).astype(np.int64)
    q_thread = rng.integers(0, 4, q)  # thread 3 has no ranges
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for th in range(3):
        rows = np.flatnonzero(thread == th)
        rows = _lexsorted(s, e, rows).astype(np.int32)
        qs = np.flatnonzero(q_thread == th)
        if order == "ascending":
            qs = qs[np.argsort(t[qs], kind="stable")]
        elif order == "descending":
            qs = qs[np.argsort(-t[qs], kind="stable")]
        pairs.append((rows, qs.astype(qtype)))
    for out_type in (np.int32, np.int64):
        out = np.full(q, -1, out_type)
        _native.innermost_groups(s, e, keep, pairs, t, out)
        expect = [
            _innermost_by_hand(s, e, keep, np.flatnonzero(thread == q_thread[k]).tolist(), t[k])
            if q_thread[k] < 3
            else -1
            for k in range(q)
        ]
        assert out.tolist() == expect
    # Every row kept (None) and no row kept
    out = np.full(q, -1, np.int64)
    _native.innermost_groups(s, e, None, pairs, t, out)
    assert out.tolist() == [
        _innermost_by_hand(
            s, e, np.ones(n, bool), np.flatnonzero(thread == q_thread[k]).tolist(), t[k]
        )
        if q_thread[k] < 3
        else -1
        for k in range(q)
    ]
    out = np.full(q, -1, np.int64)
    _native.innermost_groups(s, e, np.zeros(n, bool), pairs, t, out)
    assert (out == -1).all()


def test_innermost_groups_bad_input() -> None:
    s = np.array([0, 5], np.int64)
    e = np.array([10, 6], np.int64)
    t = np.array([5], np.int64)
    out = np.full(1, -1, np.int32)
    with pytest.raises(IndexError, match="row outside"):
        _native.innermost_groups(
            s, e, None, [(np.array([0, 2], np.int32), np.zeros(1, np.int32))], t, out
        )
    with pytest.raises(IndexError, match="query outside"):
        _native.innermost_groups(
            s, e, None, [(np.array([0, 1], np.int32), np.array([1], np.int32))], t, out
        )
    with pytest.raises(ValueError, match="keep"):
        _native.innermost_groups(s, e, np.ones(3, bool), [], t, out)
    with pytest.raises(ValueError, match="out"):
        _native.innermost_groups(s, e, None, [], t, np.zeros(1, np.float64))
    assert out.tolist() == [-1]  # nothing written on bad input


# -- real traces: the whole attribution, compiled and not


def _attribution(tr: trace_io.Trace) -> attribution.Attribution:
    return attribution.attribute(context.of(tr))


@pytest.mark.parametrize("path", KINETO_TRACES, ids=lambda p: p.name)
def test_attribution_compiled_as_numpy_on_fixtures(path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables, meta = kineto.import_files([path])
    tr = trace_io.from_tables(tables, meta, path)
    # Small traces: the op search beside the others too (normally from 64K ops).
    monkeypatch.setattr(attribution, "BESIDE_ROWS", (0, 1 << 23))
    got = _attribution(tr)
    monkeypatch.setattr(attribution, "_native_fn", lambda name: None)
    expect = _attribution(trace_io.from_tables(tables, meta, path))
    for f in ("op", "module", "marker"):
        assert np.array_equal(getattr(got, f), getattr(expect, f)), f
    assert got.op_labels == expect.op_labels and got.marker_labels == expect.marker_labels


# -- the collectives' host spans


def test_dense_host_spans_as_lexsort(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    n = 3000
    ext = rng.integers(100, 1100, n)
    ops = {
        "name": pa.array(rng.choice(["nccl:all_reduce", "record_param_comms", "aten::mm"], n)),
        "external_id": pa.array(ext, pa.int64()),
        "start_ns": pa.array(rng.integers(0, 10**6, n), pa.int64()),
        "end_ns": pa.array(rng.integers(10**6, 2 * 10**6, n), pa.int64()),
        "rank": pa.array(np.zeros(n, np.int32)),
    }
    m = 800
    c_ext = rng.integers(50, 1200, m)  # some outside the ops' ids
    coll = {
        "start_ns": pa.array(np.zeros(m, np.int64)),
        "external_id": pa.array(c_ext, pa.int64(), mask=rng.random(m) < 0.1),
        "rank": pa.array(rng.choice([0, 1], m).astype(np.int32)),  # rank 1: no host ops
    }
    hs, he = collectives._host_spans(coll, ops)
    # By hand: per collective of rank 0, its id's ops' earliest start and latest end.
    rows = collectives.host_op_rows(ops)
    o_ext, o_s, o_e = ext[rows], ops["start_ns"].to_numpy()[rows], ops["end_ns"].to_numpy()[rows]
    for k in range(m):
        mine = o_ext == c_ext[k]
        if coll["external_id"][k].is_valid and coll["rank"][k].as_py() == 0 and mine.any():
            assert (hs[k], he[k]) == (o_s[mine].min(), o_e[mine].max())
        else:
            assert hs[k] == np.iinfo(np.int64).min
    monkeypatch.setattr(collectives, "_dense_spans", lambda *a: None)
    ls, le = collectives._host_spans(coll, ops)
    assert np.array_equal(hs, ls) and np.array_equal(he, le)


# -- the report with the second thread's work, and without


@pytest.mark.parametrize(
    "name",
    [
        "kineto/hta/df_index_resolver.json.gz",
        "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz",
    ],
)
def test_report_beside_as_one_thread(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The op search and the kernel statistics on a second thread (from any size here)
    give the document of one thread doing everything in order."""
    path = fixture(name)

    def doc() -> str:
        return json.dumps(build(open_or_import(str(path)), ReportOptions()), default=str)

    monkeypatch.setattr(attribution, "BESIDE_ROWS", (0, 1 << 23))
    monkeypatch.setattr(hotspots, "STATS_BESIDE_ROWS", (0, 1 << 22))
    beside = doc()
    monkeypatch.setattr(attribution, "BESIDE_ROWS", (0, -1))
    monkeypatch.setattr(hotspots, "STATS_BESIDE_ROWS", (0, -1))
    assert beside == doc()


def test_beside_raises_what_the_thread_raised() -> None:
    def boom() -> None:
        raise ValueError("from the thread")

    worker = attribution.Beside(boom)
    with pytest.raises(ValueError, match="from the thread"):
        worker.join()


def test_beside_runs_on_the_caller_where_no_thread_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    ran: list[str] = []
    worker = attribution.Beside(lambda: ran.append(threading.current_thread().name))
    assert ran == [threading.current_thread().name]  # already run, here
    worker.join()
    assert len(ran) == 1


# -- a thread's span and busy time


def _union_by_hand(pairs: list[tuple[int, int]]) -> int:
    total, cur = 0, None
    for s, e in sorted(p for p in pairs if p[1] > p[0]):
        if cur is None or s > cur[1]:
            total += 0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (0 if cur is None else cur[1] - cur[0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_span_union_rows_as_by_hand(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    n = 3000
    s = rng.integers(0, 100_000, n).astype(np.int64)
    e = s + rng.integers(-5, 300, n)  # some of no length, some ending before they start
    rows = np.flatnonzero(rng.random(n) < 0.5)
    rows = _lexsorted(s, e, rows).astype(np.int32)  # search order: by start
    pairs = [(int(s[r]), int(e[r])) for r in rows]
    lo, hi, busy = _native.span_union_rows(s, e, rows)
    assert (lo, hi) == (min(p[0] for p in pairs), max(p[1] for p in pairs))
    assert busy == _union_by_hand(pairs)
    assert intervals.span_and_union_of_rows(s, e, rows) == (hi - lo, busy)
    # Rows out of start order: not answered, and the merge answers the same.
    shuffled = rng.permutation(rows).astype(np.int32)
    assert _native.span_union_rows(s, e, shuffled) is None
    assert intervals.span_and_union_of_rows(s, e, shuffled) == (hi - lo, busy)
    monkeypatch.setattr(intervals, "_native_span_union", lambda: None)
    assert intervals.span_and_union_of_rows(s, e, rows, block_rows=256) == (hi - lo, busy)
    assert _native.span_union_rows(s, e, np.zeros(0, np.int32)) == (0, 0, 0)
    with pytest.raises(IndexError, match="outside"):
        _native.span_union_rows(s, e, np.array([n], np.int32))
