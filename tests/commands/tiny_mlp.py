"""A tiny real training job for end-to-end tests of the analyses: a 3-layer MLP on
synthetic classes, trained through the workload harness (steps file, ``--data host``
DataLoader with its workers, ``--data-delay-ms``), small enough that a captured step takes
milliseconds on a CPU.

Run it as a module from the repository root:
``python -m tests.commands.tiny_mlp --steps 3 --warmup 1 --device cpu``; ``--hidden N``
widens the layers (more GEMM time per step).
"""

from __future__ import annotations

import sys

import torch
from torch import nn

from workloads import harness
from workloads.pytorch import _common

FEATURES, CLASSES = 64, 8


def main(argv: list[str]) -> None:
    hidden = 64
    if "--hidden" in argv:
        i = argv.index("--hidden")
        hidden, argv = int(argv[i + 1]), argv[:i] + argv[i + 2 :]
    args = harness.parse_args("tiny_mlp", "pytorch", {"tiny": 16, "small": 64, "paper": 64}, argv)
    device, gen = _common.setup(args)
    net = nn.Sequential(
        nn.Linear(FEATURES, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, CLASSES),
    ).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    centres = torch.randn(CLASSES, FEATURES, generator=gen)

    def make(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, CLASSES, (args.batch_size,), generator=g)
        return centres[y] + 0.5 * torch.randn(args.batch_size, FEATURES, generator=g), y

    data = _common.batches(make, args, device, gen)

    def step(_i: int) -> float:
        x, y = next(data)
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss)

    _common.run("tiny_mlp", args, device, step)


if __name__ == "__main__":
    main(sys.argv[1:])
