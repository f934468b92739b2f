"""Model structure of the tensorflow workloads: sizes, shapes and behaviour each model must have.

Training at --size tiny is checked for every pair in test_train.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workloads.runner import run_workload

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def test_logits_have_one_frame_per_two_input_frames() -> None:
    import numpy as np

    from workloads.tensorflow import deepspeech2

    net = deepspeech2.build_model(deepspeech2.CONFIGS["tiny"])
    # 'same' padding with time stride 2: ceil(T / 2) frames; 29 classes (blank first).
    for t, expected in ((12, 6), (13, 7), (40, 20)):
        assert net(np.zeros((2, t, 32), np.float32)).shape == (2, expected, 29)


@pytest.mark.slow
def test_paper_size_is_keras_inception_v3_on_imagenet() -> None:
    from workloads.tensorflow import inception_v3

    net = inception_v3.build_model(inception_v3.CONFIGS["paper"])
    # Keras's documented parameter count for InceptionV3 with the 1000-class head.
    assert net.count_params() == 23_851_784
    assert net.input_shape == (None, 299, 299, 3)


@pytest.mark.slow
def test_paper_size_is_keras_resnet50_on_imagenet() -> None:
    from workloads.tensorflow import resnet50

    net = resnet50.build_model(resnet50.CONFIGS["paper"])
    # Keras's documented parameter count for ResNet50 with the 1000-class head.
    assert net.count_params() == 25_636_712


def test_cuda_without_a_gpu_is_one_line_and_exit_1(tmp_path: Path) -> None:
    # tensorflow-cpu sees no GPU here; on a GPU machine this run would train instead.
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return
    run = run_workload(
        "workloads.tensorflow.seq2seq",
        tmp_path,
        "--size",
        "tiny",
        "--steps",
        "1",
        "--device",
        "cuda",
    )
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


def test_generator_and_critic_shapes_follow_dcgan() -> None:
    import numpy as np

    from workloads.tensorflow import wgan

    cfg = wgan.CONFIGS["paper"]
    g, d = wgan.generator(cfg), wgan.critic(cfg)
    assert g.output_shape == (None, 64, 64, 3)
    assert d.output_shape == (None, 1)
    img = g(np.zeros((2, cfg.nz), np.float32)).numpy()
    assert img.min() >= -1 and img.max() <= 1  # tanh output
