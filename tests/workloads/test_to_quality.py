"""Time-to-quality: tiny models train until their held-out target.

ResNet-50 on every framework (its tiny target is reached in about a hundred steps), and
PyTorch's Inception-v3, whose tiny preset did not learn at its former batch of 2. The
steps file is read with ``json`` only (tests/workloads/runner.py);
the expected relations come from the records, not from the harness's code.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.workloads.runner import REPO, run_workload
from workloads import registry

MAX_STEPS = 300
LOSS_FACTOR = 2.0  # the stated "learns": mean of the last 5 losses <= first 5 / 2


PAIRS = [("resnet50", f) for f in registry.FRAMEWORKS] + [("inception_v3", "pytorch")]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "framework"), PAIRS, ids=lambda v: v)
def test_tiny_classifier_reaches_its_target(model: str, framework: str, tmp_path: Path) -> None:
    w = registry.find(model, framework)
    assert w is not None
    args = (
        "--size",
        "tiny",
        "--to-quality",
        "--max-steps",
        str(MAX_STEPS),
        "--eval-every",
        "5",
        "--warmup",
        "1",
        "--device",
        "cpu",
        "--seed",
        "0",
    )
    run = run_workload(w.module, tmp_path, *args, python=str(REPO / w.python), timeout_s=900)
    assert run.returncode == 0, run.stderr[-3000:]
    recs = run.records
    evals = [r for r in recs if "quality" in r]
    # every 5 steps until the first evaluation that met the target, which ends the run
    assert [r["step"] + 1 for r in evals] == list(range(5, len(recs) + 1, 5))
    assert [r["quality"]["reached"] for r in evals] == [False] * (len(evals) - 1) + [True]
    q = evals[-1]["quality"]
    assert evals[-1] is recs[-1]
    assert q["metric"] == "accuracy" and q["value"] >= q["target"] == 0.8
    assert q["steps_to_quality"] == len(recs) < MAX_STEPS
    # wall time from the first step's start to the end of the last evaluation
    trained_ns = recs[-1]["end_ns"] - recs[0]["start_ns"]
    assert trained_ns + q["eval_ns"] <= q["time_to_quality_ns"] < trained_ns + q["eval_ns"] + 1e9
    assert sum(r["quality"]["eval_ns"] for r in evals) < q["time_to_quality_ns"]
    losses = [r["loss"] for r in recs]
    first, last = statistics.mean(losses[:5]), statistics.mean(losses[-5:])
    assert last <= first / LOSS_FACTOR, (first, last)
    assert f"{model} {framework} quality metric=accuracy" in run.stderr
    assert "reached=yes" in run.stderr
