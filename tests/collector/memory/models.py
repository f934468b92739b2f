"""Known-answer models for the memory tests; parameter counts come from layer shapes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

IN, HIDDEN, CLASSES = 32, 64, 10
C_IN, C_OUT, HW, K = 3, 8, 16, 3


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


# weight + bias of each Linear
MLP_PARAMS = (IN * HIDDEN + HIDDEN) + (HIDDEN * CLASSES + CLASSES)
MLP_TENSORS = 4
# Per sample, tensors saved for backward that are neither the batch nor a weight:
# the ReLU output (HIDDEN floats; the second Linear saves the same storage) and the
# log-softmax output inside cross_entropy (CLASSES floats).
MLP_ACTIVATION_BYTES_PER_SAMPLE = 4 * (HIDDEN + CLASSES)


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(C_IN, C_OUT, K, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(C_OUT * (HW // 2) ** 2, CLASSES),
    )


CNN_PARAMS = (C_OUT * C_IN * K * K + C_OUT) + (C_OUT * (HW // 2) ** 2 * CLASSES + CLASSES)
CNN_TENSORS = 4


def bn_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(C_IN, C_OUT, K, padding=1),
        nn.BatchNorm2d(C_OUT),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(C_OUT * (HW // 2) ** 2, CLASSES),
    )


# The conv, BatchNorm's affine weight and bias (C_OUT each), the Linear.
BN_CNN_PARAMS = CNN_PARAMS + 2 * C_OUT
BN_CNN_TENSORS = CNN_TENSORS + 2
# BatchNorm's buffers: running_mean and running_var (C_OUT float32 each) and
# num_batches_tracked (one int64).
BN_CNN_BUFFER_BYTES = 2 * 4 * C_OUT + 8


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], nn.Module]
    params: int
    tensors: int
    batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
    buffer_bytes: int = 0  # module buffers (model state that is not a parameter)

    @property
    def weight_bytes(self) -> int:
        """float32 parameters plus buffers: what counts as weights."""
        return 4 * self.params + self.buffer_bytes


def mlp_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, IN), torch.randint(0, CLASSES, (n,))


def cnn_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, C_IN, HW, HW), torch.randint(0, CLASSES, (n,))


CASES = (
    Case("mlp", mlp, MLP_PARAMS, MLP_TENSORS, mlp_batch),
    Case("cnn", cnn, CNN_PARAMS, CNN_TENSORS, cnn_batch),
    Case("bn_cnn", bn_cnn, BN_CNN_PARAMS, BN_CNN_TENSORS, cnn_batch, BN_CNN_BUFFER_BYTES),
)


def train(
    model: nn.Module,
    opt: Any,
    batch: tuple[torch.Tensor, torch.Tensor],
    steps: int,
    on_step: Callable[[], None] | None = None,
) -> None:
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(steps):
        if opt is not None:
            opt.zero_grad()
        loss_fn(model(batch[0]), batch[1]).backward()
        if opt is not None:
            opt.step()
        if on_step is not None:
            on_step()
