"""Hugging Face ``transformers``: :class:`TbdtraceTrainerCallback` records the training
steps a capture window plan names.

    trainer = Trainer(
        model, args, train_dataset=ds,
        callbacks=[TbdtraceTrainerCallback("trace", steps=(20, 23))],
    )

A step is the Trainer's (one optimizer step, numbered from 0 as ``state.global_step``
counts them): the window opens at ``on_step_begin`` of its first step and closes at
``on_step_end`` of its last. Without ``out_dir`` the callback marks the steps of the
capture the program runs under (``tbdtrace capture --steps A:B -- python train.py``).
``Trainer`` calls no callback when training raises: ``tbdtrace.stop()`` then writes what
the callback's capture recorded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from tbdtrace.collector import windows
from tbdtrace.integrations.session import TrainerSession


class TbdtraceTrainerCallback(TrainerCallback):  # type: ignore[misc]
    """Capture windows over a ``transformers.Trainer`` run (module docstring)."""

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
            "transformers", out_dir, steps, schedule, on_demand, backend, config
        )

    @property
    def path(self) -> Path | None:
        """The trace written (in-process capture), once training ended."""
        return self.session.path

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.session.begin_run()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.session.begin_step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.session.end_step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.session.end_run()
