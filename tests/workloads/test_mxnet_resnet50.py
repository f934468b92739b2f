"""workloads.mxnet.resnet50 (ResNet-50, Gluon) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import REPO, check_trained, run_workload

MODULE = "workloads.mxnet.resnet50"


def mxnet_python() -> str:
    """.venv-mxnet's Python; fails the test with what to run when it is missing."""
    py = REPO / ".venv-mxnet" / "bin" / "python"
    assert py.exists(), f"{py} is missing; run `make venv-mxnet`"
    return str(py)


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE,
        tmp_path,
        "--size",
        "tiny",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--device",
        "cpu",
        python=mxnet_python(),
    )
    check_trained(run, "resnet50", "mxnet", steps=2, warmup=1, samples=4)


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
