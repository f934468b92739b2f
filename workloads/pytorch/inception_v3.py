"""Inception-v3 image classification (torchvision, no pretrained weights).

Sizes (workloads/specs.py): tiny = 96 px, 10 classes, batch 8; small = 299 px, 100
classes, batch 8; paper = 299 px, 1000 classes (ImageNet-1k), batch 32. No auxiliary
classifier at any size: Keras's and Gluon's Inception-v3 have none, and the three
frameworks train the same network (docs/DECISIONS.md). RMSprop (decay 0.9, momentum 0.9,
eps 1.0), as in TF-slim's Inception-v3 recipe. Data: class templates + noise.
"""

from __future__ import annotations

import torch
import torchvision

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "inception_v3"


Config = specs.InceptionV3
CONFIGS = specs.INCEPTION_V3.configs
BATCH = specs.INCEPTION_V3.batch


def build_model(cfg: Config) -> torch.nn.Module:
    """torchvision's Inception-v3, randomly initialised (its truncated-normal init)."""
    return torchvision.models.inception_v3(
        weights=None, num_classes=cfg.classes, aux_logits=False, init_weights=True
    )


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, gen = _common.setup(args)
    net = _common.distribute(build_model(cfg).to(device), device, args)
    opt = torch.optim.RMSprop(
        net.parameters(), lr=cfg.lr, alpha=0.9, momentum=0.9, eps=1.0, weight_decay=4e-5
    )
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
