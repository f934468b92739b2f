"""workloads.mxnet.deepspeech2 (Deep Speech 2, Gluon) trains at --size tiny and marks its steps."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.workloads.runner import REPO, check_trained, run_workload

MODULE = "workloads.mxnet.deepspeech2"


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
    check_trained(run, "deepspeech2", "mxnet", steps=2, warmup=1, samples=2)


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
