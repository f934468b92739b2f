"""The bench figures plot the table's values, and the findings summary counts them."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from tbdtrace import schema
from tbdtrace.suite import BenchConfig, figures, table
from tbdtrace.suite.rows import empty_row

MIB = 1 << 20


def _rows() -> list[dict[str, Any]]:
    def ok(model: str, fw: str, b: int, thr: float, util: float, fp32: float | None, **mem: int):
        return empty_row(
            model=model,
            framework=fw,
            batch_size=b,
            status="ok",
            throughput_samples_per_s=thr,
            gpu_utilization=util,
            fp32_efficiency=fp32,
            **{f"{c}_bytes": v for c, v in mem.items()},
        )

    return [
        ok("resnet50", "pytorch", 8, 10.0, 0.30, 0.05, weights=5 * MIB, activations=20 * MIB),
        ok("resnet50", "pytorch", 16, 18.0, 0.45, 0.08, weights=5 * MIB, activations=40 * MIB),
        ok("resnet50", "pytorch", 32, 30.0, 0.60, 0.11, weights=5 * MIB, activations=80 * MIB),
        ok("a3c", "pytorch", 4, 7.0, 0.20, None, weights=9 * MIB, activations=1 * MIB),
        ok("a3c", "pytorch", 8, 6.5, 0.25, None, weights=9 * MIB, activations=2 * MIB),
        empty_row(model="wgan", framework="pytorch", batch_size=8, status="failed", error="x"),
    ]


def _table(tmp_path: Path) -> list[dict[str, Any]]:
    """The rows as a tool reads them back from bench.json (what the figures must show)."""
    table.write(_rows(), BenchConfig(out_dir=tmp_path))
    return json.loads((tmp_path / table.JSON_FILE).read_text())["rows"]


def test_throughput_and_utilization_lines_hold_the_table_values(tmp_path: Path) -> None:
    rows = _table(tmp_path)
    fig = figures.throughput_vs_batch(rows)
    assert fig is not None
    got = {ln.get_label(): ln.get_xydata().tolist() for ln in fig.axes[0].get_lines()}
    want: dict[str, list[list[float]]] = {}
    for r in rows:
        if r["status"] == "ok":
            want.setdefault(f"{r['model']} {r['framework']}", []).append(
                [r["batch_size"], r["throughput_samples_per_s"]]
            )
    assert got == {k: sorted(v) for k, v in want.items()}
    assert all(ln.get_gid().startswith("tbd-data-") for ln in fig.axes[0].get_lines())

    fig = figures.utilization_vs_batch(rows)
    assert fig is not None
    util = {ln.get_label(): ln.get_xydata()[:, 1].tolist() for ln in fig.axes[0].get_lines()}
    fp32 = {ln.get_label(): ln.get_xydata()[:, 1].tolist() for ln in fig.axes[1].get_lines()}
    res = [r for r in rows if r["model"] == "resnet50"]
    assert np.allclose(util["resnet50 pytorch"], [100 * r["gpu_utilization"] for r in res])
    assert np.allclose(fp32["resnet50 pytorch"], [100 * r["fp32_efficiency"] for r in res])
    assert "a3c pytorch" not in fp32  # no FLOP figure: no line, not a line at zero


def test_memory_bars_stack_the_table_breakdown(tmp_path: Path) -> None:
    rows = _table(tmp_path)
    fig = figures.memory_breakdown(rows)
    assert fig is not None
    ok = [r for r in rows if r["status"] == "ok"]
    bars: dict[str, list[float]] = defaultdict(list)  # per category: one bar per run
    for p in fig.axes[0].patches:
        bars[p.get_gid().rsplit("-", 1)[0]].append(p.get_width())
    for c in schema.MEMORY_CATEGORIES:
        assert bars[f"tbd-data-memory-{c}"] == [(r[f"{c}_bytes"] or 0) / MIB for r in ok]


def test_write_puts_pngs_and_findings_beside_the_table(tmp_path: Path) -> None:
    rows = _table(tmp_path)
    paths = figures.write(rows, tmp_path)
    names = sorted(p.name for p in paths)
    assert names == sorted(
        [figures.THROUGHPUT_PNG, figures.UTILIZATION_PNG, figures.MEMORY_PNG, figures.FINDINGS_MD]
    )
    for p in paths:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000
    text = (tmp_path / figures.FINDINGS_MD).read_text()
    # resnet50 rises with the batch, a3c's throughput falls from 7.0 to 6.5
    assert "throughput rises with the mini-batch for 1 of 2 pairs (not for: a3c pytorch)" in text
    assert "utilization rises with the mini-batch for 2 of 2 pairs." in text
    # activations are the largest category in the three resnet50 runs, weights in a3c's
    assert "activations are the largest category in 3 of 5 runs" in text
    assert "highest 11.0% of peak over 3 runs" in text
    assert "5 of 6 runs ok" in text


def test_nothing_to_plot_writes_only_the_findings(tmp_path: Path) -> None:
    rows = [empty_row(model="a3c", framework="pytorch", status="failed", error="boom")]
    paths = figures.write(rows, tmp_path)
    assert [p.name for p in paths] == [figures.FINDINGS_MD]
    assert "not testable here" in paths[0].read_text()


def test_findings_state_scaling_and_flag_efficiency_above_one() -> None:
    def run(n: int, thr: float, eff: float | None) -> dict[str, Any]:
        return empty_row(
            model="resnet50",
            framework="pytorch",
            batch_size=4,
            status="ok",
            nproc=n,
            throughput_samples_per_s=thr,
            scaling_efficiency=eff,
        )

    # 2 ranks at 6.0 samples/s against one at 1.0: 6.0 / (2 x 1.0) = 300%
    text = figures.findings([run(1, 1.0, 1.0), run(2, 6.0, 6.0 / (2 * 1.0))])
    assert "resnet50 pytorch batch 4 x 2 ranks 300.0%" in text
    assert "Caveat: 1 of 1 above 100%" in text
    # 2 ranks at 1.6 against 1.0: 80%, no caveat
    text = figures.findings([run(1, 1.0, 1.0), run(2, 1.6, 1.6 / 2)])
    assert "x 2 ranks 80.0%" in text and "Caveat" not in text
    # one rank only: no scaling line
    assert "Data-parallel scaling" not in figures.findings([run(1, 1.0, 1.0)])
