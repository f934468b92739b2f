"""What the trainer callbacks share: one capture window session per training run.

:class:`TrainerSession` starts an in-process capture with windows (``out_dir`` given) or
joins the window controller of the captured command this process runs in, and reports
the trainer's steps to it (source ``lightning`` or ``transformers``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tbdtrace.collector import windows
from tbdtrace.errors import TraceError


class TrainerSession:
    """Step marks from a trainer for a capture's windows (module docstring)."""

    def __init__(
        self,
        source: str,
        out_dir: str | os.PathLike[str] | None,
        steps: tuple[int, int] | None,
        schedule: windows.Schedule | None,
        on_demand: windows.OnDemand | None,
        backend: str,
        config: Any,
    ):
        self.source = source
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.plan = (steps, schedule, on_demand)
        self.backend, self.config = backend, config
        self.capture: Any = None  # the in-process capture this session started
        self.path: Path | None = None  # its trace, once written
        self._index = 0  # the trainer's step being run
        self._controller: windows.Controller | None = None

    def begin_run(self) -> None:
        """Training starts: join the running controller, or start a capture."""
        self._index = 0
        if self.out_dir is None:
            self._controller = windows.active()
            if self._controller is None:
                raise TraceError(
                    f"tbdtrace {self.source} callback: no capture window to drive; give "
                    "out_dir and steps=, schedule= or on_demand=, or run the program under "
                    "`tbdtrace capture --steps A:B` (or --schedule, --on-demand)"
                )
            return
        from tbdtrace.collector import inprocess

        steps, schedule, on_demand = self.plan
        if steps is None and schedule is None and on_demand is None:
            raise TraceError(
                f"tbdtrace {self.source} callback: out_dir needs steps=, schedule= or on_demand="
            )
        self.capture = inprocess.start(
            self.out_dir,
            self.backend,
            self.config,
            steps=steps,
            schedule=schedule,
            on_demand=on_demand,
        )
        self._controller = self.capture.controller

    def begin_step(self) -> None:
        if self._controller is not None:
            self._controller.begin_step(self._index, self.source)

    def end_step(self) -> None:
        if self._controller is not None:
            self._controller.end_step(self._index, self.source)
        self._index += 1

    def end_run(self) -> None:
        """Training ends (or fails): the capture this session started is written."""
        self._controller = None
        if self.capture is not None:
            from tbdtrace.collector import inprocess

            self.capture = None
            self.path = inprocess.stop()
