"""The passes' per-trace cache: one computation per entry and key, per trace."""

from __future__ import annotations

import numpy as np

from tbdtrace.analysis.engine import context, shared_arrays
from tbdtrace.analysis.engine.cache import Entry
from tests.analysis.tiny import US, kernels, make

ENTRY: Entry[list[int]] = Entry("test.values", "a list made by the test")


def test_computes_once_per_key_and_trace(tmp_path):
    a = make(tmp_path, {"kernels": kernels([(0, 1, "k")])}, "a")
    b = make(tmp_path, {"kernels": kernels([(0, 1, "k")])}, "b")
    calls: list[str] = []

    def compute(tag: str) -> list[int]:
        calls.append(tag)
        return [len(calls)]

    first = context.of(a).cache.get(ENTRY, lambda: compute("a1"), 1)
    assert context.of(a).cache.get(ENTRY, lambda: compute("again"), 1) is first
    context.of(a).cache.get(ENTRY, lambda: compute("a2"), 2)
    context.of(b).cache.get(ENTRY, lambda: compute("b1"), 1)
    assert calls == ["a1", "a2", "b1"]
    assert context.of(a).cache.contains(ENTRY, 2) and not context.of(b).cache.contains(ENTRY, 2)


def test_scratch_drops_only_what_it_computed(tmp_path):
    tr = make(tmp_path, {"kernels": kernels([(0, 2, "k"), (5, 9, "k")])})
    cache = context.of(tr).cache
    kept = shared_arrays.ints(context.of(tr), "kernels", "start_ns")
    before = len(cache)
    with cache.scratch():
        d = shared_arrays.durations(context.of(tr), "kernels")
        assert len(cache) > before
    assert len(cache) == before
    assert shared_arrays.ints(context.of(tr), "kernels", "start_ns") is kept
    assert d.tolist() == [2 * US, 4 * US]


def test_shared_arrays_are_kept_read_only(tmp_path):
    tr = make(tmp_path, {"kernels": kernels([(0, 2, "k"), (1, 3, "k")])})
    ms, me = shared_arrays.merged(
        context.of(tr), shared_arrays.device_keys_of(context.of(tr))[0], "kernels"
    )
    assert (ms.tolist(), me.tolist()) == ([0], [3 * US])
    assert not ms.flags.writeable
    assert (
        shared_arrays.merged(
            context.of(tr), shared_arrays.device_keys_of(context.of(tr))[0], "kernels"
        )[0]
        is ms
    )
    assert isinstance(ms, np.ndarray)


def test_forget_drops_the_named_entries_of_those_arguments(tmp_path):
    cache = context.of(make(tmp_path, {"kernels": kernels([(0, 1, "k")])})).cache
    other: Entry[list[int]] = Entry("test.other", "another entry")
    for e, args in (
        (ENTRY, ("kernels", "start_ns", -1)),
        (ENTRY, ("kernels", "start_ns", 0)),
        (ENTRY, ("kernels", "end_ns", -1)),
        (other, ("kernels", "start_ns")),
    ):
        cache.get(e, lambda: [1], *args)
    cache.forget((ENTRY.name,), "kernels", "start_ns")
    assert not cache.contains(ENTRY, "kernels", "start_ns", -1)
    assert not cache.contains(ENTRY, "kernels", "start_ns", 0)
    assert cache.contains(ENTRY, "kernels", "end_ns", -1)
    assert cache.contains(other, "kernels", "start_ns")
    assert len(cache) == 2
