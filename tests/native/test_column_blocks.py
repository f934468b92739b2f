"""The column core's buffers (csrc/common/column_core.{h,cpp}): a buffer that grows past
``column_map_bytes`` becomes a mapping of its own, grown with mremap and handed over to
numpy, which unmaps it with its length when the array goes; the rows read back exactly
(the prefault thread populating pages ahead of the writer leaves them unchanged), through
growth, the collector's clear-and-refill and append, on both sides of the mapping size.

Expected values are the row formulas of ``_native_testing.column_blocks`` written again
here; whether a buffer is a mapping of its own is read from /proc/self/maps."""

from __future__ import annotations

import gc
import mmap
from pathlib import Path

import numpy as np
import pytest

from tbdtrace import _native_testing as nt

PAGE = mmap.PAGESIZE
MAPS = Path("/proc/self/maps")
pytestmark = pytest.mark.skipif(not MAPS.exists(), reason="needs /proc/self/maps (Linux)")


def expected(rows: list[int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{column: (values, valid)} for rows of these indices (the hook's formulas)."""
    i = np.array(rows, dtype=np.int64)
    b_valid = i % 7 != 3
    c_valid = i % 11 != 5
    ones = np.ones(len(i), dtype=bool)
    return {
        "a_i64": (i * 1000003 - 7, ones),
        "b_i32": (np.where(b_valid, i, 0).astype(np.int32), b_valid),
        "c_str": (np.where(c_valid, i % 1000, 0).astype(np.int32), c_valid),
        "d_u64": ((i.astype(np.uint64) << np.uint64(33)) | np.uint64(5), ones),
    }


def check(got: dict, rows: list[int]) -> None:
    n = len(rows)
    for col, (values, valid) in expected(rows).items():
        data, bitmap, nulls = got[col]
        assert data.dtype == values.dtype, col
        np.testing.assert_array_equal(data, values, err_msg=col)
        assert nulls == int((~valid).sum()), col
        if nulls == 0:
            assert bitmap is None, col
        else:
            assert len(bitmap) == (n + 7) // 8, col
            bits = np.unpackbits(bitmap, bitorder="little")[:n].astype(bool)
            np.testing.assert_array_equal(bits, valid, err_msg=col)


def regions() -> list[tuple[int, int, str]]:
    out = []
    for line in MAPS.read_text().splitlines():
        parts = line.split(maxsplit=5)
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        out.append((lo, hi, parts[5] if len(parts) > 5 else ""))
    return out


def own_mapping(a: np.ndarray) -> bool:
    """The array's buffer starts a page of an anonymous mapping (glibc's malloc never
    returns a page-aligned pointer into one: its mapped chunks carry a header)."""
    addr = a.__array_interface__["data"][0]
    if addr % PAGE:
        return False
    return any(lo <= addr < hi and name == "" for lo, hi, name in regions())


def mapped_pages(addr: int, nbytes: int) -> int:
    end = addr + (nbytes + PAGE - 1) // PAGE * PAGE
    return sum(max(0, min(hi, end) - max(lo, addr)) for lo, hi, _ in regions()) // PAGE


def test_rows_grown_past_the_mapping_size_read_back_and_are_unmapped_when_freed() -> None:
    n = 300_000  # int64 columns of 2.4 MB, int32 of 1.2 MB: past 1 MiB; bitmaps below
    assert n * 4 > nt.column_map_bytes
    got = nt.column_blocks([("fill", 0, n)])
    check(got, list(range(n)))
    for col in ("a_i64", "b_i32", "c_str", "d_u64"):
        assert own_mapping(got[col][0]), col
    assert not own_mapping(got["b_i32"][1])  # 37.5 KB bitmap: malloc'd
    big = got["a_i64"][0]
    addr, nbytes = big.__array_interface__["data"][0], big.nbytes
    assert mapped_pages(addr, nbytes) == (nbytes + PAGE - 1) // PAGE
    del big, got
    gc.collect()
    assert mapped_pages(addr, nbytes) == 0  # munmap of the whole length


def test_a_table_below_the_mapping_size_stays_malloced() -> None:
    got = nt.column_blocks([("fill", 0, 20_000)])
    check(got, list(range(20_000)))
    assert not any(own_mapping(got[c][0]) for c in got)


@pytest.mark.parametrize("prefault", [True, False])
def test_cleared_and_refilled_across_the_mapping_size(prefault: bool) -> None:
    # The collector's cycle: rows, clear (buffers kept), fewer rows, then more rows than
    # before (growing the kept mappings), and another table's rows appended.
    steps = [
        ("fill", 0, 200_000),
        ("clear", 0, 0),
        ("fill", 500_000, 50_000),
        ("clear", 0, 0),
        ("fill", 1_000_000, 400_000),
        ("append", 2_000_000, 150_003),
        ("fill", 3_000_000, 17),
    ]
    got = nt.column_blocks(steps, 8, prefault)
    rows = (
        list(range(1_000_000, 1_400_000))
        + list(range(2_000_000, 2_150_003))
        + list(range(3_000_000, 3_000_017))
    )
    check(got, rows)
    assert own_mapping(got["a_i64"][0])


def test_appended_rows_grow_an_empty_table_straight_past_the_mapping_size() -> None:
    got = nt.column_blocks([("append", 7, 262_145), ("fill", 9, 3)], 1024, True)
    check(got, list(range(7, 7 + 262_145)) + [9, 10, 11])
    assert own_mapping(got["d_u64"][0])


def test_an_empty_table_after_a_mapping_hands_over_empty_columns() -> None:
    got = nt.column_blocks([("fill", 0, 200_000), ("clear", 0, 0)])
    check(got, [])
