"""What a big report keeps smaller: thread groups sorted a block at a time, one process's
thread ids coded without packing, codes and row numbers in narrow integers (with the
wider type past their bounds), launch ids of one value as broadcasts, values let go of
and computed again the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tbdtrace.analysis.engine import attribution, context, shared_arrays
from tbdtrace.analysis.engine.cache import Entry, PassCache
from tbdtrace.analysis.passes import flops
from tests.analysis.tiny import US, kernels, make


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 22])
def test_groups_by_blocks_against_a_dictionary(monkeypatch, block: int) -> None:
    monkeypatch.setattr(attribution, "_SORT_ROWS", block)
    rng = np.random.default_rng(5)
    code = rng.integers(0, 4, 300).astype(np.int32)
    code[100:200] = 2  # blocks of one key
    keys = [(1, k) for k in range(4)]
    got = attribution._groups(keys, pa.array(code))
    for k, (_, c) in enumerate(keys):
        expect = [i for i, x in enumerate(code.tolist()) if x == c]
        assert got[keys[k]].tolist() == expect
        assert got[keys[k]].dtype == np.int32


def test_one_process_thread_rows_match_packed_ones() -> None:
    tid = np.array([5, 3, 5, -1, 3, 9, 9], dtype=np.int64)
    one = np.broadcast_to(np.int64(7), tid.shape)  # one pid, as the file's statistics give it
    got = attribution._thread_rows(lambda: one, lambda: tid)
    # First appearance order, each key's rows: written out from the ids.
    assert got is not None
    assert list(got) == [(7, 5), (7, 3), (7, -1), (7, 9)]
    assert [v.tolist() for v in got.values()] == [[0, 2], [1, 4], [3], [5, 6]]
    packed = attribution._thread_rows(lambda: np.full(tid.size, 7), lambda: tid)
    assert packed is not None and list(packed) == list(got)
    assert all(np.array_equal(packed[k], got[k]) for k in got)


@pytest.mark.parametrize(
    ("labels", "dtype"),
    [(3, np.int16), (2**15 - 2, np.int16), (2**15 - 1, np.int32), (2**31 - 1, np.int64)],
)
def test_code_type_bounds(labels: int, dtype: type) -> None:
    assert attribution.code_type(labels) is dtype
    # -1 and the largest code fit
    info = np.iinfo(dtype)
    assert info.min <= -1 and labels - 1 <= info.max


def test_codes_of_rows() -> None:
    idx = np.array([2, -1, 0, 2], dtype=np.int32)
    c = np.array([10, 11, 12], dtype=np.int32)
    got = attribution._codes(idx, c, 40000)  # past int16: int32
    assert got.tolist() == [12, -1, 10, 12] and got.dtype == np.int32
    got = attribution._codes(idx, c, 13)
    assert got.tolist() == [12, -1, 10, 12] and got.dtype == np.int16


def test_one_launch_value() -> None:
    hit = np.array([True, False, True])
    seven = np.broadcast_to(np.int64(7), (3,))
    own = np.array([7, 7, 7])
    got = attribution.one_launch_value(own, seven, np.ones(3, bool))
    assert got is not None and got.tolist() == [7, 7, 7] and got.strides == (0,)
    got = attribution.one_launch_value(seven, seven, hit)
    assert got is not None and got.tolist() == [7, 7, 7]
    # A kernel's own value differs, or is not known to be one value: gathered.
    assert attribution.one_launch_value(np.broadcast_to(np.int64(8), (3,)), seven, hit) is None
    assert attribution.one_launch_value(own, seven, hit) is None
    assert attribution.one_launch_value(seven, np.array([7, 7, 7]), hit) is None


def test_forget_of_a_table() -> None:
    cache = PassCache()
    a, b = Entry[int]("t.a", ""), Entry[int]("t.b", "")
    calls = []

    def value(v: int) -> int:
        calls.append(v)
        return v

    assert cache.get(a, lambda: value(1), "ops", "x") == 1
    assert cache.get(b, lambda: value(2), "ops") == 2
    assert cache.get(a, lambda: value(3), "kernels", "x") == 3
    cache.forget_of("ops")
    assert not cache.contains(a, "ops", "x") and not cache.contains(b, "ops")
    assert cache.contains(a, "kernels", "x")
    assert cache.get(a, lambda: value(1), "ops", "x") == 1  # computed again
    assert calls == [1, 2, 3, 1]


def _trace(tmp_path: Path):
    rows = [(0, 4, "a"), (2, 6, "b"), (10, 11, "c"), (20, 30, "d")]
    return make(tmp_path, {"kernels": kernels(rows)})


def test_durations_of_a_big_table_are_not_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(shared_arrays, "KEEP_DURATIONS_ROWS", 2)
    ctx = context.of(_trace(tmp_path))
    got = shared_arrays.durations(ctx, "kernels")
    assert got.tolist() == [4 * US, 4 * US, 1 * US, 10 * US]
    assert not ctx.cache.contains(shared_arrays.DURATIONS, "kernels")
    assert shared_arrays.durations(ctx, "kernels").tolist() == got.tolist()


def test_busy_time_with_and_without_the_merged_intervals(tmp_path: Path) -> None:
    # Union of [0,4) [2,6) [10,11) [20,30): 6 + 1 + 10 us, written out.
    expect = 17 * US
    ctx = context.of(_trace(tmp_path))
    keys = shared_arrays.device_keys_of(ctx)
    assert flops.compute_busy_ns(ctx, keys) == expect
    assert not ctx.cache.contains(shared_arrays.MERGED, keys[0], "kernels")
    ctx2 = context.of(_trace(tmp_path / "2"))
    shared_arrays.merged(ctx2, keys[0], "kernels")  # the summary's, made first
    assert flops.compute_busy_ns(ctx2, keys) == expect
