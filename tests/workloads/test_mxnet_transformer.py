"""workloads.mxnet.transformer (Transformer, Gluon) trains at --size tiny and marks its steps."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.workloads.runner import REPO, check_trained, run_workload

MODULE = "workloads.mxnet.transformer"


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
    check_trained(run, "transformer", "mxnet", steps=2, warmup=1, samples=4)


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
