"""The capture step: run one job in its own process and leave a trace directory.

Two implementations, chosen by ``BenchConfig.capture``:

* ``tbdtrace``: ``python -m tbdtrace capture --out TRACE -- <workload argv>``; the capture
  command sets ``TBDTRACE_STEPS_FILE`` for the workload and writes the whole trace
  (device activity, host samples, the ``steps`` table from the harness records).
* ``steps``: the workload alone, with ``TBDTRACE_STEPS_FILE`` pointing at a file under
  ``logs/``; the trace holds just the ``steps`` table (source ``harness``), so throughput
  is known and the activity-derived cells stay empty.

``auto`` is ``tbdtrace`` when this build has the capture command, else ``steps``.

Without a GPU every job is captured by its framework's own profiler: ``--backend torch``,
``tf`` or ``mxnet`` (:data:`CPU_BACKENDS`); with one, ``auto`` (CUPTI).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbdtrace import trace
from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector import steps
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig
from tbdtrace.errors import TraceError
from tbdtrace.suite.plan import REPO, BenchConfig, Job, workload_argv

STEPS_ENV = proto.STEPS_FILE
# Read by workloads/harness.py (memory_trace_dir); bench keeps it out of its jobs.
MEMORY_ENV = proto.MEMORY_TRACE
CAPTURES = ("auto", "tbdtrace", "steps")
HOST_RATE_HZ = 20.0  # process-tree samples per second in runs without the capture command


@dataclass(frozen=True)
class Paths:
    """Where one job's outputs go."""

    trace_dir: Path  # <out>/<job name>
    log: Path  # <out>/logs/<job name>.log: the process's stdout and stderr
    steps_file: Path  # <out>/logs/<job name>.steps.jsonl (steps captures)

    @classmethod
    def for_job(cls, out_dir: Path, job: Job) -> Paths:
        logs = out_dir / "logs"
        return cls(
            out_dir / job.name,
            logs / f"{job.name}.log",
            logs / f"{job.name}.steps.jsonl",
        )


@dataclass(frozen=True)
class Outcome:
    """How the process ended."""

    returncode: int | None  # None when it was stopped at the timeout
    wall_ns: int  # wall time of the whole process, start-up included
    error: str | None  # one line for the table when the job failed


def resolve(mode: str) -> str:
    """``auto`` -> ``tbdtrace`` when ``tbdtrace.commands.capture`` exists, else ``steps``."""
    if mode not in CAPTURES:
        raise TraceError(f"unknown capture {mode!r}; use one of {', '.join(CAPTURES)}")
    if mode != "auto":
        return mode
    return "tbdtrace" if importlib.util.find_spec("tbdtrace.commands.capture") else "steps"


# The capture backend each framework's jobs get without a usable GPU: the framework's
# own profiler inside the workload (tbdtrace capture --backend ...).
CPU_BACKENDS = {"pytorch": "torch", "tensorflow": "tf", "mxnet": "mxnet"}


def backend_for(job: Job) -> str:
    """``--backend`` for the job's capture: ``auto`` when CUPTI can run (a usable GPU and
    the native collector), else the framework's own profiler (:data:`CPU_BACKENDS`)."""
    try:
        from tbdtrace.collector import choose_backend

        backend, _ = choose_backend("auto")
    except Exception:  # noqa: BLE001 - a broken collector shows up in the capture run itself
        return "auto"
    if backend == "cupti":
        return "auto"
    return CPU_BACKENDS.get(job.framework, "auto")


def command(mode: str, job: Job, cfg: BenchConfig, paths: Paths) -> tuple[list[str], dict]:  # type: ignore[type-arg]
    """The process to start for ``job`` and its environment."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    argv = workload_argv(job, cfg)
    if mode == "tbdtrace":
        env.pop(STEPS_ENV, None)
        env.pop(MEMORY_ENV, None)
        return [
            sys.executable,
            "-m",
            "tbdtrace",
            "capture",
            "--force",  # the job's own trace from an earlier run of this bench
            "--backend",
            backend_for(job),
            "--out",
            str(paths.trace_dir),
            "--",
            *argv,
        ], env
    env[STEPS_ENV] = str(paths.steps_file)
    env.pop(MEMORY_ENV, None)
    return argv, env


def execute(mode: str, job: Job, cfg: BenchConfig, paths: Paths) -> Outcome:
    """Run the job's process to completion (or the timeout) and leave its trace."""
    paths.log.parent.mkdir(parents=True, exist_ok=True)
    paths.steps_file.unlink(missing_ok=True)
    if not Path(job.python).exists():
        target = "venv-mxnet" if ".venv-mxnet" in job.python else "venv"
        return Outcome(
            None, 0, f"interpreter {job.python} not found; create it with `make {target}`"
        )
    argv, env = command(mode, job, cfg, paths)
    t0 = time.monotonic_ns()
    with paths.log.open("w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(
            argv,
            # Not the checkout: what a workload writes to its working directory stays
            # with the job's logs (the package is found through PYTHONPATH).
            cwd=paths.log.parent,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        # A run without the capture command: tbdtrace samples the process tree itself
        # (CPU time and memory of the workload and its children; no NVML here, the
        # capture's own sampler has it).
        host = None
        if mode == "steps":
            host = HostSampler(SamplerConfig(rate_hz=HOST_RATE_HZ, gpu=False), pid=proc.pid)
            host.start()
        # The job runs in its own session, so stopping it (timeout, Ctrl-C here) must
        # reach the workload and anything it started.
        try:
            rc: int | None = proc.wait(timeout=cfg.timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            rc = None
        except BaseException:
            _kill(proc)
            raise
        finally:
            samples = host.stop() if host is not None else None
    wall = time.monotonic_ns() - t0
    if rc is None:
        return Outcome(None, wall, f"timed out after {cfg.timeout_s:g} s (log: {paths.log})")
    if rc != 0:
        return Outcome(rc, wall, f"exit code {rc}: {last_line(paths.log)} (log: {paths.log})")
    if mode == "steps":
        write_steps_trace(job, argv, paths, samples)
    elif not (paths.trace_dir / trace.META_FILE).exists():
        return Outcome(rc, wall, f"capture wrote no trace at {paths.trace_dir}")
    return Outcome(rc, wall, None)


def _kill(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def last_line(log: Path) -> str:
    """The last non-empty line of a log (usually the exception), at most 300 characters."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[:300]


def write_steps_trace(
    job: Job, argv: list[str], paths: Paths, host_samples: dict[str, list[Any]] | None = None
) -> None:
    """The trace of a ``steps`` capture: the steps table, the host samples of the
    workload's process tree when taken, and what ran (``meta.extra.logical_cpus``: the
    machine's logical CPUs, the denominator of CPU utilization)."""
    meta: dict[str, Any] = {
        "source": "harness",
        "backend": None,
        "framework": job.framework,
        "workload": job.module,
        "command": argv,
        "host": socket.gethostname(),
        "extra": {"logical_cpus": os.cpu_count()},
    }
    tables: dict[str, Any] = {"steps": steps.read(paths.steps_file)}
    if host_samples is not None:
        tables["host_samples"] = host_samples
    trace.write(paths.trace_dir, tables, meta)
