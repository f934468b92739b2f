"""workloads.pytorch.deepspeech2 trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.deepspeech2"


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
        "--seed",
        "0",
    )
    # tiny batch: 2 utterances
    check_trained(run, "deepspeech2", "pytorch", steps=2, warmup=1, samples=2)


def test_output_is_ctc_layout_at_half_frame_rate() -> None:
    import torch

    from workloads.pytorch import deepspeech2

    cfg = deepspeech2.CONFIGS["tiny"]
    net = deepspeech2.DeepSpeech2(cfg).eval()
    out = net(torch.randn(3, 1, cfg.freq_bins, 21))
    assert out.shape == (11, 3, deepspeech2.CHARS)  # ceil(21 / 2) frames
    assert torch.allclose(out.exp().sum(-1), torch.ones(11, 3), atol=1e-5)


def test_synthetic_speech_is_learnable(tmp_path: Path) -> None:
    run = run_workload(
        MODULE,
        tmp_path,
        "--steps",
        "40",
        "--warmup",
        "0",
        "--batch-size",
        "8",
        "--device",
        "cpu",
        "--seed",
        "0",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    losses = [r["loss"] for r in run.records]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.75 * first, (first, last)  # CTC learns the character templates
