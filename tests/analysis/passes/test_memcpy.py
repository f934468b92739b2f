"""memcpy pass: bandwidth per direction on a hand-made trace and on a real fixture."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.analysis.passes import memcpy
from tbdtrace.importers import kineto
from tests import rawkineto
from tests.analysis.tiny import US, make
from tests.conftest import KINETO


def test_bandwidth_and_dtod_peak(tmp_path: Path) -> None:
    tr = make(
        tmp_path,
        {
            "memcpy": {
                "start_ns": [0, 200 * US, 400 * US],
                "end_ns": [100 * US, 300 * US, 410 * US],
                "bytes": [10**6, 10**6, 4 * 10**6],
                "copy_kind": ["HtoD", "HtoD", "DtoD"],
                "device_id": [0] * 3,
                "device_type": ["cuda"] * 3,
            },
            "devices": {
                "device_id": [0],
                "device_type": ["cuda"],
                "name": ["Tesla V100-SXM2-32GB"],
            },
        },
    )
    rows = {r["copy_kind"]: r for r in memcpy.run(tr).to_pylist()}
    assert rows["HtoD"]["count"] == 2 and rows["HtoD"]["bytes"] == 2 * 10**6
    assert rows["HtoD"]["bandwidth_bytes_per_s"] == pytest.approx(2e6 / 200e-6)
    assert rows["HtoD"]["peak_bytes_per_s"] is None
    assert rows["DtoD"]["bandwidth_bytes_per_s"] == pytest.approx(4e6 / 10e-6)
    # V100 datasheet 900 GB/s; a DtoD copy reads and writes every byte
    assert rows["DtoD"]["peak_bytes_per_s"] == pytest.approx(450e9)
    assert rows["DtoD"]["peak_fraction"] == pytest.approx(4e11 / 450e9)


def test_bandwidth_from_clock_and_bus_width(tmp_path: Path) -> None:
    tr = make(
        tmp_path,
        {
            "memcpy": {
                "start_ns": [0],
                "end_ns": [1000],
                "bytes": [1000],
                "copy_kind": ["DtoD"],
                "device_id": [0],
                "device_type": ["cuda"],
            },
            "devices": {
                "device_id": [0],
                "device_type": ["cuda"],
                "name": ["X"],
                "memory_clock_khz": [877_000],
                "memory_bus_width_bits": [4096],
            },
        },
    )
    r = memcpy.run(tr).to_pylist()[0]
    assert r["peak_bytes_per_s"] == pytest.approx(2 * 877e6 * 4096 / 8 / 2)


def test_fixture_bytes_and_time_match_the_raw_json(tmp_path: Path) -> None:
    f = KINETO / "hta" / "sampled_rank-0.json.gz"
    tables, meta = kineto.import_files([f])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for s, e, _, ev in rawkineto.device_events(f)["memcpy"]:
        kind = ev["name"].split()[1]
        want[kind][0] += 1
        want[kind][1] += int(ev["args"]["bytes"])
        want[kind][2] += e - s
    got = {
        r["copy_kind"]: [r["count"], r["bytes"], r["total_ns"]] for r in memcpy.run(tr).to_pylist()
    }
    assert got == dict(want)


def test_empty(tmp_path: Path) -> None:
    assert memcpy.run(make(tmp_path, {})).num_rows == 0
