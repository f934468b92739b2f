"""The step timeline pass: which step is shown, which events, clipped to the window."""

from __future__ import annotations

from pathlib import Path

from tbdtrace.analysis.passes import step_timeline
from tests.analysis.tiny import US, kernels, make


def _trace(tmp_path: Path, max_events: int = 100) -> tuple:
    # Steps 1 (warm-up), 2 (10 us), 3 (30 us), 4 (20 us): the median measured step is 4.
    steps = {
        "step": [1, 2, 3, 4],
        "start_ns": [0, 100 * US, 110 * US, 140 * US],
        "end_ns": [100 * US, 110 * US, 140 * US, 160 * US],
        "warmup": [True, False, False, False],
    }
    k = kernels(
        [
            (135, 145, "volta_sgemm_128x64_nn"),  # starts in step 3: clipped to 140..145
            (150, 152, "vectorized_elementwise_kernel"),
            (155, 170, "ncclKernel_AllReduce"),  # runs past the step: clipped to 155..160
            (10, 20, "volta_sgemm_128x64_nn"),  # step 1 only
        ],
        stream_id=[7, 7, 9, 7],
    )
    copies = {
        "start_ns": [141 * US],
        "end_ns": [143 * US],
        "device_id": [0],
        "device_type": ["cuda"],
        "stream_id": [8],
        "bytes": [64],
    }
    tr = make(tmp_path, {"steps": steps, "kernels": k, "memcpy": copies})
    return tr, step_timeline.StepTimelineConfig(max_events=max_events)


def test_median_measured_step_and_its_events_clipped(tmp_path: Path) -> None:
    tr, cfg = _trace(tmp_path)
    win = step_timeline.windows(tr, cfg).to_pylist()
    assert [(w["step"], w["start_ns"], w["end_ns"]) for w in win] == [(4, 140 * US, 160 * US)]
    rows = step_timeline.run(tr, cfg).to_pylist()
    got = sorted(
        (r["kind"], r["category"], r["stream_id"], r["offset_ns"], r["duration_ns"]) for r in rows
    )
    assert got == sorted(
        [
            ("kernel", "gemm", 7, 0, 5 * US),
            ("kernel", "elementwise", 7, 10 * US, 2 * US),
            ("kernel", "communication", 9, 15 * US, 5 * US),
            ("memcpy", "memcpy", 8, 1 * US, 2 * US),
        ]
    )


def test_over_the_limit_the_longest_are_kept_and_all_counted(tmp_path: Path) -> None:
    tr, cfg = _trace(tmp_path, max_events=2)
    rows, total = step_timeline.events(tr, cfg)
    assert total == 4
    assert sorted(rows.column("duration_ns").to_pylist()) == [5 * US, 5 * US]


def test_no_steps_no_timeline(tmp_path: Path) -> None:
    tr = make(tmp_path, {"kernels": kernels([(0, 5, "k")])})
    assert step_timeline.run(tr).num_rows == 0
    assert step_timeline.windows(tr).num_rows == 0


def test_rows_out_of_start_order_found_as_by_a_scan(monkeypatch) -> None:
    """Kernels of several streams, out of start order (as a profiler file lists them):
    every event overlapping the window, in the order a scan of every row finds them (the
    order decides ties of the final sort), against a brute-force list written here."""
    import numpy as np

    import tbdtrace
    from tbdtrace.analysis.engine import step_events

    rng = np.random.default_rng(5)
    n = 300
    start = rng.integers(0, 400, n)
    dur = rng.integers(0, 30, n)
    rows = [(int(s), int(s + d), "volta_sgemm_128x64_nn") for s, d in zip(start, dur, strict=True)]
    streams = rng.integers(7, 10, n).tolist()
    steps = {"step": [1, 2], "start_ns": [0, 150 * US], "end_ns": [150 * US, 260 * US]}
    steps["warmup"] = [False, False]
    # In memory, in the given order (a written trace is stored in start order).
    tr = tbdtrace.trace.from_tables(
        {"steps": steps, "kernels": kernels(rows, stream_id=streams)}, {"source": "test"}
    )
    assert not step_events.is_sorted(np.asarray(tr.column("kernels", "start_ns")))
    cfg = step_timeline.StepTimelineConfig(max_events=10_000)
    win = step_timeline.windows(tr, cfg).to_pylist()
    assert len(win) == 1
    ws, we = win[0]["start_ns"], win[0]["end_ns"]
    want = sorted(
        (max(s * US, ws) - ws, streams[i], min(e * US, we) - max(s * US, ws))
        for i, (s, e, _) in enumerate(rows)
        if s * US < we and e * US > ws
    )
    got_rows, total = step_timeline.events(tr, cfg)
    got = [(r["offset_ns"], r["stream_id"], r["duration_ns"]) for r in got_rows.to_pylist()]
    assert total == len(want) and sorted(got) == want
    monkeypatch.setattr(step_events, "_SORTED_ROWS", 0)  # each window scans every row
    scanned, _ = step_timeline.events(tr, cfg)
    assert scanned.equals(got_rows)
