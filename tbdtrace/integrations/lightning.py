"""PyTorch Lightning: :class:`TbdtraceCallback` records the training steps a capture
window plan names.

    trainer = lightning.Trainer(
        callbacks=[TbdtraceCallback("trace", schedule=tbdtrace.schedule(wait=10, active=5))]
    )

Each training batch is one step (numbered from 0 across epochs): the window opens at
``on_train_batch_start`` of its first step and closes at ``on_train_batch_end`` of its
last. Without ``out_dir`` the callback marks the steps of the capture the program runs
under (``tbdtrace capture --steps A:B -- python train.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from tbdtrace.collector import windows
from tbdtrace.integrations.session import TrainerSession


class TbdtraceCallback(pl.Callback):  # type: ignore[misc]
    """Capture windows over a Lightning training run (module docstring)."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | None = None,
        *,
        steps: tuple[int, int] | None = None,
        schedule: windows.Schedule | None = None,
        on_demand: windows.OnDemand | None = None,
        backend: str = "auto",
        config: Any = None,
    ):
        self.session = TrainerSession(
            "lightning", out_dir, steps, schedule, on_demand, backend, config
        )

    @property
    def path(self) -> Path | None:
        """The trace written (in-process capture), once training ended."""
        return self.session.path

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.session.begin_run()

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        self.session.begin_step()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.session.end_step()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.session.end_run()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.session.end_run()  # what was recorded is written; the exception goes on
