"""workloads.pytorch.faster_rcnn trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.faster_rcnn"


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
    check_trained(run, "faster_rcnn", "pytorch", steps=2, warmup=1, samples=2)


def test_paper_size_is_resnet50_fpn_with_voc_head() -> None:
    from workloads.pytorch import faster_rcnn

    net = faster_rcnn.build_model(faster_rcnn.CONFIGS["paper"])
    # torchvision documents 41,755,286 parameters for the COCO model (91 classes, frozen
    # batch-norm). VOC's 21 classes shrink the predictor by 70 x 1025 (scores) and
    # 280 x 1025 (boxes); trainable batch-norm adds 2 x 26,560 ResNet-50 BN channels.
    expected = 41_755_286 - 70 * 1025 - 280 * 1025 + 2 * 26_560
    assert sum(p.numel() for p in net.parameters()) == expected
