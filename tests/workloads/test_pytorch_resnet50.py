"""workloads.pytorch.resnet50 trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.resnet50"


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
    # tiny batch: 4 images
    check_trained(run, "resnet50", "pytorch", steps=2, warmup=1, samples=4)


def test_paper_size_is_resnet50_on_imagenet() -> None:
    from workloads.pytorch import resnet50

    net = resnet50.build_model(resnet50.CONFIGS["paper"])
    # torchvision's documented parameter count for ResNet-50 (ImageNet-1k head).
    assert sum(p.numel() for p in net.parameters()) == 25_557_032
    assert resnet50.CONFIGS["paper"].image_px == 224
