"""The capture strategies of a command (:mod:`.run`): how its processes collect, and how
their spool becomes tables.

* :class:`Injection` (``--backend cupti``): the CUDA driver loads the native collector into
  every process (:mod:`.injection`);
* :class:`ProfilerChild` (``--backend torch|tf|mxnet|auto``): the bootstrap starts the
  framework's profiler in every Python process (:mod:`.profiler_child`, :mod:`.parts`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector import windows
from tbdtrace.collector.cupti_backend import CuptiConfig
from tbdtrace.collector.torch_backend import TorchConfig
from tbdtrace.errors import TraceError


@dataclass
class Assembled:
    """What a strategy read back from the spool."""

    tables: dict[str, Any]
    meta: dict[str, Any]
    lost: list[str] = field(default_factory=list)  # what is missing (the trace is partial)
    log: bytes = b""  # what the profilers printed (the trace's capture.log)
    news: list[str] = field(default_factory=list)  # lines of it that are news to the user


class ChildStrategy(Protocol):
    """How a command's processes collect, and how their spool becomes tables."""

    backend: str  # the backend named in meta (a child may refine "auto")
    bootstrap: bool  # the command's Python processes need sitecustomize/

    def check(self, plan: windows.WindowPlan | None) -> None:
        """TraceError (one line) when it cannot run here."""

    def environ(self, spool: Path, env: dict[str, str], plan: windows.WindowPlan | None) -> None:
        """Set the command's variables."""

    def assemble(self, spool: Path) -> Assembled:
        """The tables and meta of the spool."""


class Injection:
    """``--backend cupti``: the native collector injected by the CUDA driver."""

    backend = "cupti"

    def __init__(self, cfg: CuptiConfig):
        self.cfg = cfg
        self.bootstrap = False

    def check(self, plan: windows.WindowPlan | None) -> None:
        from tbdtrace.collector import injection
        from tbdtrace.collector.cupti_backend import check_config, probe, resolve_activities

        check_config(self.cfg)
        resolve_activities(self.cfg)
        if plan is not None:
            injection.check_windows(self.cfg)
        if not proto.INJECT_LIB.exists():
            raise TraceError(f"{proto.INJECT_LIB}: injection library missing; run `make native`")
        ok, _status, msg = probe()
        if not ok:
            raise TraceError(f"cupti backend: {msg}")

    def environ(self, spool: Path, env: dict[str, str], plan: windows.WindowPlan | None) -> None:
        from tbdtrace.collector import injection

        injection.child_env(spool, self.cfg, env)
        if plan is not None:
            env[proto.START_PAUSED] = "1"
        self.bootstrap = injection.needs_bootstrap(self.cfg) or plan is not None

    def assemble(self, spool: Path) -> Assembled:
        from tbdtrace.collector import injection

        got = Assembled(*injection.assemble(spool))
        got.meta["extra"].setdefault("torch_memory", {"mode": self.cfg.torch_memory})
        return got


class ProfilerChild:
    """``--backend torch|tf|mxnet|auto``: the framework's profiler in each Python process."""

    bootstrap = True

    def __init__(self, backend: str, cfg: TorchConfig):
        self.backend, self.cfg = backend, cfg

    def check(self, plan: windows.WindowPlan | None) -> None:
        pass  # a program that never imports the framework is found after it ran

    def environ(self, spool: Path, env: dict[str, str], plan: windows.WindowPlan | None) -> None:
        if self.backend == "torch":
            env[proto.TORCH_SPOOL] = str(spool)
        else:  # tf, mxnet, auto: started on the framework's import
            env.pop(proto.TORCH_SPOOL, None)
            env[proto.FRAMEWORK_SPOOL] = str(spool)
            env[proto.FRAMEWORK] = self.backend
            # Complete CPU allocator totals for the memory sampler (tf_backend docstring).
            env.setdefault(proto.TF_BFC, "true")
        env[proto.TORCH_CONFIG] = json.dumps(
            {k: getattr(self.cfg, k) for k in self.cfg.__dataclass_fields__}
        )

    def assemble(self, spool: Path) -> Assembled:
        from tbdtrace.collector import parts

        tables, meta, lost = parts.read(spool)
        return Assembled(tables, meta, lost, *parts.profiler_log(spool))


def strategy_for(backend: str, cupti: CuptiConfig, torch: TorchConfig) -> ChildStrategy:
    if backend == "cupti":
        return Injection(cupti)
    return ProfilerChild(backend, torch)


def command_env(
    strat: ChildStrategy, spool: Path, plan: windows.WindowPlan | None
) -> dict[str, str]:
    """The command's environment: this process's, with the strategy's variables, the
    steps file, the bootstrap and the window plan."""
    env = dict(os.environ)
    strat.environ(spool, env, plan)
    env[proto.STEPS_FILE] = str(spool / proto.STEPS_NAME)
    if strat.bootstrap:
        old = env.get(proto.PYTHONPATH)
        env[proto.PYTHONPATH] = str(proto.BOOTSTRAP_DIR) + (os.pathsep + old if old else "")
        env[proto.PACKAGE_ROOT] = str(Path(__file__).resolve().parents[2])
    if plan is not None:
        env[proto.WINDOWS] = plan.to_json()
    else:
        env.pop(proto.WINDOWS, None)
    return env
