"""Model structure of the mxnet workloads: sizes, shapes and behaviour each model must have.

Training at --size tiny is checked for every pair in test_train.py.
"""

from __future__ import annotations

import subprocess

from tests.workloads.runner import REPO, mxnet_python


def test_logits_have_one_frame_per_two_input_frames() -> None:
    # Conv 1 has time stride 2 with padding 5 on an 11-frame kernel: ceil(T / 2) frames,
    # 29 classes (28 characters + Gluon's blank last).
    code = (
        "import mxnet as mx\n"
        "from workloads.mxnet import deepspeech2 as m\n"
        "net = m.DeepSpeech2(m.CONFIGS['tiny']); net.initialize()\n"
        "for t in (12, 13, 40):\n"
        "    print(*net(mx.nd.zeros((2, t, 32))).shape)\n"
    )
    out = subprocess.run(
        [mxnet_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    shapes = [tuple(map(int, line.split())) for line in out.stdout.splitlines()]
    assert shapes == [(2, 6, 29), (2, 7, 29), (2, 20, 29)]


def test_paper_size_is_gluon_resnet50_v1_on_imagenet() -> None:
    # Built in .venv-mxnet. Gluon's ResNet-50 v1 is torchvision's ResNet-50 (25,557,032
    # weights, ImageNet-1k head) except that the two 1x1 convolutions of each bottleneck
    # keep their bias: (64 + 256) x 3 + (128 + 512) x 4 + (256 + 1024) x 6 + (512 + 2048) x 3
    # extra weights. BatchNorm's running mean and variance are the untrained parameters.
    code = (
        "import mxnet as mx\n"
        "from workloads.mxnet import resnet50 as m\n"
        "net = m.build_model(m.CONFIGS['paper'], mx.cpu())\n"
        "net(mx.nd.zeros((1, 3, 224, 224)))\n"
        "ps = net.collect_params().values()\n"
        "print(sum(p.data().size for p in ps if p.grad_req != 'null'),"
        " sum(p.data().size for p in ps if p.grad_req == 'null'))\n"
    )
    import subprocess

    out = subprocess.run(
        [mxnet_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    trained, stats = map(int, out.stdout.split())
    conv_biases = (64 + 256) * 3 + (128 + 512) * 4 + (256 + 1024) * 6 + (512 + 2048) * 3
    assert trained == 25_557_032 + conv_biases
    # BatchNorm channels: stem 64, then per stage blocks x (c + c + 4c) + the downsample's 4c.
    bn_channels = 64 + sum(n * 6 * c + 4 * c for n, c in ((3, 64), (4, 128), (6, 256), (3, 512)))
    assert stats == 2 * bn_channels


def test_decoder_is_causal_and_source_padding_is_ignored() -> None:
    # Outside autograd.record() Gluon's dropout is off, so outputs are deterministic.
    code = (
        "import mxnet as mx\n"
        "from workloads.mxnet import transformer as m\n"
        "net = m.Transformer(m.CONFIGS['tiny']); net.initialize(mx.init.Xavier())\n"
        "src = mx.nd.array([[5, 6, 7, 8, 0, 0, 0, 0]])\n"
        "tgt = mx.nd.array([[1, 9, 10, 11, 12, 2]])\n"
        "base = net(src, tgt)\n"
        "tgt2 = tgt.copy(); tgt2[0, 4] = 20\n"
        "alt = net(src, tgt2)\n"
        "short = src[:, :5]\n"  # the same sentence with less padding
        "print(float((base[:, :4] - alt[:, :4]).abs().max().asscalar()),"
        " float((base[:, 4:] - alt[:, 4:]).abs().max().asscalar()),"
        " float((base - net(short, tgt)).abs().max().asscalar()))\n"
    )
    out = subprocess.run(
        [mxnet_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    before, after, padding = map(float, out.stdout.split())
    assert before == 0.0  # positions 0..3 do not see target token 4
    assert after > 1e-4  # position 4 onward does
    assert padding < 1e-5  # extra source padding is masked out of every attention


def test_inverse_sqrt_schedule_matches_the_formula() -> None:
    code = (
        "from workloads.mxnet import transformer as m\n"
        "print(*(m.inverse_sqrt_lr(s, 512, 4000) for s in (0, 99, 3999, 9999)))\n"
    )
    out = subprocess.run(
        [mxnet_python(), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = list(map(float, out.stdout.split()))
    for step, lr in zip((0, 99, 3999, 9999), got, strict=True):
        n = step + 1
        assert abs(lr - 512**-0.5 * min(n**-0.5, n * 4000**-1.5)) < 1e-12
