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
