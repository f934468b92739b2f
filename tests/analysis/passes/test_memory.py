"""The memory pass: golden tiny traces (rows in, expected timeline out) and real Kineto
traces checked against an independent replay of their raw ``[memory]`` events."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.analysis.engine import memory_replay
from tbdtrace.analysis.passes import memory
from tbdtrace.report import build
from tests import rawkineto
from tests.conftest import KINETO_TRACES

CATS = tbdtrace.schema.MEMORY_CATEGORIES
PARTS = (*CATS, "pre_existing")  # the summary's breakdown


def _trace(
    tmp_path: Path, rows: list[tuple[Any, ...]], steps: list[tuple[int, int, int]] | None = None
) -> tbdtrace.Trace:
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
        tables["steps"] = {
            "step": [s[0] for s in steps],
            "start_ns": [s[1] for s in steps],
            "end_ns": [s[2] for s in steps],
        }
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
        (100, 0, 0),
        (100, 50, 0),
        (100, 0, 0),
        (100, 0, 30),
        (0, 0, 30),
    ]


def test_golden_summary(tmp_path: Path) -> None:
    doc = memory_replay.summarize(_trace(tmp_path, GOLDEN))
    assert doc["level"] == "allocated"
    assert (doc["peak_bytes"], doc["peak_ts_ns"]) == (150, 20)
    assert doc["breakdown_at_peak"] == {
        c: {"weights": 100, "activations": 50}.get(c, 0) for c in PARTS
    }
    assert doc["source"] == "replay"
    assert doc["device"] == {"device_type": "cuda", "device_id": 0, "rank": None, "pid": None}
    assert doc["unmatched_frees"] == 1
    assert doc["event_count"] == len(GOLDEN)
    assert doc["first_ts_ns"] == 10


def test_frees_without_allocs_never_negative(tmp_path: Path) -> None:
    rows = [(t, "free", "allocated", 64, t, "gradients") for t in range(1, 6)]
    rows += [
        (10, "alloc", "allocated", 8, 100, "gradients"),
        (11, "free", "allocated", 8, 100, None),
        (12, "free", "allocated", 8, 100, None),
    ]  # a second free of the same block
    tr = _trace(tmp_path, rows)
    tl = memory.timeline(tr)
    assert _rows(tl, "ts_ns", "gradients_bytes", "total_bytes") == [(10, 8, 8), (11, 0, 0)]
    doc = memory_replay.summarize(tr)
    assert doc["unmatched_frees"] == 6
    assert doc["peak_bytes"] == 8


def test_lost_free_closes_the_older_block(tmp_path: Path) -> None:
    rows = [
        (10, "alloc", "allocated", 100, 7, "other"),
        (20, "alloc", "allocated", 40, 7, "other"),  # the free of the first was lost
        (30, "free", "allocated", 40, 7, None),
    ]
    tl = memory.timeline(_trace(tmp_path, rows))
    assert _rows(tl, "ts_ns", "action", "bytes", "total_bytes") == [
        (10, "alloc", 100, 100),
        (20, "free", 100, 0),
        (20, "alloc", 40, 40),
        (30, "free", 40, 0),
    ]


def test_null_addresses_pair_by_size(tmp_path: Path) -> None:
    rows = [
        (10, "alloc", "allocated", 64, None, "other"),
        (20, "alloc", "allocated", 64, None, "other"),
        (30, "free", "allocated", 64, None, None),
        (40, "free", "allocated", 32, None, None),
    ]  # no live block of 32 bytes
    tr = _trace(tmp_path, rows)
    assert _rows(memory.timeline(tr), "ts_ns", "total_bytes") == [(10, 64), (20, 128), (30, 64)]
    assert memory_replay.summarize(tr)["unmatched_frees"] == 1


def test_levels_and_devices_kept_apart(tmp_path: Path) -> None:
    rows = [
        (5, "alloc", "reserved", 1000, 1, None, 0),
        (6, "alloc", "reserved", 2000, 1, None, 1),  # same address, other device
        (10, "alloc", "allocated", 300, 1, "weights", 0),
        (11, "alloc", "allocated", 200, 1, "weights", 1),
        (20, "free", "reserved", 2000, 1, None, 1),
        (21, "free", "allocated", 200, 1, None, 1),
    ]
    doc = memory_replay.summarize(_trace(tmp_path, rows))
    assert doc["level"] == "allocated"
    # The headline is one device (the largest peak: device 0), never a sum of devices.
    assert (doc["peak_bytes"], doc["peak_ts_ns"]) == (300, 10)
    assert doc["device"]["device_id"] == 0
    assert doc["levels"]["reserved"]["peak_bytes"] == 1000
    assert doc["levels"]["reserved"]["breakdown_at_peak"]["other"] == 1000
    peaks = {(d["level"], d["device_id"]): d["peak_bytes"] for d in doc["devices"]}
    assert peaks == {
        ("allocated", 0): 300,
        ("allocated", 1): 200,
        ("reserved", 0): 1000,
        ("reserved", 1): 2000,
    }
    only_reserved = memory_replay.summarize(_trace(tmp_path / "r", rows[:2] + rows[4:5]))
    assert only_reserved["level"] == "reserved"
    assert only_reserved["peak_bytes"] == 2000


def test_per_step_windows(tmp_path: Path) -> None:
    rows = [
        (10, "alloc", "allocated", 100, 1, "weights"),
        (20, "alloc", "allocated", 50, 2, "activations"),
        (30, "free", "allocated", 50, 2, None),
        (40, "alloc", "allocated", 20, 3, "activations"),
        (45, "free", "allocated", 20, 3, None),
    ]
    steps = memory_replay.summarize(
        _trace(tmp_path, rows, steps=[(0, 15, 35), (1, 35, 50), (2, 60, 70)])
    )["steps"]
    assert [
        (s["step"], s["start_bytes"], s["peak_bytes"], s["peak_ts_ns"], s["end_bytes"])
        for s in steps
    ] == [(0, 100, 150, 20, 100), (1, 100, 120, 40, 100), (2, 100, 100, 60, 100)]
    assert steps[0]["breakdown_at_peak"]["activations"] == 50
    assert steps[2]["breakdown_at_peak"]["weights"] == 100


def test_empty_trace(tmp_path: Path) -> None:
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", {}, {"source": "test"}))
    doc = memory_replay.summarize(tr)
    assert doc["peak_bytes"] is None and doc["peak_ts_ns"] is None
    assert doc["breakdown_at_peak"] is None and doc["device"] is None
    assert doc["allocator_peak_bytes"] is None
    assert memory.run(tr).num_rows == 0


def test_no_memory_events_give_null_step_bytes(tmp_path: Path) -> None:
    steps = {"step": [0], "start_ns": [10], "end_ns": [20]}
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", {"steps": steps}, {"source": "kineto"}))
    (st,) = memory_replay.summarize(tr)["steps"]
    assert (st["start_bytes"], st["peak_bytes"], st["end_bytes"]) == (None, None, None)


def test_report_has_memory_section(tmp_path: Path) -> None:
    doc = build(_trace(tmp_path, GOLDEN))
    assert set(doc["memory"]["breakdown_at_peak"]) == set(PARTS)
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


WITH_MEMORY = [
    p for p in KINETO_TRACES if b'"[memory]"' in rawkineto.gzip.decompress(p.read_bytes())
]


@pytest.mark.parametrize("path", WITH_MEMORY, ids=lambda p: p.name)
def test_real_kineto_peaks_match_replay(tmp_path: Path, path: Path) -> None:
    from tbdtrace.importers import kineto

    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", tables, meta))
    doc = memory_replay.summarize(tr)
    want, unmatched = _replay(path)
    code = {"cpu": 0, "cuda": 1}
    got = {
        (code[d["device_type"]], -1 if d["device_id"] is None else d["device_id"]): d[
            "replay_peak_bytes"
        ]
        for d in doc["devices"]
    }
    assert got == {k: v for k, v in want.items() if v > 0 or k in got}
    assert doc["unmatched_frees"] == unmatched
    tl = memory.timeline(tr)
    assert min(tl.column("total_bytes").to_pylist(), default=0) >= 0


def _raw_totals(path: Path) -> dict[tuple[int, int], list[tuple[int, int, int, int | None]]]:
    """(device type, id) -> [(ts_ns, Bytes, Total Allocated, Total Reserved)] in time
    order, for the raw [memory] events that carry Total Allocated; times on the
    importer's clock (the trace's baseTimeNanoseconds added)."""
    doc = rawkineto.load(path)
    base = int(doc.get("baseTimeNanoseconds", 0))
    evs = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    out: dict[tuple[int, int], list[tuple[int, int, int, int | None]]] = defaultdict(list)
    for e in sorted(evs, key=lambda e: rawkineto.ns(e["ts"])):
        a = e["args"]
        if "Total Allocated" in a:
            res = int(a["Total Reserved"]) if "Total Reserved" in a else None
            dev = (int(a["Device Type"]), int(a["Device Id"]))
            out[dev].append(
                (rawkineto.ns(e["ts"]) + base, int(a["Bytes"]), int(a["Total Allocated"]), res)
            )
    return dict(out)


def _raw_steps(path: Path) -> list[tuple[int, int]]:
    """(start_ns, end_ns) of the raw ProfilerStep#N ranges on the CPU, by start."""
    doc = rawkineto.load(path)
    base = int(doc.get("baseTimeNanoseconds", 0))
    return sorted(
        {
            (rawkineto.ns(e["ts"]) + base, rawkineto.ns(e["ts"]) + rawkineto.ns(e["dur"]) + base)
            for e in doc["traceEvents"]
            if e.get("ph") == "X"
            and e.get("cat") != "gpu_user_annotation"
            and str(e.get("name", "")).startswith("ProfilerStep#")
        }
    )


@pytest.mark.parametrize("path", WITH_MEMORY, ids=lambda p: p.name)
def test_real_kineto_peak_per_device_is_the_allocators_total(tmp_path: Path, path: Path) -> None:
    from tbdtrace.importers import kineto

    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", tables, meta))
    doc = memory_replay.summarize(tr)
    raw = _raw_totals(path)
    code = {"cpu": 0, "cuda": 1}
    got = {
        (code[d["device_type"]], -1 if d["device_id"] is None else d["device_id"]): d
        for d in doc["devices"]
        if d["level"] == "allocated"
    }
    if not raw:  # no totals in this trace (2021 schema): the replay is the level
        assert all(d["source"] == "replay" for d in got.values())
        assert doc["source"] == "replay" and doc["allocator_peak_bytes"] is None
        return
    for dev, rows in raw.items():
        assert got[dev]["source"] == "allocator_totals"
        assert got[dev]["peak_bytes"] == max(ta for _, _, ta, _ in rows), dev
    # The headline: the GPU's peak, never host bytes added in.
    gpu = {d: max(ta for _, _, ta, _ in rows) for d, rows in raw.items() if d[0] != 0}
    head = max(gpu, key=lambda d: gpu[d])
    assert doc["peak_bytes"] == gpu[head]
    assert (doc["device"]["device_type"], doc["device"]["device_id"]) == ("cuda", head[1])
    assert doc["source"] == "allocator_totals"
    assert doc["allocator_peak_bytes"] == doc["peak_bytes"]
    reserved = [r for *_, r in raw[head] if r is not None]
    assert doc["allocator_reserved_peak_bytes"] == max(reserved)
    assert doc["levels"]["reserved"]["peak_bytes"] == max(reserved)
    # The breakdown adds up to the total: the replay's categories plus pre_existing.
    assert sum(doc["breakdown_at_peak"].values()) == doc["peak_bytes"]
    assert doc["replay_excess_bytes"] == 0
    steps = _raw_steps(path)
    assert [(s["start_ns"], s["end_ns"]) for s in doc["steps"]] == steps
    for st, (s, _) in zip(doc["steps"], steps, strict=True):
        # The level at a step's start: the total after the device's last event before it;
        # before the first event, that event's total less its own bytes.
        before = [ta for ts, _, ta, _ in raw[head] if ts < s]
        ts0, b0, ta0, _ = raw[head][0]
        assert st["start_bytes"] == (before[-1] if before else ta0 - b0)
        assert st["breakdown_at_peak"]["pre_existing"] >= 0


def _kineto_like(tmp_path: Path, source: str) -> tbdtrace.Trace:
    # cuda:0 holds 1,000 bytes from before the trace; cpu holds 5,000 of host memory.
    #   ts  action  bytes addr total   (cuda:0 unless said)
    #   10  alloc   100   1    1100
    #   15  alloc   10    7    5010    cpu
    #   20  free    500   9    600     allocated before the trace: the replay drops it
    #   30  alloc   50    2    650
    #   40  free    100   1    550
    rows = [
        (10, "alloc", 100, 1, 1100, "cuda", 0, "activations"),
        (15, "alloc", 10, 7, 5010, "cpu", None, None),
        (20, "free", 500, 9, 600, "cuda", 0, None),
        (30, "alloc", 50, 2, 650, "cuda", 0, "gradients"),
        (40, "free", 100, 1, 550, "cuda", 0, None),
    ]
    cols = {
        "ts_ns": [r[0] for r in rows],
        "action": [r[1] for r in rows],
        "level": ["allocated"] * 5,
        "bytes": [r[2] for r in rows],
        "address": [r[3] for r in rows],
        "total_allocated_bytes": [r[4] for r in rows],
        "device_type": [r[5] for r in rows],
        "device_id": [r[6] for r in rows],
        "category": [r[7] for r in rows],
    }
    steps = {"step": [0, 1], "start_ns": [5, 25], "end_ns": [25, 45]}
    return tbdtrace.open(
        tbdtrace.write(tmp_path / source, {"memory": cols, "steps": steps}, {"source": source})
    )


def test_allocator_totals_with_pre_existing(tmp_path: Path) -> None:
    doc = memory_replay.summarize(_kineto_like(tmp_path, "kineto"))
    assert doc["source"] == "allocator_totals"
    assert doc["device"]["device_type"] == "cuda"
    assert (doc["peak_bytes"], doc["peak_ts_ns"]) == (1100, 10)
    assert doc["breakdown_at_peak"] == {
        c: {"activations": 100, "pre_existing": 1000}.get(c, 0) for c in PARTS
    }
    assert doc["allocator_peak_bytes"] == 1100
    steps = [
        (s["start_bytes"], s["peak_bytes"], s["peak_ts_ns"], s["end_bytes"]) for s in doc["steps"]
    ]
    # Step 0 starts before any event: 1100 - 100 = 1000, all of it pre-existing.
    assert steps == [(1000, 1100, 10, 600), (600, 650, 30, 550)]
    assert doc["steps"][1]["breakdown_at_peak"] == {
        c: {"activations": 100, "gradients": 50, "pre_existing": 500}.get(c, 0) for c in PARTS
    }
    devs = {
        (d["device_type"], d["level"]): (d["peak_bytes"], d["replay_peak_bytes"], d["source"])
        for d in doc["devices"]
    }
    assert devs == {
        ("cuda", "allocated"): (1100, 150, "allocator_totals"),
        ("cpu", "allocated"): (5010, 10, "allocator_totals"),
    }


def test_replay_without_totals(tmp_path: Path) -> None:
    # The same rows from a source whose rows hold what was alive at start (or that is
    # told not to use totals): the replay alone.
    for tr, cfg in (
        (_kineto_like(tmp_path, "torch"), None),
        (_kineto_like(tmp_path, "kineto"), memory.MemoryConfig(totals=False)),
    ):
        doc = memory_replay.summarize(tr, cfg)
        assert doc["source"] == "replay"
        assert (doc["peak_bytes"], doc["peak_ts_ns"]) == (150, 30)
        assert doc["breakdown_at_peak"]["pre_existing"] == 0
        assert [s["start_bytes"] for s in doc["steps"]] == [0, 100]


@pytest.mark.parametrize("few", [16, 0])  # a pass per device, or one sort (many devices)
def test_device_rows_replay_peak_is_the_timelines_device_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, few: int
) -> None:
    """The memory section's per-device replay peak (computed from the replay's events,
    without building the timeline) equals the largest device_total_bytes of the
    timeline table's rows of that (level, device), on a trace of two levels, three
    devices and blocks freed out of order."""
    import random

    rnd = random.Random(7)
    rows: list[tuple[Any, ...]] = []
    live: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    addr = 0
    for ts in range(0, 3000, 10):
        level, dev = rnd.choice(("allocated", "reserved")), rnd.randrange(3)
        blocks = live[level, dev]
        if blocks and rnd.random() < 0.45:
            a, n = blocks.pop(rnd.randrange(len(blocks)))
            rows.append((ts, "free", level, n, a, None, dev))
        else:
            addr += 1
            n = rnd.randrange(1, 5000)
            blocks.append((addr, n))
            rows.append((ts, "alloc", level, n, addr, rnd.choice(CATS), dev))
    monkeypatch.setattr(memory_replay, "_FEW_DEVICES", few)
    tr = _trace(tmp_path, rows)
    want: dict[tuple[str, int], int] = {}
    for r in memory.timeline(tr).to_pylist():
        k = (r["level"], r["device_id"])
        want[k] = max(want.get(k, 0), r["device_total_bytes"])
    doc = memory_replay.summarize(tr)
    got = {(d["level"], d["device_id"]): d["replay_peak_bytes"] for d in doc["devices"]}
    assert got == want and len(got) == 6


@pytest.mark.parametrize("groups", [1, 3])
def test_pairing_rows_in_time_order_skips_the_four_key_sort_with_the_same_blocks(
    groups: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows in time order (a stored table) are paired after a sort by (device, address)
    only; the blocks are those of the sort by (device, address, time, row)."""
    import numpy as np

    from tbdtrace.analysis.engine import memory_blocks

    rng = np.random.default_rng(groups)
    n = 3000
    rows, ts = np.arange(n), np.sort(rng.integers(0, 400, n))
    addr, grp = rng.integers(0, 40, n), rng.integers(0, groups, n)
    alloc, nbytes = rng.random(n) < 0.5, rng.integers(1, 100, n)
    fast = memory_blocks._pair_by_address(rows, grp, addr, ts, alloc, nbytes)
    monkeypatch.setattr(memory_blocks, "is_sorted", lambda _: False)
    full = memory_blocks._pair_by_address(rows, grp, addr, ts, alloc, nbytes)
    assert fast.tolist() == full.tolist()
