"""workloads.pytorch.wgan trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.wgan"


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
    # tiny batch: 8 images per generator step
    check_trained(run, "wgan", "pytorch", steps=2, warmup=1, samples=8)


def test_paper_size_is_dcgan_64() -> None:
    import torch

    from workloads.pytorch import wgan

    cfg = wgan.CONFIGS["paper"]
    g, d = wgan.generator(cfg), wgan.critic(cfg)
    # The DCGAN 64x64 networks (nz 100, 64 filters): 3,576,704 and 2,765,568 parameters,
    # as counted layer by layer in the DCGAN reference.
    assert sum(p.numel() for p in g.parameters()) == 3_576_704
    assert sum(p.numel() for p in d.parameters()) == 2_765_568
    img = g(torch.randn(2, cfg.nz, 1, 1))
    assert img.shape == (2, 3, 64, 64)
    assert d(img).shape == (2,)
