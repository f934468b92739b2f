"""A range table's thread groups in search order, and the innermost-op search over ops whose
equal starts list the shorter op first (as profiler files write them), against a
brute-force search written here."""

from __future__ import annotations

import numpy as np

import tbdtrace
from tbdtrace.analysis.engine import attribution, context

# (start_ns, end_ns) of one thread's ops in table order: sorted by start, the shorter of
# two equal starts first (C before B, F before E).
OPS = [(0, 100), (10, 30), (10, 50), (60, 70), (60, 90), (120, 130)]
OTHER = [(0, 200)]  # another thread's op, never the answer for this thread's queries


def _trace():
    rows = OPS + OTHER
    ops = {
        "start_ns": [s for s, _ in rows],
        "end_ns": [e for _, e in rows],
        "pid": [1] * len(rows),
        "tid": [7] * len(OPS) + [8] * len(OTHER),
        "name": [f"op{i}" for i in range(len(rows))],
        "category": ["cpu_op"] * len(rows),
    }
    # In memory, rows in the given order (a written trace is stored sorted).
    return tbdtrace.trace.from_tables({"ops": ops}, {"source": "test"})


def _brute(t: int) -> int:
    """The op of thread 7 containing t that starts last, the shorter of equal starts."""
    hits = [i for i, (s, e) in enumerate(OPS) if s <= t <= e]
    return min(hits, key=lambda i: (-OPS[i][0], OPS[i][1])) if hits else -1


def test_groups_in_search_order_and_innermost_as_brute_force():
    ctx = context.of(_trace())
    groups = attribution.range_groups(ctx, "ops")
    assert groups[(1, 7)].tolist() == [0, 2, 1, 4, 3, 5]  # by start, then longer first
    assert groups[(1, 8)].tolist() == [6]
    q_t = np.array([5, 15, 30, 35, 55, 65, 75, 95, 110, 125, 140], np.int64)
    queries = {(1, 7): np.arange(q_t.size)}
    keep = np.ones(len(OPS) + len(OTHER), bool)
    got = attribution.on_threads(ctx, "ops", keep, queries, q_t)
    assert got.tolist() == [_brute(int(t)) for t in q_t]
    assert got.tolist()[:4] == [0, 1, 1, 2]  # C (10..30) inside B (10..50) is the inner one
    # A subset of the rows (here without C) keeps the order: B is found where C was.
    keep[1] = False
    got = attribution.on_threads(ctx, "ops", keep, queries, q_t)
    assert got.tolist()[:4] == [0, 2, 2, 2]
