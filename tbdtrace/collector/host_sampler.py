"""Host sampler: periodic CPU, memory and (where NVML answers) GPU measurements.

Runs in a thread of the capturing process and samples a process tree (the captured child
and its descendants) into the ``host_samples`` table (long format: one row per metric per
sample). An in-process capture (``tbdtrace.capture()``) samples its own process from a
helper process instead (:class:`HelperSampler`, ``python -m
tbdtrace.collector.host_sampler``), so that no Python of the sampler's runs in the training
process. The tree's processes are looked up again every :data:`SCAN_S` seconds, not at
every sample (a recursive scan of every process costs ~2 ms): a process that starts
between two scans is counted from the next one. Metrics:

* ``cpu_util`` index = core: that core's busy ratio (0..1) since the previous sample;
  index -1: all cores together (0..1).
* ``proc_cpu_cores`` index -1: CPU time the sampled process tree used since the previous
  sample divided by wall time, in cores (1.0 = one core busy).
* ``rss_bytes`` index -1: resident set size of the process tree, bytes.
* ``gpu_*`` index = device: NVML utilization, power, SM clock, memory used and, on
  Hopper or newer, the GPM metrics (:mod:`tbdtrace.collector.gpu_sampler` lists them).

When NVML does not answer (no driver, no device) GPU metrics are skipped and
:attr:`HostSampler.nvml_status` says why; capture writes it to
``meta.extra.host_sampler.nvml`` and the ``capture`` command says so in one info line.

With ``spill`` (a file path), every sample's rows are also appended to that file as JSON
lines ``[ts_ns, metric, index, value]`` as they are taken, so the samples of a capture
whose tbdtrace process died can still be recovered (``tbdtrace recover``;
:func:`read_spill`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from tbdtrace.collector.gpu_sampler import NvmlSampler

SCAN_S = 2.0  # how often the process tree is looked up again


@dataclass(frozen=True)
class SamplerConfig:
    rate_hz: float = 10.0  # samples per second
    gpu: bool = True  # try NVML for GPU utilization, power, clocks, memory and GPM metrics


class HostSampler:
    """Samples ``pid``'s process tree (default: this process) every 1/rate_hz seconds.

    ``start()`` takes a first sample and starts the thread; ``stop()`` takes a last one
    and returns the ``host_samples`` columns (ts_ns int64 ns on CLOCK_REALTIME, metric,
    index, value). ``nvml``: the pynvml module to use (default: pynvml itself).
    """

    def __init__(
        self,
        config: SamplerConfig = SamplerConfig(),
        pid: int | None = None,
        spill: Path | None = None,
        nvml: Any = None,
        exclude: frozenset[int] = frozenset(),
    ):
        if config.rate_hz <= 0:
            raise ValueError("sampling rate must be > 0 Hz")
        self.config = config
        self.root = psutil.Process(pid)
        self.rows: list[tuple[int, str, int, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = NvmlSampler(nvml) if config.gpu else None
        self.nvml_status = self._nvml.status if self._nvml else "disabled"
        self._procs: dict[int, psutil.Process] = {}
        self._last_cpu: dict[int, float] = {}
        self._last_wall = 0.0
        self._spill: IO[str] | None = spill.open("a") if spill is not None else None
        self._spilled = 0
        self._exclude = exclude  # pids left out of the tree (the helper sampler itself)
        self._tree_cache: list[psutil.Process] = []
        self._scanned = -SCAN_S

    def _tree(self) -> list[psutil.Process]:
        """The root and its descendants, scanned again every SCAN_S seconds."""
        now = time.monotonic()
        if now - self._scanned < SCAN_S:
            return self._tree_cache
        self._scanned = now
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            procs = []
        procs = [p for p in procs if p.pid not in self._exclude]
        # Keep Process objects so cpu_times stay comparable across samples (pid reuse).
        for p in procs:
            self._procs.setdefault(p.pid, p)
        self._tree_cache = [self._procs[p.pid] for p in procs]
        return self._tree_cache

    def _tree_cpu_and_rss(self) -> tuple[float, float]:
        cpu = rss = 0.0
        for p in self._tree():
            try:
                t = p.cpu_times()
                c = t.user + t.system
                rss += p.memory_info().rss
            except psutil.Error:
                continue
            # A process's CPU since the last sample (its total at first sight counts from
            # zero only if it appeared after start, which is the child we launched).
            cpu += c - self._last_cpu.get(p.pid, c if not self._last_wall else 0.0)
            self._last_cpu[p.pid] = c
        return cpu, rss

    def sample(self) -> None:
        ts = time.time_ns()
        wall = time.monotonic()
        per_core = psutil.cpu_percent(percpu=True)
        cpu, rss = self._tree_cpu_and_rss()
        out = self.rows
        if self._last_wall:
            for i, pct in enumerate(per_core):
                out.append((ts, "cpu_util", i, pct / 100.0))
            out.append((ts, "cpu_util", -1, sum(per_core) / 100.0 / max(len(per_core), 1)))
            out.append((ts, "proc_cpu_cores", -1, cpu / max(wall - self._last_wall, 1e-9)))
        out.append((ts, "rss_bytes", -1, rss))
        if self._nvml is not None:
            self._nvml.sample(ts, out)
        self._last_wall = wall
        if self._spill is not None:
            try:
                self._spill.writelines(json.dumps(r) + "\n" for r in out[self._spilled :])
                self._spill.flush()
            except OSError:  # a full disk: the rows stay in memory, the spill stops
                self._spill = None
            self._spilled = len(out)

    def _loop(self) -> None:
        period = 1.0 / self.config.rate_hz
        while not self._stop.wait(period):
            self.sample()

    def start(self) -> None:
        psutil.cpu_percent(percpu=True)  # prime: the next call measures from here
        self.sample()
        self._thread = threading.Thread(
            target=self._loop, name="tbdtrace-host-sampler", daemon=True
        )
        self._thread.start()

    def stop(self) -> dict[str, list[Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._scanned = -SCAN_S  # the last sample sees the tree as it is now
        self.sample()
        if self._nvml is not None:
            self._nvml.close()
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        return self.columns()

    def columns(self) -> dict[str, list[Any]]:
        rows = self.rows
        return {
            "ts_ns": [r[0] for r in rows],
            "metric": [r[1] for r in rows],
            "index": [r[2] for r in rows],
            "value": [r[3] for r in rows],
        }


def read_spill(path: Path) -> dict[str, list[Any]]:
    """``host_samples`` columns from a spill file (a torn last line is skipped)."""
    cols: dict[str, list[Any]] = {"ts_ns": [], "metric": [], "index": [], "value": []}
    if not path.exists():
        return cols
    for line in path.read_text(errors="replace").splitlines():
        try:
            ts, metric, index, value = json.loads(line)
            row = (int(ts), str(metric), int(index), float(value))
        except (ValueError, TypeError):
            continue
        for c, v in zip(cols.values(), row, strict=True):
            c.append(v)
    return cols


class HelperSampler:
    """Samples this process's tree from a helper process (in-process capture): the same
    :class:`HostSampler`, run by ``python -m tbdtrace.collector.host_sampler`` with the
    spill file as its output. ``start()`` returns once the helper took its first sample;
    ``stop()`` closes its standard input (as this process's exit would), the helper takes
    a last sample and ends, and the spill is read back."""

    def __init__(self, config: SamplerConfig, spill: Path):
        if config.rate_hz <= 0:
            raise ValueError("sampling rate must be > 0 Hz")
        self.config, self.spill = config, spill
        self.nvml_status = "disabled"
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        args = [sys.executable, "-m", "tbdtrace.collector.host_sampler", str(os.getpid())]
        args += [str(self.spill), str(self.config.rate_hz), "1" if self.config.gpu else "0"]
        self._proc = subprocess.Popen(
            args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("ready "):
            self._proc.kill()
            self._proc.wait()
            raise RuntimeError(f"the host sampler helper did not start ({line!r})")
        self.nvml_status = line.removeprefix("ready ")

    def stop(self) -> dict[str, list[Any]]:
        proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        cols = read_spill(self.spill)
        self.spill.unlink(missing_ok=True)
        return cols


def _helper_main(argv: list[str]) -> int:
    """The helper: ``PID SPILL RATE_HZ GPU``; samples until its standard input closes."""
    pid, spill, rate, gpu = int(argv[0]), Path(argv[1]), float(argv[2]), argv[3] == "1"
    hs = HostSampler(
        SamplerConfig(rate, gpu), pid=pid, spill=spill, exclude=frozenset({os.getpid()})
    )
    hs.start()
    print(f"ready {hs.nvml_status}", flush=True)
    sys.stdin.read()  # returns at EOF: stop() or the capturing process ended
    hs.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(_helper_main(sys.argv[1:]))
