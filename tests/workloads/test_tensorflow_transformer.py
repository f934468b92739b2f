"""workloads.tensorflow.transformer (Transformer) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.tensorflow.transformer"


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE, tmp_path, "--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"
    )
    check_trained(run, "transformer", "tensorflow", steps=2, warmup=1, samples=4)


def test_inverse_sqrt_schedule_matches_the_formula() -> None:
    from workloads.tensorflow import transformer

    sched = transformer.InverseSqrt(512, 4000)
    for step in (0, 99, 3999, 9999):
        n = step + 1
        expected = 512**-0.5 * min(n**-0.5, n * 4000**-1.5)
        assert abs(float(sched(step)) - expected) < 1e-9
