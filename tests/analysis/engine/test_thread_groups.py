"""Rows grouped by thread: packed ids a block at a time, and ids that do not pack."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tbdtrace.analysis.engine import attribution, context
from tests.analysis.tiny import make


def by_dict(pid, tid):
    out: dict[tuple[int, int], list[int]] = {}
    for i, key in enumerate(zip(pid.tolist(), tid.tolist(), strict=True)):
        out.setdefault(key, []).append(i)
    return out


@pytest.mark.parametrize("block", [1, 3, 1 << 20])
@pytest.mark.parametrize("wide", [False, True])
def test_thread_groups_against_a_dictionary(monkeypatch, block, wide):
    monkeypatch.setattr(attribution, "_PACK_ROWS", block)
    rng = np.random.default_rng(3)
    pid = rng.choice([-1, 0, 7, 12345], 50).astype(np.int64)
    tid = rng.choice([-1, 1, 99, 2**31 + 5], 50).astype(np.int64)
    if wide:  # ids beyond the packed range: grouped by np.unique
        tid[4] = 2**40
        pid[9] = 2**31
    got = {k: v.tolist() for k, v in attribution.thread_groups(pid, tid).items()}
    assert got == by_dict(pid, tid)


def test_range_groups_of_a_table(tmp_path: Path):
    pid = [5, 5, 6, 5, 6]
    tid = [1, 2, 1, 1, 1]
    ops = {
        "start_ns": list(range(5)),
        "end_ns": [i + 1 for i in range(5)],
        "name": ["a"] * 5,
        "pid": pid,
        "tid": tid,
    }
    ctx = context.of(make(tmp_path, {"ops": ops}))
    got = {k: v.tolist() for k, v in attribution.range_groups(ctx, "ops").items()}
    assert got == by_dict(np.array(pid), np.array(tid))
    assert all(v.dtype == np.int32 for v in attribution.range_groups(ctx, "ops").values())
