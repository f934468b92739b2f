"""workloads.tensorflow.inception_v3 (Inception-v3) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.tensorflow.inception_v3"


# Tracing the Keras application graph takes 25-35 s on a 2-core CPU.
@pytest.mark.slow
def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE, tmp_path, "--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"
    )
    check_trained(run, "inception_v3", "tensorflow", steps=2, warmup=1, samples=2)


def test_paper_size_is_keras_inception_v3_on_imagenet() -> None:
    from workloads.tensorflow import inception_v3

    net = inception_v3.build_model(inception_v3.CONFIGS["paper"])
    # Keras's documented parameter count for InceptionV3 with the 1000-class head.
    assert net.count_params() == 23_851_784
    assert net.input_shape == (None, 299, 299, 3)
