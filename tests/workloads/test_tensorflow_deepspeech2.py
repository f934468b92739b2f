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


def test_logits_have_one_frame_per_two_input_frames() -> None:
    import numpy as np

    from workloads.tensorflow import deepspeech2

    net = deepspeech2.build_model(deepspeech2.CONFIGS["tiny"])
    # 'same' padding with time stride 2: ceil(T / 2) frames; 29 classes (blank first).
    for t, expected in ((12, 6), (13, 7), (40, 20)):
        assert net(np.zeros((2, t, 32), np.float32)).shape == (2, expected, 29)
