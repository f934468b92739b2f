"""Faster R-CNN object detection: torchvision ``fasterrcnn_resnet50_fpn``, no pretrained
weights (neither the detector nor the backbone), trained end to end.

TBD's Faster R-CNN used a ResNet-101 backbone on Pascal VOC 2007; this one keeps
torchvision's ResNet-50-FPN detector and VOC's 20 classes (+ background) at paper size.
Loss: the sum of the RPN (objectness, box regression) and RoI-head (classification, box
regression) losses. SGD momentum 0.9, weight decay 1e-4 (torchvision's reference recipe),
gradient norm clipped at 10 (no pretrained backbone to keep the first steps stable).

Sizes: tiny = 64x64 images resized within 64..96, 3 classes, batch 2, with fewer RPN
proposals and RoI samples per image; small = 320 px, 20 classes, batch 2; paper = 600 px
shorter side (max 1000) as in TBD's VOC setup, 20 classes, batch 2.
Data: noisy backgrounds with 1-3 solid rectangles whose colour is their class.
"""

from __future__ import annotations

import torch
import torchvision

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "faster_rcnn"


Config = specs.FasterRCNN
CONFIGS = specs.FASTER_RCNN.configs
BATCH = specs.FASTER_RCNN.batch

HELD_OUT_IMAGES = 16


def scenes(
    cfg: Config, colours: torch.Tensor, batch: int, gen: torch.Generator
) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor]]]:
    """Images in [0, 1] and their targets (boxes in pixels, labels 1..classes)."""
    px = cfg.image_px
    images, targets = [], []
    for _ in range(batch):
        img = 0.5 + 0.1 * torch.randn(3, px, px, generator=gen)
        n = int(torch.randint(1, 4, (1,), generator=gen))
        wh = torch.randint(px // 5, px // 2, (n, 2), generator=gen)
        xy = (torch.rand(n, 2, generator=gen) * (px - wh)).long()
        boxes = torch.cat([xy, xy + wh], dim=1)
        labels = torch.randint(1, cfg.classes + 1, (n,), generator=gen)
        for (x0, y0, x1, y1), c in zip(boxes.tolist(), labels.tolist(), strict=True):
            img[:, y0:y1, x0:x1] = colours[c - 1][:, None, None]
        images.append(img.clamp(0, 1))
        targets.append({"boxes": boxes.float(), "labels": labels})
    return images, targets


def build_model(cfg: Config) -> torch.nn.Module:
    """fasterrcnn_resnet50_fpn with no pretrained weights (so plain, trainable batch-norm)."""
    return torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None,
        weights_backbone=None,
        num_classes=cfg.classes + 1,
        min_size=cfg.min_size,
        max_size=cfg.max_size,
        rpn_pre_nms_top_n_train=cfg.rpn_pre_nms,
        rpn_post_nms_top_n_train=cfg.rpn_post_nms,
        box_batch_size_per_image=cfg.roi_samples,
    )


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, gen = _common.setup(args)
    net = _common.distribute(build_model(cfg).to(device), device, args)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=cfg.lr, momentum=0.9, weight_decay=1e-4)
    colours = torch.rand(cfg.classes, 3, generator=gen)
    data = _common.batches(lambda g: scenes(cfg, colours, args.batch_size, g), args, device, gen)
    net.train()

    def step(_: int) -> float:
        images, targets = next(data)
        opt.zero_grad(set_to_none=True)
        losses = net(images, targets)
        loss = sum(losses.values())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        return float(loss.item())

    held_images, held_targets = scenes(
        cfg, colours, HELD_OUT_IMAGES, _common.held_out_generator(args)
    )

    def evaluate() -> float:
        net.eval()
        with torch.no_grad():
            out = net([im.to(device) for im in held_images])
        net.train()
        preds = [
            quality.Detections(
                o["boxes"].cpu().numpy(), o["labels"].cpu().numpy(), o["scores"].cpu().numpy()
            )
            for o in out
        ]
        truths = [quality.Detections(t["boxes"].numpy(), t["labels"].numpy()) for t in held_targets]
        return quality.map50(preds, truths)

    _common.run(
        MODEL, args, device, step, evaluate=evaluate, target=quality.target(MODEL, args.size)
    )


if __name__ == "__main__":
    main()
