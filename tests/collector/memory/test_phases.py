"""Training iterations from launching threads, profiler ops and steps (small tables whose
expected phases are worked out by hand)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tbdtrace.collector.memory import phases

MAIN, ENGINE = 11, 22


def _runtime(rows: list[tuple[int, int, int, str]], pid: int = 5) -> dict[str, list[Any]]:
    return {
        "start_ns": [r[0] for r in rows],
        "end_ns": [r[1] for r in rows],
        "tid": [r[2] for r in rows],
        "name": [r[3] for r in rows],
        "pid": [pid] * len(rows),
    }


def _steps(windows: list[tuple[int, int]], pid: int = 5) -> dict[str, list[Any]]:
    return {
        "step": list(range(len(windows))),
        "start_ns": [w[0] for w in windows],
        "end_ns": [w[1] for w in windows],
        "pid": [pid] * len(windows),
    }


def _as_lists(it: phases.Iterations) -> dict[str, list[int]]:
    return {
        k: getattr(it, k).tolist()
        for k in ("start_ns", "work_ns", "bwd_start_ns", "bwd_end_ns", "opt_start_ns", "end_ns")
    }


def test_backward_is_the_other_thread_and_steps_bound_iterations() -> None:
    rt = _runtime(
        [
            (110, 112, MAIN, "cudaLaunchKernel"),  # forward
            (120, 122, MAIN, "cudaLaunchKernel"),  # loss.backward()'s ones_like
            (130, 133, ENGINE, "cudaLaunchKernel"),  # backward
            (140, 144, ENGINE, "cuLaunchKernel"),
            (141, 142, ENGINE, "cudaGetDevice"),  # not a launch: ignored
            (150, 151, MAIN, "cudaLaunchKernelExC"),  # optimizer
            (160, 161, MAIN, "cudaMemcpyAsync"),  # loss.item()
            (210, 212, MAIN, "cudaMemsetAsync"),  # step 2
            (230, 232, ENGINE, "cudaLaunchKernel"),
        ]
    )
    rt_other_pid = _runtime([(135, 136, 99, "cudaLaunchKernel")], pid=6)
    tables = {
        "runtime": {k: rt[k] + rt_other_pid[k] for k in rt},
        "steps": _steps([(100, 170), (200, 250)]),
    }
    it = phases.find(tables, pid=5)
    assert it.source == "launch_threads" and it.steps == 2
    assert _as_lists(it) == {
        "start_ns": [100, 200],
        "work_ns": [110, 210],
        "bwd_start_ns": [122, 212],  # the main thread's last launch before backward ends
        "bwd_end_ns": [144, 232],
        "opt_start_ns": [150, 250],  # step 2 has no work after backward: its end
        "end_ns": [170, 250],
    }


def test_gradient_accumulation_makes_one_iteration_per_backward() -> None:
    rt = _runtime(
        [
            (10, 11, MAIN, "cudaLaunchKernel"),
            (20, 21, ENGINE, "cudaLaunchKernel"),
            (30, 31, MAIN, "cudaLaunchKernel"),  # second micro-batch's forward
            (40, 41, ENGINE, "cudaLaunchKernel"),
            (50, 51, MAIN, "cudaLaunchKernel"),  # optimizer
        ]
    )
    it = phases.find({"runtime": rt, "steps": _steps([(0, 60)])}, pid=5)
    assert _as_lists(it) == {
        "start_ns": [0, 21],
        "work_ns": [10, 30],
        "bwd_start_ns": [11, 31],
        "bwd_end_ns": [21, 41],
        "opt_start_ns": [21, 50],  # the first has no optimizer phase
        "end_ns": [21, 60],
    }


def test_profiler_backward_ops_and_optimizer_marks_without_steps() -> None:
    """A CPU trace: backward ops on the calling thread, ops nested in them are backward
    too; without steps an iteration ends at the next optimizer mark."""
    ops = {
        "start_ns": [10, 30, 31, 40, 70, 90, 91],
        "end_ns": [20, 38, 33, 45, 80, 95, 92],
        "tid": [1] * 7,
        "pid": [5] * 7,
        "category": ["cpu_op"] * 7,
        "name": [
            "aten::linear",
            "autograd::engine::evaluate_function: AddmmBackward0",
            "aten::mm",  # nested in the backward op
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            "aten::add_",  # optimizer
            "autograd::engine::evaluate_function: SumBackward0",  # second iteration
            "aten::ones_like",
        ],
    }
    markers = {
        "start_ns": [65],
        "end_ns": [85],
        "pid": [5],
        "name": ["Optimizer.step#SGD.step"],
        "kind": ["range"],
    }
    it = phases.find({"ops": ops, "markers": markers}, pid=5, opt_marks_ns=[200])
    assert it.source == "ops" and it.steps == 0
    assert _as_lists(it) == {
        "start_ns": [10, 85],  # the first at the first op; then the previous end
        "work_ns": [10, 90],  # no forward work in the second: its backward start
        "bwd_start_ns": [30, 90],
        "bwd_end_ns": [45, 95],
        "opt_start_ns": [70, 200],
        "end_ns": [85, 200],  # the Optimizer.step range's end; then the snapshot mark
    }


def test_step_windows_from_nvtx_markers() -> None:
    markers = {
        "start_ns": [5, 1, 20],
        "end_ns": [9, 4, 30],
        "pid": [5, 5, 5],
        "name": ["step 1", "step -1", "forward"],
        "kind": ["range"] * 3,
    }
    s, e = phases.step_windows({"markers": markers}, 5)
    assert s.tolist() == [1, 5] and e.tolist() == [4, 9]


def test_no_backward_no_iterations() -> None:
    rt = _runtime([(10, 11, MAIN, "cudaLaunchKernel"), (20, 21, MAIN, "cudaLaunchKernel")])
    it = phases.find({"runtime": rt}, pid=5)
    assert len(it) == 0 and it.source == "launch_threads"
    assert len(phases.find({}, pid=5)) == 0
    assert np.array_equal(phases.optimizer_marks({}, 5), np.zeros(0, np.int64))
