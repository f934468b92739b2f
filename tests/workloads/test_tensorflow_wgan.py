"""workloads.tensorflow.wgan (WGAN) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.tensorflow.wgan"


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE, tmp_path, "--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"
    )
    check_trained(run, "wgan", "tensorflow", steps=2, warmup=1, samples=8)


def test_generator_and_critic_shapes_follow_dcgan() -> None:
    import numpy as np

    from workloads.tensorflow import wgan

    cfg = wgan.CONFIGS["paper"]
    g, d = wgan.generator(cfg), wgan.critic(cfg)
    assert g.output_shape == (None, 64, 64, 3)
    assert d.output_shape == (None, 1)
    img = g(np.zeros((2, cfg.nz), np.float32)).numpy()
    assert img.min() >= -1 and img.max() <= 1  # tanh output
