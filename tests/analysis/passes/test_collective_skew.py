"""Collective skew: instances matched across ranks by (step, name, occurrence)."""

from __future__ import annotations

from pathlib import Path

from tbdtrace.analysis.passes import collective_skew
from tests.analysis.tiny import US, make

AR = "ncclKernel_AllReduce_RING_LL_Sum_float"
AG = "ncclKernel_AllGather_RING_LL_Sum_float"


def _kernels(rows: list[tuple[int, int, str, int]]) -> dict:
    """(start_us, end_us, name, rank); rank r runs on cuda:r."""
    return {
        "start_ns": [s * US for s, *_ in rows],
        "end_ns": [e * US for _, e, *_ in rows],
        "name": [n for _, _, n, _ in rows],
        "rank": [r for *_, r in rows],
        "device_id": [r for *_, r in rows],
        "device_type": ["cuda"] * len(rows),
    }


def test_skew_per_instance_and_summary(tmp_path: Path) -> None:
    steps = {
        "step": [1, 1, 2, 2],
        "rank": [0, 1, 0, 1],
        "start_ns": [0, 0, 100 * US, 100 * US],
        "end_ns": [100 * US, 100 * US, 200 * US, 200 * US],
    }
    k = _kernels(
        [
            (10, 30, AR, 0),
            (14, 30, AR, 1),  # step 1, 1st all-reduce: rank 1 last by 4 us
            (50, 60, AR, 0),
            (41, 60, AR, 1),  # step 1, 2nd: rank 0 last by 9 us
            (20, 25, "volta_sgemm_128x64_nn", 1),  # not a collective
            (110, 120, AR, 0),
            (112, 120, AR, 1),  # step 2: rank 1 last by 2 us
            (130, 140, AG, 0),
            (131, 140, AG, 1),
            (150, 160, AG, 1),  # counts differ: skipped
        ]
    )
    tr = make(tmp_path, {"steps": steps, "kernels": k})
    rows = collective_skew.run(tr).to_pylist()
    got = [(r["step"], r["occurrence"], r["ranks"], r["skew_ns"], r["last_rank"]) for r in rows]
    assert got == [(1, 0, 2, 4 * US, 1), (1, 1, 2, 9 * US, 0), (2, 0, 2, 2 * US, 1)]
    assert rows[0]["first_start_ns"] == 10 * US and rows[0]["last_start_ns"] == 14 * US
    (summary,) = collective_skew.summarize(collective_skew.run(tr))
    assert summary["name"] == AR and summary["instances"] == 3
    assert summary["skew_median_ns"] == 4 * US and summary["skew_max_ns"] == 9 * US
    assert summary["most_often_last_rank"] == 1 and summary["last_rank_share"] == 2 / 3


def test_one_rank_has_no_skew(tmp_path: Path) -> None:
    tr = make(tmp_path, {"kernels": _kernels([(0, 5, AR, 0), (6, 9, AR, 0)])})
    assert collective_skew.run(tr).num_rows == 0
    assert collective_skew.summarize(collective_skew.run(tr)) == []


def test_text_report_lists_the_skew(tmp_path: Path) -> None:
    import io

    from tbdtrace.report import ReportOptions, build
    from tbdtrace.report.text import render
    from tbdtrace.report.textui import Console

    k = _kernels([(10, 30, AR, 0), (14, 30, AR, 1), (50, 60, AR, 0), (41, 60, AR, 1)])
    tr = make(tmp_path, {"kernels": k})
    buf = io.StringIO()
    render(build(tr), ReportOptions(), Console(file=buf, width=200))
    line = next(ln for ln in buf.getvalue().splitlines() if AR in ln and "rank" in ln)
    # Without steps: occurrences in trace order; skews 4 us and 9 us, median 6.5 us.
    assert "6.500 us" in line and "9.000 us" in line and "rank 0 (50%)" in line
