"""ResNet-50 image classification (torchvision, no pretrained weights), TBD's CNN workload.

Sizes: tiny = 64 px, 10 classes, batch 4; small = 128 px, 100 classes, batch 16;
paper = 224 px, 1000 classes (ImageNet-1k), batch 32. SGD with momentum 0.9 and weight
decay 1e-4; lr 0.1 per 256 images scaled to the batch (0.0125 at 32), lower at tiny so that
a from-scratch net with batch-norm over 4 images stays stable.
Data: class templates + noise (see :func:`_common.image_batch`).
"""

from __future__ import annotations

import torch
import torchvision

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "resnet50"


Config = specs.ResNet50
CONFIGS = specs.RESNET50.configs
BATCH = specs.RESNET50.batch


def build_model(cfg: Config) -> torch.nn.Module:
    """torchvision's ResNet-50, randomly initialised, ``cfg.classes`` outputs."""
    return torchvision.models.resnet50(weights=None, num_classes=cfg.classes)


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, gen = _common.setup(args)
    net = _common.distribute(build_model(cfg).to(device), device, args)
    opt = torch.optim.SGD(net.parameters(), lr=cfg.lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    templates = _common.class_templates(cfg.classes, 3, cfg.image_px, gen)
    data = _common.batches(
        lambda g: _common.image_batch(templates, args.batch_size, g), args, device, gen
    )
    net.train()

    def step(_: int) -> float:
        x, y = next(data)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    evaluate = _common.classifier_eval(net, templates, device, args)
    _common.run(
        MODEL, args, device, step, evaluate=evaluate, target=quality.target(MODEL, args.size)
    )


if __name__ == "__main__":
    main()
