"""The window model, the windowed view, phases, per-rank summaries and the small fixes
(hotspot launch by instances, zero-duration rows in the idle split), on hand-built traces
whose init, warm-up, measured steps and after-phase are known.

Expected values come from :func:`expected`, a plain-Python reading of the rows written
into the trace, with the placement rule of docs/METRICS.md written out here.
"""

from __future__ import annotations

import io
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.analysis.engine import context, window
from tbdtrace.analysis.engine.window import WindowSpec, parse_steps
from tbdtrace.analysis.passes import hotspots, idle, kernels, phases, steps, summary
from tbdtrace.errors import TraceError
from tbdtrace.report import ReportOptions, build
from tbdtrace.report.text import render
from tbdtrace.report.textui import Console
from tests.analysis.tiny import US, make

# Per rank: steps (number, start_us, end_us, warmup) and kernels (start_us, end_us, name,
# launch_us or None). Rank 0: init kernel, warm-up step 0, measured steps 1-2, a kernel
# launched at the end of step 2 that runs after it, and an after-phase kernel.
STEPS = {
    0: [(0, 100, 200, True), (1, 200, 300, False), (2, 300, 400, False)],
    1: [(0, 110, 220, True), (1, 220, 330, False), (2, 330, 440, False)],
}
KERNELS = {
    0: [
        (10, 20, "init_k", 5),
        (150, 160, "warm_k", 140),
        (210, 230, "mm", 205),
        (250, 252, "relu", None),
        (310, 320, "mm", 305),
        (405, 415, "late_k", 395),  # launched inside step 2, runs after it
        (450, 470, "after_k", 445),
    ],
    1: [
        (30, 50, "init_k", 25),
        (160, 170, "warm_k", 150),
        (230, 260, "mm", 225),
        (340, 345, "mm", 335),
        (350, 380, "relu", 349),
        (500, 505, "after_k", 495),
    ],
}


def _tables() -> dict[str, dict[str, Any]]:
    k: dict[str, list[Any]] = {
        c: []
        for c in (
            "start_ns",
            "end_ns",
            "name",
            "rank",
            "correlation_id",
            "device_id",
            "device_type",
        )
    }
    rt: dict[str, list[Any]] = {
        c: [] for c in ("start_ns", "end_ns", "name", "rank", "correlation_id", "pid", "tid")
    }
    corr = 0
    for r, rows in KERNELS.items():
        for s, e, n, launch in rows:
            corr += 1
            for c, v in zip(
                (
                    "start_ns",
                    "end_ns",
                    "name",
                    "rank",
                    "correlation_id",
                    "device_id",
                    "device_type",
                ),
                (s * US, e * US, n, r, corr, 0, "cuda"),
                strict=True,
            ):
                k[c].append(v)
            if launch is not None:
                for c, v in zip(
                    ("start_ns", "end_ns", "name", "rank", "correlation_id", "pid", "tid"),
                    (launch * US, launch * US + 2 * US, "cudaLaunchKernel", r, corr, 1, 1),
                    strict=True,
                ):
                    rt[c].append(v)
    st: dict[str, list[Any]] = {
        c: [] for c in ("step", "start_ns", "end_ns", "warmup", "rank", "samples")
    }
    for r, rows in STEPS.items():
        for n, s, e, w in rows:
            for c, v in zip(
                ("step", "start_ns", "end_ns", "warmup", "rank", "samples"),
                (n, s * US, e * US, w, r, 4),
                strict=True,
            ):
                st[c].append(v)
    return {"kernels": k, "runtime": rt, "steps": st}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory):
    return make(tmp_path_factory.mktemp("win"), _tables())


def _bounds(r: int, kind: str) -> tuple[float, float]:
    """The documented window of rank ``r`` (us), from STEPS directly."""
    st = STEPS[r]
    t0, t_end = min(s for _, s, _, _ in st), max(e for _, _, e, _ in st)
    meas = [(s, e) for _, s, e, w in st if not w]
    t1, t2 = min(s for s, _ in meas), max(e for _, e in meas)
    return {
        "init": (float("-inf"), t0),
        "warmup": (t0, t1),
        "measured": (t1, t2),
        "after": (t2, float("inf")),
        "steps": (t0, t_end),
        "all": (float("-inf"), float("inf")),
    }[kind]


def expected(r: int, lo: float, hi: float) -> dict[str, Any]:
    """Kernels of rank ``r`` placed in [lo, hi) (us): launch time, else own start."""
    ks = [
        (s, e, n)
        for s, e, n, launch in KERNELS[r]
        if lo <= (launch if launch is not None else s) < hi
    ]
    return {
        "kernel_count": len(ks),
        "kernel_time_ns": sum((e - s) * US for s, e, _ in ks),
        "names": sorted({n for *_, n in ks}),
        "span_ns": (max(e for _, e, _ in ks) - min(s for s, _, _ in ks)) * US if ks else 0,
    }


def test_default_window_is_the_measured_steps_per_rank(trace) -> None:
    win = window.resolve(context.of(trace))
    assert win.spec.kind == "measured"
    for rw in win.ranks:
        lo, hi = _bounds(rw.rank, "measured")
        assert (rw.start_ns, rw.end_ns) == (lo * US, hi * US)
        assert (rw.first_step, rw.last_step, rw.step_count) == (1, 2, 2)
        assert rw.warmup_steps_excluded == 1


@pytest.mark.parametrize("kind", ["measured", "steps", "warmup", "init", "after", "all"])
def test_windowed_summary_per_rank(trace, kind: str) -> None:
    view = context.of(trace).windowed(window.resolve(context.of(trace), WindowSpec(kind)))
    got = {r["rank"]: r for r in summary.by_rank(view)}
    for r in KERNELS:
        want = expected(r, *_bounds(r, kind))
        if not want["kernel_count"]:
            assert r not in got
            continue
        for key in ("kernel_count", "kernel_time_ns", "span_ns"):
            assert got[r][key] == want[key], (kind, r, key)
    names = sorted(k["name"] for k in kernels.run(view).to_pylist())
    want_names = sorted({n for r in KERNELS for n in expected(r, *_bounds(r, kind))["names"]})
    assert names == want_names


def test_steps_a_to_b(trace) -> None:
    assert parse_steps("2:2") == (2, 2) and parse_steps("1") == (1, 1)
    assert parse_steps("1:")[0] == 1 and parse_steps(":1")[1] == 1
    for bad in ("a:b", "3:1"):
        with pytest.raises(ValueError):
            parse_steps(bad)
    win = window.resolve(context.of(trace), WindowSpec(steps=(2, 2)))
    view = context.of(trace).windowed(win)
    got = {r["rank"]: r for r in summary.by_rank(view)}
    for r, st in STEPS.items():
        (_, s, e, _) = st[2]
        assert got[r]["kernel_count"] == expected(r, s, e)["kernel_count"]
    # Inside the window its steps are the measured ones: step 2 of each rank.
    per = steps.by_rank(steps.run(view))
    assert [(p["rank"], p["measured_count"], p["warmup_count"]) for p in per] == [
        (0, 1, 0),
        (1, 1, 0),
    ]
    assert per[0]["measured_ns"] == (STEPS[0][2][2] - STEPS[0][2][1]) * US
    with pytest.raises(TraceError, match="no step numbered 7..9"):
        window.resolve(context.of(trace), WindowSpec(steps=(7, 9)))


def test_warmup_window_measures_the_warmup_steps(trace) -> None:
    view = context.of(trace).windowed(window.resolve(context.of(trace), WindowSpec("warmup")))
    per = {p["rank"]: p for p in steps.by_rank(steps.run(view))}
    for r, st in STEPS.items():
        warm = [e - s for _, s, e, w in st if w]
        assert per[r]["measured_count"] == len(warm)
        assert per[r]["step_median_ns"] == statistics.median(warm) * US


def test_phases_partition_each_rank(trace) -> None:
    rows = phases.run(trace).to_pylist()
    for r in KERNELS:
        mine = {p["phase"]: p for p in rows if p["rank"] == r}
        assert list(mine) == ["init", "warmup", "measured", "after"]
        first = min(min(s, launch if launch is not None else s) for s, _, _, launch in KERNELS[r])
        last = max(
            max(e, (launch + 2) if launch is not None else e) for _, e, _, launch in KERNELS[r]
        )
        for name, p in mine.items():
            want = expected(r, *_bounds(r, name))
            assert p["kernel_count"] == want["kernel_count"], (r, name)
            assert p["kernel_time_ns"] == want["kernel_time_ns"], (r, name)
            lo, hi = _bounds(r, name)
            lo = first if lo == float("-inf") else lo
            hi = last if hi == float("inf") else hi
            assert p["wall_ns"] == (hi - lo) * US, (r, name)
        assert sum(p["kernel_count"] for p in mine.values()) == len(KERNELS[r])
        assert [mine[n]["step_count"] for n in ("init", "warmup", "measured", "after")] == [
            0,
            1,
            2,
            0,
        ]


def test_report_json_and_text_state_the_window(trace) -> None:
    doc = build(trace, ReportOptions())
    json.dumps(doc, allow_nan=False)
    w = doc["window"]
    assert w["kind"] == "measured" and w["label"] == "measured steps" and w["rule"]
    assert [(r["rank"], r["start_ns"], r["end_ns"]) for r in w["ranks"]] == [
        (r, _bounds(r, "measured")[0] * US, _bounds(r, "measured")[1] * US) for r in (0, 1)
    ]
    assert w["sections"]["kernels"] == "measured steps"
    assert w["sections"]["phases"] == "whole trace"
    assert w["pooled_ranks"] == ["kernels", "categories", "hotspots"]
    # Never summed across ranks: per-rank rows plus min/median/max.
    s = doc["summary"]
    assert s["kernel_count"] is None and s["span_ns"] is None
    counts = [expected(r, *_bounds(r, "measured"))["kernel_count"] for r in (0, 1)]
    assert [r["kernel_count"] for r in s["ranks"]] == counts
    assert s["across_ranks"]["kernel_count"] == {
        "min": min(counts),
        "median": statistics.median(counts),
        "max": max(counts),
    }
    assert doc["steps"]["summary"] is None and len(doc["steps"]["ranks"]) == 2
    buf = io.StringIO()
    render(doc, ReportOptions(), Console(file=buf, width=160))
    text = buf.getvalue()
    assert "Window: measured steps [rank 0: steps 1-2 (2)" in text.splitlines()[1]
    assert "Summary per rank (2 ranks) (measured steps)" in text
    assert "Top kernels (measured steps, 2 ranks pooled)" in text
    assert "Phases (whole trace)" in text
    assert "median" in text


def test_no_steps_measured_is_the_whole_trace(tmp_path: Path) -> None:
    tr = make(
        tmp_path,
        {
            "kernels": {
                "start_ns": [0, 10],
                "end_ns": [5, 20],
                "name": ["a", "b"],
                "device_id": [0, 0],
                "device_type": ["cuda"] * 2,
            }
        },
    )
    win = window.resolve(context.of(tr))
    assert win.is_all and context.of(tr).windowed(win).window is None
    with pytest.raises(TraceError, match="no steps"):
        window.resolve(context.of(tr), WindowSpec("warmup"))
    assert [p["phase"] for p in phases.run(tr).to_pylist()] == ["all"]


def test_hotspot_launch_is_the_most_common_configuration(tmp_path: Path) -> None:
    # Three short launches with one configuration, one long with another: by instances the
    # first wins although the second holds most of the time.
    grid = [(1, 1, 1)] * 3 + [(64, 1, 1)]
    tr = make(
        tmp_path,
        {
            "kernels": {
                "start_ns": [0, 10, 20, 30],
                "end_ns": [1, 11, 21, 1000],
                "name": ["k"] * 4,
                "device_id": [0] * 4,
                "device_type": ["cuda"] * 4,
                "grid_x": [g[0] for g in grid],
                "grid_y": [1] * 4,
                "grid_z": [1] * 4,
                "block_x": [32] * 4,
                "block_y": [1] * 4,
                "block_z": [1] * 4,
            }
        },
    )
    row = hotspots.run(tr).to_pylist()[0]
    assert row["launch"] == "grid=(1,1,1) block=(32,1,1)"


def test_zero_duration_rows_occupy_no_time(tmp_path: Path) -> None:
    # Zero-duration kernels before, between and after the busy intervals [10,20), [50,60).
    tr = make(
        tmp_path,
        {
            "kernels": {
                "start_ns": [0, 10, 30, 50, 90],
                "end_ns": [0, 20, 30, 60, 90],
                "name": ["z", "a", "z", "b", "z"],
                "device_id": [0] * 5,
                "device_type": ["cuda"] * 5,
                "correlation_id": [1, 2, 3, 4, 5],
            },
            "runtime": {
                "start_ns": [0, 5, 25, 40, 85],
                "end_ns": [1, 6, 26, 41, 86],
                "name": ["cudaLaunchKernel"] * 5,
                "correlation_id": [1, 2, 3, 4, 5],
            },
        },
    )
    r = idle.run(tr).to_pylist()[0]
    assert r["span_ns"] == 60 - 10 and r["busy_ns"] == 20 and r["idle_ns"] == 30
    assert r["gap_count"] == 1
    # The gap [20, 50) ends with b, launched at 40: host-bound [20,40), queued [40,50).
    assert (r["host_bound_ns"], r["queued_ns"], r["queued_gap_max_ns"]) == (20, 10, 10)
    assert r["host_bound_ns"] + r["queued_ns"] + r["sync_wait_ns"] == r["idle_ns"]
    assert r["launch_count"] == 5  # zero-duration kernels were launched all the same
    assert summary.run(tr).to_pylist()[0]["span_ns"] == 50


def test_cpu_utilization_of_a_window_keeps_the_samples_at_its_edges(tmp_path: Path) -> None:
    # cpu_util samples every 10 us; sample i is the mean over [ts(i-1), ts(i)].
    ts = list(range(0, 101, 10))
    vals = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    tr = make(
        tmp_path,
        {
            "host_samples": {
                "ts_ns": [t * US for t in ts],
                "metric": ["cpu_util"] * len(ts),
                "index": [-1] * len(ts),
                "value": vals,
            },
            "steps": {
                "step": [0, 1],
                "start_ns": [5 * US, 35 * US],
                "end_ns": [35 * US, 72 * US],
                "warmup": [True, False],
            },
        },
    )
    from tbdtrace.analysis.passes import utilization

    view = context.of(tr).windowed(window.resolve(context.of(tr)))
    got = utilization.cpu(view)["mean"]
    # Measured step [35, 72): overlap of each sample interval (ts[i-1], ts[i]] with it.
    lo, hi = 35, 72
    w = [max(0, min(ts[i], hi) - max(ts[i - 1], lo)) for i in range(1, len(ts))]
    want = sum(wi * v for wi, v in zip(w, vals[1:], strict=True)) / sum(w)
    assert got == pytest.approx(want)


def test_steps_without_a_rank_bound_the_ranks_without_steps(tmp_path: Path) -> None:
    # One process's harness steps (rank null) and kernels that carry rank 0.
    tr = make(
        tmp_path,
        {
            "kernels": {
                "start_ns": [1, 15, 25, 40],
                "end_ns": [2, 16, 26, 41],
                "name": ["i", "w", "m", "a"],
                "rank": [0] * 4,
                "device_id": [0] * 4,
                "device_type": ["cuda"] * 4,
            },
            "steps": {
                "step": [0, 1],
                "start_ns": [10, 20],
                "end_ns": [20, 30],
                "warmup": [True, False],
            },
        },
    )
    view = context.of(tr).windowed(window.resolve(context.of(tr)))
    assert [k["name"] for k in kernels.run(view).to_pylist()] == ["m"]
    rows = {p["phase"]: p for p in phases.run(tr).to_pylist()}
    assert {p["rank"] for p in phases.run(tr).to_pylist()} == {0}
    assert [rows[n]["kernel_count"] for n in ("init", "warmup", "measured", "after")] == [
        1,
        1,
        1,
        1,
    ]
