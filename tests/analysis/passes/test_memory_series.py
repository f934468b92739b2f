"""Memory over time per device and category, and its thinning."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tbdtrace.analysis.passes import memory_series
from tests.analysis.tiny import make

MIB = 1 << 20


def _mem(rows: list[tuple], **extra: list) -> dict:
    """rows: (ts_ns, action, bytes, address, device_id, category)."""
    return {
        "ts_ns": [r[0] for r in rows],
        "action": [r[1] for r in rows],
        "level": ["allocated"] * len(rows),
        "bytes": [r[2] for r in rows],
        "address": [r[3] for r in rows],
        "device_id": [r[4] for r in rows],
        "device_type": ["cuda"] * len(rows),
        "category": [r[5] for r in rows],
        **extra,
    }


def test_live_bytes_per_device_and_category(tmp_path: Path) -> None:
    rows = [
        (10, "alloc", 4 * MIB, 0x100, 0, "weights"),
        (20, "alloc", 2 * MIB, 0x200, 1, "activations"),
        (30, "alloc", 1 * MIB, 0x300, 0, "activations"),
        (40, "free", 1 * MIB, 0x300, 0, "activations"),
        (50, "free", 7 * MIB, 0x999, 0, None),  # allocated before capture: dropped
    ]
    tr = make(tmp_path, {"memory": _mem(rows, total_reserved_bytes=[8 * MIB] * 5)})
    out = memory_series.run(tr).to_pylist()
    events = [
        (r["device_id"], r["ts_ns"], r["weights_bytes"], r["activations_bytes"], r["total_bytes"])
        for r in out
        if r["source"] == "events"
    ]
    assert events == [
        (0, 10, 4 * MIB, 0, 4 * MIB),
        (0, 30, 4 * MIB, 1 * MIB, 5 * MIB),
        (0, 40, 4 * MIB, 0, 4 * MIB),
        (1, 20, 0, 2 * MIB, 2 * MIB),
    ]
    # No reserved events: the allocator's reported totals form the reserved series.
    reserved = [
        (r["device_id"], r["ts_ns"], r["total_bytes"], r["weights_bytes"])
        for r in out
        if r["level"] == "reserved"
    ]
    assert {r[0] for r in reserved} == {0, 1}
    assert all(r[2] == 8 * MIB and r[3] is None for r in reserved)
    assert {r["source"] for r in out if r["level"] == "reserved"} == {"allocator_total"}


def test_thin_keeps_the_peak_and_the_last_point() -> None:
    ts = np.arange(10_000, dtype=np.int64)
    total = (ts % 97).astype(np.int64)
    total[5432] = 10**9
    keep = memory_series.thin(ts, total, 50)
    assert keep.size <= 100 and 5432 in keep and keep[-1] == ts.size - 1
    assert np.all(np.diff(keep) > 0)
    # Each bucket's maximum is kept: the thinned series' max per bucket equals the full one.
    bucket = ts * 50 // (ts[-1] - ts[0])
    bucket = np.minimum(bucket, 49)
    for b in range(50):
        m = bucket == b
        assert total[keep][bucket[keep] == b].max() == total[m].max()
    assert np.array_equal(memory_series.thin(ts[:30], total[:30], 50), np.arange(30))
