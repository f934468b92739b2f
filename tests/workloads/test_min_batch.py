"""Batches a model cannot train at are refused up front (workloads/dimensions.py), by the
workload itself (one line, exit 2) and by `tbdtrace bench` (an `unsupported` row), and the
stated reason is true: PyTorch's tiny Inception-v3 fails in training at batch 1 and trains
at batch 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tbdtrace.suite import plan

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

REPO = Path(__file__).resolve().parents[2]


def test_tiny_inception_v3_cannot_train_at_batch_1_in_pytorch() -> None:
    # in its own process: the ~95 MB model must not outlive the test in this worker, where
    # other tests count the live tensors of the process
    code = (
        "import torch\n"
        "from workloads import specs\n"
        "from workloads.pytorch import inception_v3\n"
        "cfg = specs.INCEPTION_V3.configs['tiny']\n"
        "net = inception_v3.build_model(cfg).train()\n"
        "px = cfg.image_px\n"
        "print(tuple(net(torch.rand(2, 3, px, px)).shape) == (2, cfg.classes))\n"
        "try:\n"
        "    net(torch.rand(1, 3, cfg.image_px, cfg.image_px))\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "True", run.stdout
    assert "Expected more than 1 value per channel" in lines[1], run.stdout


def test_the_workload_refuses_batch_1_in_one_line() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "workloads.pytorch.inception_v3", "--size", "tiny"]
        + ["--batch-size", "1", "--steps", "1", "--device", "cpu"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "--batch-size 1:" in run.stderr and "1x1 grid" in run.stderr


def _job(model: str, framework: str, batch: int) -> plan.Job:
    return plan.Job(model, framework, f"workloads.{framework}.{model}", sys.executable, batch)


def test_bench_marks_the_batch_unsupported_only_where_it_fails() -> None:
    why = plan.unsupported(_job("inception_v3", "pytorch", 1), "cpu", "tiny")
    assert why is not None and "1x1 grid" in why
    for job, size in [
        (_job("inception_v3", "pytorch", 2), "tiny"),
        (_job("inception_v3", "pytorch", 1), "paper"),  # 299 px: an 8x8 grid
        (_job("inception_v3", "tensorflow", 1), "tiny"),
        (_job("resnet50", "pytorch", 1), "tiny"),
    ]:
        assert plan.unsupported(job, "cpu", size) is None, (job, size)
