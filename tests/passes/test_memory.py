"""The memory pass: golden tiny traces (rows in, expected timeline out) and real Kineto
traces checked against an independent replay of their raw ``[memory]`` events."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.passes import memory
from tbdtrace.report import build
from tests import rawkineto
from tests.conftest import KINETO_TRACES

CATS = tbdtrace.schema.MEMORY_CATEGORIES


def _trace(tmp_path: Path, rows: list[tuple[Any, ...]],
           steps: list[tuple[int, int, int]] | None = None) -> tbdtrace.Trace:
    """rows: (ts_ns, action, level, bytes, address, category[, device_id])."""
    cols: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        ts, action, level, nbytes, addr, cat, *dev = r
        cols["ts_ns"].append(ts), cols["action"].append(action), cols["level"].append(level)
        cols["bytes"].append(nbytes), cols["address"].append(addr)
        cols["category"].append(cat), cols["device_id"].append(dev[0] if dev else 0)
        cols["device_type"].append("cuda")
    tables: dict[str, Any] = {"memory": dict(cols)}
    if steps:
        tables["steps"] = {"step": [s[0] for s in steps], "start_ns": [s[1] for s in steps],
                           "end_ns": [s[2] for s in steps]}
    return tbdtrace.open(tbdtrace.write(tmp_path / "t", tables, {"source": "test"}))


def _rows(tl: Any, *cols: str) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in cols) for r in tl.to_pylist()]


GOLDEN = [
    (10, "alloc", "allocated", 100, 1, "weights"),
    (20, "alloc", "allocated", 50, 2, "activations"),
    (30, "free", "allocated", 50, 2, None),  # category comes from its alloc
    (40, "alloc", "allocated", 30, 3, None),  # no category: other
    (45, "free", "allocated", 999, 9, None),  # allocated before capture: dropped
    (50, "free", "allocated", 100, 1, "weights"),
]


def test_golden_timeline(tmp_path: Path) -> None:
    tl = memory.timeline(_trace(tmp_path, GOLDEN))
    assert _rows(tl, "ts_ns", "action", "category", "bytes", "total_bytes") == [
        (10, "alloc", "weights", 100, 100),
        (20, "alloc", "activations", 50, 150),
        (30, "free", "activations", 50, 100),
        (40, "alloc", "other", 30, 130),
        (50, "free", "weights", 100, 30),
    ]
    assert _rows(tl, "weights_bytes", "activations_bytes", "other_bytes") == [
        (100, 0, 0), (100, 50, 0), (100, 0, 0), (100, 0, 30), (0, 0, 30)]


def test_golden_summary(tmp_path: Path) -> None:
    doc = memory.summarize(_trace(tmp_path, GOLDEN))
    assert doc["level"] == "allocated"
    assert (doc["peak_bytes"], doc["peak_ts_ns"]) == (150, 20)
    assert doc["breakdown_at_peak"] == {c: {"weights": 100, "activations": 50}.get(c, 0)
                                        for c in CATS}
    assert doc["unmatched_frees"] == 1
    assert doc["event_count"] == len(GOLDEN)
    assert doc["first_ts_ns"] == 10


def test_frees_without_allocs_never_negative(tmp_path: Path) -> None:
    rows = [(t, "free", "allocated", 64, t, "gradients") for t in range(1, 6)]
    rows += [(10, "alloc", "allocated", 8, 100, "gradients"),
             (11, "free", "allocated", 8, 100, None),
             (12, "free", "allocated", 8, 100, None)]  # a second free of the same block
    tr = _trace(tmp_path, rows)
    tl = memory.timeline(tr)
    assert _rows(tl, "ts_ns", "gradients_bytes", "total_bytes") == [(10, 8, 8), (11, 0, 0)]
    doc = memory.summarize(tr)
    assert doc["unmatched_frees"] == 6
    assert doc["peak_bytes"] == 8


def test_lost_free_closes_the_older_block(tmp_path: Path) -> None:
    rows = [(10, "alloc", "allocated", 100, 7, "other"),
            (20, "alloc", "allocated", 40, 7, "other"),  # the free of the first was lost
            (30, "free", "allocated", 40, 7, None)]
    tl = memory.timeline(_trace(tmp_path, rows))
    assert _rows(tl, "ts_ns", "action", "bytes", "total_bytes") == [
        (10, "alloc", 100, 100), (20, "free", 100, 0), (20, "alloc", 40, 40),
        (30, "free", 40, 0)]


def test_null_addresses_pair_by_size(tmp_path: Path) -> None:
    rows = [(10, "alloc", "allocated", 64, None, "other"),
            (20, "alloc", "allocated", 64, None, "other"),
            (30, "free", "allocated", 64, None, None),
            (40, "free", "allocated", 32, None, None)]  # no live block of 32 bytes
    tr = _trace(tmp_path, rows)
    assert _rows(memory.timeline(tr), "ts_ns", "total_bytes") == [(10, 64), (20, 128), (30, 64)]
    assert memory.summarize(tr)["unmatched_frees"] == 1


def test_levels_kept_apart_and_devices_summed(tmp_path: Path) -> None:
    rows = [(5, "alloc", "reserved", 1000, 1, None, 0),
            (6, "alloc", "reserved", 2000, 1, None, 1),  # same address, other device
            (10, "alloc", "allocated", 300, 1, "weights", 0),
            (11, "alloc", "allocated", 200, 1, "weights", 1),
            (20, "free", "reserved", 2000, 1, None, 1),
            (21, "free", "allocated", 200, 1, None, 1)]
    doc = memory.summarize(_trace(tmp_path, rows))
    assert doc["level"] == "allocated"
    assert (doc["peak_bytes"], doc["peak_ts_ns"]) == (500, 11)
    assert doc["levels"]["reserved"]["peak_bytes"] == 3000
    assert doc["levels"]["reserved"]["breakdown_at_peak"]["other"] == 3000
    peaks = {(d["level"], d["device_id"]): d["peak_bytes"] for d in doc["devices"]}
    assert peaks == {("allocated", 0): 300, ("allocated", 1): 200,
                     ("reserved", 0): 1000, ("reserved", 1): 2000}
    only_reserved = memory.summarize(_trace(tmp_path / "r", rows[:2] + rows[4:5]))
    assert only_reserved["level"] == "reserved"
    assert only_reserved["peak_bytes"] == 3000


def test_per_step_windows(tmp_path: Path) -> None:
    rows = [(10, "alloc", "allocated", 100, 1, "weights"),
            (20, "alloc", "allocated", 50, 2, "activations"),
            (30, "free", "allocated", 50, 2, None),
            (40, "alloc", "allocated", 20, 3, "activations"),
            (45, "free", "allocated", 20, 3, None)]
    steps = memory.summarize(_trace(tmp_path, rows, steps=[(0, 15, 35), (1, 35, 50),
                                                           (2, 60, 70)]))["steps"]
    assert [(s["step"], s["start_bytes"], s["peak_bytes"], s["peak_ts_ns"], s["end_bytes"])
            for s in steps] == [(0, 100, 150, 20, 100), (1, 100, 120, 40, 100),
                                (2, 100, 100, 60, 100)]
    assert steps[0]["breakdown_at_peak"]["activations"] == 50
    assert steps[2]["breakdown_at_peak"]["weights"] == 100


def test_empty_trace(tmp_path: Path) -> None:
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", {}, {"source": "test"}))
    doc = memory.summarize(tr)
    assert doc["peak_bytes"] == 0 and doc["peak_ts_ns"] is None
    assert doc["breakdown_at_peak"] == {c: 0 for c in CATS}
    assert memory.run(tr).num_rows == 0


def test_report_has_memory_section(tmp_path: Path) -> None:
    doc = build(_trace(tmp_path, GOLDEN))
    assert set(doc["memory"]["breakdown_at_peak"]) == set(CATS)
    assert doc["memory"]["peak_bytes"] == 150


def _replay(path: Path) -> tuple[dict[tuple[int, int], int], int]:
    """Independent replay of raw [memory] events: peak live bytes per (device type, id)
    and the number of frees whose alloc was not seen."""
    evs = [e for e in rawkineto.load(path)["traceEvents"] if e.get("name") == "[memory]"]
    evs.sort(key=lambda e: rawkineto.ns(e["ts"]))  # stable: ties keep file order
    live: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
    cur: dict[tuple[int, int], int] = defaultdict(int)
    peak: dict[tuple[int, int], int] = defaultdict(int)
    by_size: dict[tuple[int, int], dict[int, list[int]]] = defaultdict(dict)
    unmatched = 0
    for e in evs:
        a = e["args"]
        dev, b = (int(a.get("Device Type", 0)), int(a.get("Device Id", -1))), int(a["Bytes"])
        # Old Kineto wrote no Addr: then a free closes the oldest live block of its size.
        addr = int(a["Addr"]) if "Addr" in a else None
        sizes = by_size[dev].setdefault(abs(b), [])
        if b >= 0 and addr is None:
            sizes.append(b)
            cur[dev] += b
        elif b >= 0:
            cur[dev] += b - live[dev].pop(addr, 0)
            live[dev][addr] = b
        elif addr is None and sizes:
            cur[dev] -= sizes.pop(0)
        elif addr is not None and addr in live[dev]:
            cur[dev] -= live[dev].pop(addr)
        else:
            unmatched += 1
        peak[dev] = max(peak[dev], cur[dev])
    return dict(peak), unmatched


WITH_MEMORY = [p for p in KINETO_TRACES if b'"[memory]"' in rawkineto.gzip.decompress(
    p.read_bytes())]


@pytest.mark.parametrize("path", WITH_MEMORY, ids=lambda p: p.name)
def test_real_kineto_peaks_match_replay(tmp_path: Path, path: Path) -> None:
    from tbdtrace.importers import kineto

    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", tables, meta))
    doc = memory.summarize(tr)
    want, unmatched = _replay(path)
    code = {"cpu": 0, "cuda": 1}
    got = {(code[d["device_type"]], -1 if d["device_id"] is None else d["device_id"]):
           d["peak_bytes"] for d in doc["devices"]}
    assert got == {k: v for k, v in want.items() if v > 0 or k in got}
    assert doc["unmatched_frees"] == unmatched
    raw = [e["args"] for e in rawkineto.load(path)["traceEvents"] if e.get("name") == "[memory]"]
    for key, field in (("allocator_peak_bytes", "Total Allocated"),
                       ("allocator_reserved_peak_bytes", "Total Reserved")):
        vals = [int(a[field]) for a in raw if field in a]
        assert doc[key] == (max(vals) if vals else None)
    tl = memory.timeline(tr)
    assert min(tl.column("total_bytes").to_pylist(), default=0) >= 0
