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


def test_decoder_is_causal_and_source_padding_is_ignored() -> None:
    import numpy as np

    from workloads.tensorflow import transformer

    net = transformer.Transformer(transformer.CONFIGS["tiny"])
    src = np.array([[5, 6, 7, 8, 0, 0, 0, 0]], np.int32)
    tgt = np.array([[1, 9, 10, 11, 12, 2]], np.int32)
    base = net(src, tgt).numpy()  # training=False: no dropout
    tgt2 = tgt.copy()
    tgt2[0, 4] = 20
    alt = net(src, tgt2).numpy()
    assert np.abs(base[:, :4] - alt[:, :4]).max() == 0.0  # 0..3 do not see token 4
    assert np.abs(base[:, 4:] - alt[:, 4:]).max() > 1e-4
    # The same sentence with less padding: padding is masked out of every attention.
    assert np.abs(base - net(src[:, :5], tgt).numpy()).max() < 1e-5
