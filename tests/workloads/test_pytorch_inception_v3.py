"""workloads.pytorch.inception_v3 trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.inception_v3"


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
    # tiny batch: 2 images
    check_trained(run, "inception_v3", "pytorch", steps=2, warmup=1, samples=2)


def test_paper_size_is_inception_v3_with_aux_head() -> None:
    from workloads.pytorch import inception_v3

    cfg = inception_v3.CONFIGS["paper"]
    net = inception_v3.build_model(cfg)
    # torchvision's documented parameter count for Inception-v3 (aux head included).
    assert sum(p.numel() for p in net.parameters()) == 27_161_264
    assert cfg.image_px == 299 and cfg.aux_logits
