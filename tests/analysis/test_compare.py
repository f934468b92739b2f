"""diff pass: per-kernel and per-category deltas between two hand-made traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbdtrace.analysis import compare as diff
from tests.analysis.tiny import kernels, make


def _pair(tmp_path: Path):
    a = make(
        tmp_path,
        {
            "kernels": kernels([(0, 10, "volta_sgemm"), (10, 15, "relu_kernel")]),
            "steps": {"step": [0], "start_ns": [0], "end_ns": [20_000], "samples": [10]},
        },
        name="a",
    )
    b = make(
        tmp_path,
        {
            "kernels": kernels(
                [(0, 4, "volta_sgemm"), (4, 10, "relu_kernel"), (10, 12, "new_kernel")]
            ),
            "steps": {"step": [0], "start_ns": [0], "end_ns": [10_000], "samples": [10]},
        },
        name="b",
    )
    return a, b


def test_kernel_and_category_deltas(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    rows = diff.run(a, b).to_pylist()
    assert [(r["name"], r["delta_ns"]) for r in rows] == [
        ("volta_sgemm", -6000),
        ("new_kernel", 2000),
        ("relu_kernel", 1000),
    ]
    assert rows[0]["ratio"] == pytest.approx(0.4)
    assert rows[1]["a_count"] == 0 and rows[1]["ratio"] is None
    cats = {r["category"]: r for r in diff.by_category(a, b).to_pylist()}
    assert cats["gemm"]["delta_ns"] == -6000 and cats["elementwise"]["delta_ns"] == 1000


def test_headline(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    doc = diff.compare(a, b, top=1)
    h = doc["headline"]
    assert h["throughput_per_s"]["a"] == pytest.approx(10 / 20e-6)
    assert h["throughput_per_s"]["ratio"] == pytest.approx(2.0)
    assert h["kernel_time_ns"]["delta"] == -3000
    assert len(doc["kernels"]) == 1
