"""Batches a model cannot train at are refused up front (workloads/dimensions.py), by the
workload itself (one line, exit 2) and by `tbdtrace bench` (an `unsupported` row), and the
stated reason is true: PyTorch's tiny Inception-v3 fails in training at batch 1 and trains
at batch 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tbdtrace.suite import plan
from workloads import specs
from workloads.pytorch import inception_v3

REPO = Path(__file__).resolve().parents[2]


def test_tiny_inception_v3_cannot_train_at_batch_1_in_pytorch() -> None:
    cfg = specs.INCEPTION_V3.configs["tiny"]
    torch.manual_seed(0)
    net = inception_v3.build_model(cfg).train()
    x = torch.rand(1, 3, cfg.image_px, cfg.image_px)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        net(x)
    assert net(torch.rand(2, 3, cfg.image_px, cfg.image_px)).shape == (2, cfg.classes)


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
