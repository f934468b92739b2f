"""The one capture runner: ``tbdtrace capture`` and ``tbdtrace.capture()`` both end here.

:func:`run_capture` runs a command under a backend strategy and writes its trace:

* **injection** (``cupti``, :class:`.strategies.Injection`, :mod:`.injection`): the CUDA
  driver loads the native collector into every process of the command; each writes
  ``<pid>.tbds`` to the spool;
* **profiler child** (``torch``, ``tf``, ``mxnet``, ``auto`` without a GPU,
  :class:`.strategies.ProfilerChild`, :mod:`.profiler_child`): the bootstrap starts the
  framework's profiler in every Python process of the command; each writes ``part-<pid>``.

The in-process capture (:mod:`.inprocess`, ``tbdtrace.capture()``) is the third strategy:
it collects in the calling process and completes through the same :func:`complete`.

Every capture: a spool directory ``<out>/.tbdtrace-spool-<pid>-*`` (``capture.json`` says
what runs there, for ``tbdtrace recover``); the command in its own process group
(:mod:`.supervise`: signals forwarded, a second one kills); the host sampler on the
command's process tree; the steps file (``steps.jsonl``, :mod:`.steps`); capture windows
(:mod:`.windows`: the plan goes to the command's processes, their windows come back as
``windows-<pid>.jsonl`` and become ``meta.windows``; the trace keeps the rows inside
them); then one ``trace.write`` and the spool's removal once no process of the command can
still write it. The names that cross the process boundary are in :mod:`.child_protocol`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbdtrace import outdir, trace
from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector import cpuinfo, steps, strategies, supervise, window_trace, windows
from tbdtrace.collector.cupti_backend import CuptiConfig
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig
from tbdtrace.collector.torch_backend import TorchConfig
from tbdtrace.errors import TraceError

BACKENDS = ("auto", "cupti", "torch", "tf", "mxnet")
_NEEDS = {"tf": "tensorflow", "auto": "torch, tensorflow or mxnet"}


@dataclass(frozen=True)
class CaptureConfig:
    """Everything a capture is told; the CLI parses into it, the library runs it."""

    backend: str = "auto"  # auto, cupti, torch, tf, mxnet
    sampler: SamplerConfig = field(default_factory=SamplerConfig)  # host sampler settings
    torch: TorchConfig = field(default_factory=TorchConfig)  # torch backend settings
    cupti: CuptiConfig = field(default_factory=CuptiConfig)  # cupti backend settings
    windows: windows.WindowPlan | None = None  # record only these steps (None: the run)
    workload: str | None = None  # recorded in meta.workload (in-process capture)
    keep_spools: Path | None = None  # cupti command: copy the raw spools here too
    trigger_file: Path | None = None  # on-demand command: its appearance opens a window


@dataclass
class Result:
    """What a capture wrote and how the command ended."""

    path: Path | None  # the trace directory
    outcome: supervise.Outcome | None  # None for an in-process capture
    meta: dict[str, Any] = field(default_factory=dict)  # the meta.json written
    partial: str | None = None  # why the trace is partial, or None
    notes: list[str] = field(default_factory=list)  # one-line remarks for the user
    steps: int = 0  # steps in the trace
    spool_kept: Path | None = None  # spool left in place (processes still running)

    @property
    def backend(self) -> str:
        return str(self.meta.get("backend") or "")


def resolve(requested: str, choice: tuple[str, str] | None = None) -> tuple[str, str, str]:
    """(backend, child backend, reason): ``auto`` without CUPTI leaves the choice to the
    framework the program imports (child backend ``auto``). ``choice``: what
    ``choose_backend(requested)`` already answered (it probes NVML and CUPTI)."""
    from tbdtrace.collector import choose_backend

    backend, reason = choice or choose_backend(requested)
    if requested == "auto" and backend == "torch":
        return backend, "auto", f"{reason}; the framework the program imports"
    return backend, backend, reason


def run_capture(
    command: Sequence[str],
    out: outdir.Output,
    config: CaptureConfig,
    choice: tuple[str, str] | None = None,
) -> Result:
    """Run ``command`` under ``config`` into the claimed output ``out`` (module docstring).
    ``choice``: ``choose_backend(config.backend)``'s answer when the caller has it.

    Raises TraceError (one line) when the capture cannot start or its spool cannot be
    read; the spool is then kept and the line says how to recover it.
    """
    backend, child_backend, reason = resolve(config.backend, choice)
    strat = strategies.strategy_for(child_backend, config.cupti, config.torch)
    spool = _open_spool(out, strat, config, command, child_backend, reason)
    env = strategies.command_env(strat, spool, config.windows)
    run = _supervise(command, env, spool, config)
    if config.keep_spools is not None:
        shutil.copytree(spool, config.keep_spools, dirs_exist_ok=True)
    try:
        got = strat.assemble(spool)
        step_cols = steps.read(spool / proto.STEPS_NAME)
    except TraceError as e:
        raise TraceError(
            f"{e} (the capture's spool is kept at {spool}; after fixing it, "
            f"`tbdtrace recover {spool} --out DIR`)"
        ) from None
    outcome = run.outcome
    tables, meta = got.tables, got.meta
    if child_backend == "cupti":
        if step_cols["step"]:
            tables["steps"] = step_cols
    else:
        _check_profiled(meta, outcome, spool, command, child_backend, backend)
        from tbdtrace.collector import parts

        parts.add_steps(tables, meta, step_cols)
        _apply_test_clock_shift(tables, meta)
    tables["host_samples"] = run.samples
    notes: list[str] = []
    if config.windows is not None:
        notes += apply_windows(tables, meta, window_trace.read_windows(spool), config.windows)
        if run.relay is not None:
            meta["extra"]["on_demand"] = run.relay.summary()
    partial = "; ".join(x for x in (outcome.stop_reason(), *got.lost) if x) or None
    meta.update(command=list(command), partial=partial is not None)
    meta["extra"]["exit_code"] = outcome.exit_code
    if partial:
        meta["extra"]["partial"] = partial
    name = "cupti" if child_backend == "cupti" else str(meta.get("backend") or child_backend)
    describe(meta, name, reason, run.sampler_meta)
    files = {proto.CAPTURE_LOG: got.log} if got.log else None
    path = write_or_keep_spool(out.path, tables, meta, spool, files)
    res = Result(path, outcome, meta, partial, notes, _rows(tables.get("steps")))
    if got.news:
        res.notes.append(
            f"the profiler printed {len(got.news)} message(s), first: "
            f"{got.news[0][:120]!r}; all in {path / proto.CAPTURE_LOG}"
        )
    release_spool(res, spool)
    return res


def _open_spool(
    out: outdir.Output,
    strat: strategies.ChildStrategy,
    config: CaptureConfig,
    command: Sequence[str],
    backend: str,
    reason: str,
) -> Path:
    """The capture's spool in ``out``, with ``capture.json`` (what runs there, for
    ``tbdtrace recover``); TraceError (spool removed) when the strategy cannot run."""
    # Unique even beside a spool a crashed capture with the same pid left (never reused).
    spool = Path(tempfile.mkdtemp(prefix=f"{outdir.SPOOL_PREFIX}{os.getpid()}-", dir=out.path))
    try:
        os.chmod(spool, outdir.dir_mode())
        strat.check(config.windows)
    except BaseException:
        shutil.rmtree(spool, ignore_errors=True)
        raise
    info = {
        "backend": backend,
        "command": list(command),
        "out": str(out.path),
        "tbdtrace_pid": os.getpid(),
        "started_ns": time.time_ns(),
        "backend_choice": reason,
        "sample_hz": config.sampler.rate_hz,
    }
    (spool / proto.SPOOL_INFO).write_text(json.dumps(info, indent=2) + "\n")
    return spool


@dataclass
class _Run:
    outcome: supervise.Outcome
    samples: dict[str, list[Any]]  # host_samples columns
    sampler_meta: dict[str, Any]  # meta.extra.host_sampler
    relay: Any  # on_demand.Relay of an on-demand capture, else None


def _supervise(
    command: Sequence[str], env: dict[str, str], spool: Path, config: CaptureConfig
) -> _Run:
    """Run the command with the host sampler on its process tree (and, on demand, the
    relay of SIGUSR2 and the trigger file)."""
    holder: dict[str, HostSampler] = {}
    relay = None
    if config.windows is not None and config.windows.on_demand is not None:
        from tbdtrace.collector.on_demand import Relay

        relay = Relay(spool, config.trigger_file)
        relay.install()

    def on_start(pid: int) -> None:
        holder["hs"] = HostSampler(config.sampler, pid=pid, spill=spool / proto.HOST_SPILL)
        holder["hs"].start()
        if relay is not None:
            relay.start()

    try:
        outcome = supervise.run(command, env, on_start=on_start)
    except TraceError:
        shutil.rmtree(spool, ignore_errors=True)
        raise
    finally:
        if relay is not None:
            relay.stop()
    hs = holder["hs"]
    samples = hs.stop()
    sampler = {"rate_hz": config.sampler.rate_hz, "nvml": hs.nvml_status, "pid": outcome.pid}
    return _Run(outcome, samples, sampler, relay)


def _check_profiled(
    meta: dict[str, Any],
    outcome: supervise.Outcome,
    spool: Path,
    command: Sequence[str],
    child_backend: str,
    backend: str,
) -> None:
    """TraceError when no process of a command that ran to its end started a profiler."""
    if meta["extra"]["profiled_pids"] or outcome.stop_reason() is not None:
        return
    _remove_spool(spool, outcome.pid)  # kept while a process of the command runs
    what = "without a GPU, capture" if child_backend == "auto" else f"--backend {backend}"
    raise TraceError(
        f"{command[0]}: the command wrote no profile (exit code {outcome.exit_code}); "
        f"{what} needs a Python program that imports {_NEEDS.get(child_backend, child_backend)}"
    )


def _rows(t: Any) -> int:
    if t is None:
        return 0
    if hasattr(t, "num_rows"):
        return int(t.num_rows)
    return len(t["step"])


def describe(
    meta: dict[str, Any], backend: str, reason: str, sampler: dict[str, Any]
) -> dict[str, Any]:
    """The meta every capture writes: backend, host, why this backend, the CPU, the host
    sampler (``meta.extra``)."""
    meta.update(backend=backend, host=socket.gethostname())
    extra = dict(meta.get("extra") or {})
    extra.update(backend_choice=reason, cpu=cpuinfo.describe(), host_sampler=sampler)
    meta["extra"] = extra
    return meta


def apply_windows(
    tables: dict[str, Any],
    meta: dict[str, Any],
    records: list[dict[str, Any]],
    plan: windows.WindowPlan,
) -> list[str]:
    """Keep the rows inside the windows the processes opened (their warm-up steps and the
    host samples outside them go), record them as ``meta.windows``; notes for the user."""
    meta["windows"] = window_trace.summarize(records)
    window_trace.keep(tables, window_trace.spans_of(records))
    if records:
        return []
    how = {
        "steps": "the workload harness, NVTX 'step N' ranges or tbdtrace.step()",
        "schedule": "the workload harness, NVTX 'step N' ranges or tbdtrace.step()",
        "on-demand": "SIGUSR2 or the trigger file",
    }[plan.reason]
    return [f"no capture window opened ({plan.reason}: opened by {how}); the trace holds none"]


def _apply_test_clock_shift(tables: dict[str, Any], meta: dict[str, Any]) -> None:
    """Test-only: this node's clock reads ``TBDTRACE_TEST_CLOCK_SHIFT_NS`` ahead
    (:mod:`.clock`), so every time the capture writes is shifted by it."""
    from tbdtrace.collector import clock

    delta = clock.shift_ns()
    if not delta:
        return
    clock.shift_tables(tables, delta)
    if meta.get("start_time_ns") is not None:
        meta["start_time_ns"] += delta
    meta["extra"]["test_clock_shift_ns"] = delta


def write_or_keep_spool(
    out: Path,
    tables: dict[str, Any],
    meta: dict[str, Any],
    spool: Path,
    files: dict[str, bytes] | None = None,
) -> Path:
    """``trace.write`` of a capture; when it fails, the spool stays and the one line says
    how to recover it."""
    try:
        return trace.write(out, tables, meta, files=files)
    except (OSError, TraceError) as e:
        what = outdir.describe_os_error(e) if isinstance(e, OSError) else str(e)
        raise TraceError(
            f"{what} (the capture's spool is kept at {spool}: "
            f"`tbdtrace recover {spool} --out DIR` writes it elsewhere)"
        ) from None


def _remove_spool(spool: Path, pgid: int) -> Path | None:
    """Remove ``spool`` unless a process of the command's group may still write it."""
    for _ in range(100):  # processes of the group that are exiting right now (5 s at most)
        if not supervise.group_alive(pgid) and not supervise.spool_writers(spool):
            shutil.rmtree(spool, ignore_errors=True)
            return None
        time.sleep(0.05)
    return spool


def release_spool(res: Result, spool: Path) -> None:
    """Remove the capture's spool once no process of the command can write it; else keep
    it and say so in ``res.notes``."""
    assert res.outcome is not None
    res.spool_kept = _remove_spool(spool, res.outcome.pid)
    if res.spool_kept is not None:
        res.notes.append(
            f"processes of the command still run; their spool is kept at "
            f"{spool} (`tbdtrace recover` reads it once they end)"
        )


def capture_command(
    command: Sequence[str],
    out: str | os.PathLike[str],
    config: CaptureConfig | None = None,
    force: bool = True,
) -> Result:
    """:func:`run_capture` into ``out``, claimed here (``force``: replace a trace there)."""
    with outdir.claim(out, force=force) as claimed:
        return run_capture(command, claimed, config or CaptureConfig())


__all__ = [
    "BACKENDS",
    "CaptureConfig",
    "Result",
    "apply_windows",
    "capture_command",
    "describe",
    "resolve",
    "run_capture",
    "write_or_keep_spool",
]
