"""workloads.tensorflow.resnet50 (ResNet-50) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.tensorflow.resnet50"


# Tracing the Keras application graph takes 25-35 s on a 2-core CPU.
@pytest.mark.slow
def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE, tmp_path, "--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"
    )
    check_trained(run, "resnet50", "tensorflow", steps=2, warmup=1, samples=4)


def test_paper_size_is_keras_resnet50_on_imagenet() -> None:
    from workloads.tensorflow import resnet50

    net = resnet50.build_model(resnet50.CONFIGS["paper"])
    # Keras's documented parameter count for ResNet50 with the 1000-class head.
    assert net.count_params() == 25_636_712
