"""MXNet rows of the bench table get their memory columns from MXNet's storage counter.

Without a GPU the bench captures MXNet jobs with ``--backend mxnet`` (MXNet's profiler,
operators and storage), and the row's weights, gradients and optimizer state are the
model's exact sizes. Expected sizes are written out from WGAN's tiny layers
(workloads/mxnet/wgan.py: 16 px, nz 16, 16 filters), not taken from the code under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tbdtrace.suite import BenchConfig, Job, run_jobs

REPO = Path(__file__).resolve().parents[2]
MXNET_PY = REPO / ".venv-mxnet" / "bin" / "python"

# Generator: ConvT 16->32, BN 32, ConvT 32->16, BN 16, ConvT 16->3 (4x4, no biases).
# Critic: Conv 3->16, Conv 16->32, BN 32, Conv 32->1 (4x4, no biases).
G_TRAINED = 16 * 32 * 16 + 2 * 32 + 32 * 16 * 16 + 2 * 16 + 16 * 3 * 16
D_TRAINED = 3 * 16 * 16 + 16 * 32 * 16 + 2 * 32 + 32 * 1 * 16
RUNNING = 2 * (32 + 16) + 2 * 32  # BatchNorm running mean + var (no gradients)
P = G_TRAINED + D_TRAINED


@pytest.mark.heavy
def test_mxnet_row_has_exact_model_memory(tmp_path: Path) -> None:
    from tbdtrace.collector import gpu_usable

    if gpu_usable()[0]:
        pytest.skip("a GPU is usable: MXNet jobs are captured by CUPTI")
    assert MXNET_PY.exists(), f"{MXNET_PY} is missing; run `make venv-mxnet`"
    cfg = BenchConfig(out_dir=tmp_path, steps=2, warmup=1, device="cpu", capture="tbdtrace")
    job = Job("wgan", "mxnet", "workloads.mxnet.wgan", str(MXNET_PY), None)
    (row,) = run_jobs([job], cfg)
    assert row["status"] == "ok", row["error"]
    assert row["backend"] == "mxnet"
    assert row["measured_steps"] == 2
    assert row["weights_bytes"] == 4 * (P + RUNNING)
    assert row["gradients_bytes"] == 4 * P
    assert row["optimizer_state_bytes"] == 4 * P  # RMSprop (not centered): one array each
    assert row["other_bytes"] > 0  # the step's transients
    # MXNet's capture tells weights, gradients and optimizer state apart; the rest
    # (inputs, activations, workspace) is in other, their cells empty with the reason.
    assert row["peak_memory_bytes"] == sum(
        row[f"{c}_bytes"] for c in ("weights", "gradients", "optimizer_state", "other")
    )
    assert row["activations_bytes"] is None and "activations" in row["error"]
    assert row["profiled_throughput_samples_per_s"] is not None
    assert 0 < row["cpu_utilization"] <= 1
