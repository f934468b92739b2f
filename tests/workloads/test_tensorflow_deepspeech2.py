"""workloads.tensorflow.deepspeech2 (Deep Speech 2) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.tensorflow.deepspeech2"


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE, tmp_path, "--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"
    )
    check_trained(run, "deepspeech2", "tensorflow", steps=2, warmup=1, samples=2)
