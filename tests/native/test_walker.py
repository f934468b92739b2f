"""cuptiActivityGetNextRecord over hand-built buffers (libcupti 13.0.85 walks them with no
driver; see shared/reference/cupti.md). Skipped only when cuptiGetVersion fails."""

from __future__ import annotations

import pytest

from tbdtrace import _native, _native_testing

MAX_LIMIT_REACHED = 12  # CUPTI_ERROR_MAX_LIMIT_REACHED: normal end of buffer
INVALID_KIND = 21  # CUPTI_ERROR_INVALID_KIND

pytestmark = pytest.mark.skipif(
    _native.cupti_version() <= 0, reason="cuptiGetVersion fails with this libcupti"
)


def kernels(n: int) -> list[bytes]:
    return [
        _native_testing.test_record(
            "kernel", {"start": 10 * i, "end": 10 * i + 5, "correlationId": i, "name": f"k{i % 2}"}
        )
        for i in range(n)
    ]


def test_cupti_is_the_pinned_13_0_library() -> None:
    assert _native.cupti_version() == 130001
    assert _native.cupti_library_path().endswith("libcupti.so.13")


def test_mixed_buffer_walks_every_record() -> None:
    recs = kernels(2) + [
        _native_testing.test_record("memcpy", {"copyKind": 1, "bytes": 8, "start": 1, "end": 2}),
        _native_testing.test_record(
            "runtime", {"cbid": 211, "start": 0, "end": 1, "correlationId": 1}
        ),
        _native_testing.test_record(
            "memory", {"memoryOperationType": 1, "bytes": 256, "timestamp": 3, "address": 4096}
        ),
        _native_testing.test_record("marker", {"flags": 1, "timestamp": 9, "id": 1, "name": "m"}),
    ]
    buf = b"".join(recs)
    r = _native_testing.walk_buffer(buf, len(buf))
    assert r["records"] == 6 and r["status"] == MAX_LIMIT_REACHED
    t = r["tables"]
    # Each column: (values, validity bitmap or None, null count).
    assert list(t["kernels"]["correlation_id"][0]) == [0, 1]
    assert list(t["kernels"]["start_ns"][0]) == [0, 10]
    assert {k: len(v["start_ns" if "start_ns" in v else "ts_ns"][0]) for k, v in t.items()} == {
        "kernels": 2,
        "memcpy": 1,
        "runtime": 1,
        "memory": 1,
        "markers": 1,
    }


def test_short_valid_size_drops_the_partial_last_record() -> None:
    buf = b"".join(kernels(3))
    r = _native_testing.walk_buffer(buf, len(buf) - 8)
    assert r["records"] == 2 and r["status"] == MAX_LIMIT_REACHED
    assert _native_testing.walk_buffer(buf, 0)["records"] == 0


def test_records_misaligned_in_the_buffer_are_refused_without_crash() -> None:
    # Records shifted 4 bytes off the 8-byte grid: the first "kind" read is padding.
    buf = b"\0" * 4 + b"".join(kernels(2))
    r = _native_testing.walk_buffer(buf, len(buf))
    assert r["records"] == 0 and r["status"] == INVALID_KIND


def test_walker_takes_no_misaligned_buffer() -> None:
    # Reading a record through its struct at an odd address is undefined behaviour, so the
    # test walker has no way to ask for one: it copies the bytes to 8-byte aligned storage,
    # as the collector's pool is (operator new[]: 16-byte aligned).
    buf = b"".join(kernels(2))
    with pytest.raises(TypeError):
        _native_testing.walk_buffer(buf, len(buf), misalign=4)  # type: ignore[call-arg]
    r = _native_testing.walk_buffer(buf, len(buf))
    assert r["records"] == 2 and list(r["tables"]["kernels"]["correlation_id"][0]) == [0, 1]


def test_invalid_kind_stops_the_walk() -> None:
    bad = _native_testing.test_record("kernel", {"kind": 0})
    buf = b"".join(kernels(1)) + bad
    r = _native_testing.walk_buffer(buf, len(buf))
    assert r["records"] == 1 and r["status"] == INVALID_KIND
