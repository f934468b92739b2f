"""workloads.tensorflow.seq2seq (Seq2Seq) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.tensorflow.seq2seq"


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE, tmp_path, "--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"
    )
    check_trained(run, "seq2seq", "tensorflow", steps=2, warmup=1, samples=4)


def test_cuda_without_a_gpu_is_one_line_and_exit_1(tmp_path: Path) -> None:
    # tensorflow-cpu sees no GPU here; on a GPU machine this run would train instead.
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return
    run = run_workload(MODULE, tmp_path, "--size", "tiny", "--steps", "1", "--device", "cuda")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "--device cuda but no GPU is visible to TensorFlow" in run.stderr
    assert run.records == []


def test_source_padding_is_ignored() -> None:
    import numpy as np

    from workloads.tensorflow import seq2seq

    net = seq2seq.Seq2Seq(seq2seq.CONFIGS["tiny"])
    src = np.array([[5, 6, 7, 8, 0, 0, 0, 0]], np.int32)
    tgt = np.array([[1, 9, 10, 11, 12]], np.int32)
    base = net(src, tgt).numpy()
    assert np.abs(base - net(src[:, :5], tgt).numpy()).max() < 1e-5
    other = src.copy()
    other[0, 3] = 9  # a real token differs: the output does
    assert np.abs(base - net(other, tgt).numpy()).max() > 1e-4
