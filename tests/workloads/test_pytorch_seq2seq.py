"""workloads.pytorch.seq2seq trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.seq2seq"


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
    # tiny batch: 4 sentences
    check_trained(run, "seq2seq", "pytorch", steps=2, warmup=1, samples=4)


def test_attention_ignores_source_padding() -> None:
    import torch

    from workloads.pytorch import seq2seq

    torch.manual_seed(0)
    net = seq2seq.Seq2Seq(seq2seq.CONFIGS["tiny"]).eval()
    src = torch.tensor([[5, 6, 7, 0, 0]])
    padded_other = torch.tensor([[5, 6, 7, 9, 9]])  # different tokens behind the length
    tgt = torch.tensor([[1, 8, 9]])
    n = torch.tensor([3])
    with torch.no_grad():
        a, b = net(src, n, tgt), net(padded_other, n, tgt)
    assert a.shape == (1, 3, seq2seq.CONFIGS["tiny"].tgt_vocab)
    assert torch.allclose(a, b)


def test_reversal_task_is_learnable(tmp_path: Path) -> None:
    run = run_workload(
        MODULE,
        tmp_path,
        "--steps",
        "60",
        "--warmup",
        "0",
        "--batch-size",
        "16",
        "--device",
        "cpu",
        "--seed",
        "0",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    losses = [r["loss"] for r in run.records]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.9 * first, (first, last)
