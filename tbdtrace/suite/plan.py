"""Which workloads a bench run covers: options -> jobs.

The workload registry (``workloads/registry.py``, in the repository next to the
``tbdtrace`` package) lists the model/framework pairs; a job is one pair at one batch size.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from tbdtrace.errors import TraceError

REPO = Path(__file__).resolve().parents[2]
SIZES = ("tiny", "small", "paper")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")  # as workloads/dimensions.py (tested alike)
DATA_MODES = ("host", "device")  # --data, as workloads/dimensions.py (tested alike)


@dataclass(frozen=True)
class BenchConfig:
    """What to run and where the results go."""

    out_dir: Path  # results: one trace directory per job, logs/, bench.{md,csv,json}
    models: tuple[str, ...] = ()  # model names; empty = all
    frameworks: tuple[str, ...] = ()  # framework names; empty = all
    batch_sizes: tuple[int, ...] = ()  # one job per batch size; empty = the workload default
    size: str = "tiny"  # tiny | small | paper, passed to every workload
    steps: int = 5  # measured steps per job
    warmup: int = 1  # warm-up steps per job (not measured)
    device: str = "auto"  # auto | cpu | cuda, passed to every workload
    timeout_s: float = 3600.0  # a job running longer is stopped and reported as failed
    capture: str = "auto"  # auto | tbdtrace | steps (see tbdtrace.suite.capture)
    to_quality: bool = False  # train each job until its held-out quality target is met
    no_eval: bool = False  # no held-out evaluation after the last step: no quality cells
    nproc: tuple[int, ...] = (1,)  # data-parallel ranks per job, one job per count
    precisions: tuple[str, ...] = ("fp32",)  # training precisions, one job per precision
    compile: tuple[bool, ...] = (False,)  # compiled or not, one job per choice
    data: tuple[str, ...] = ("host",)  # input pipelines (host | device), one job per mode


@dataclass(frozen=True)
class Job:
    """One workload run: a model on a framework at one batch size."""

    model: str
    framework: str
    module: str  # python -m target
    python: str  # interpreter path (absolute)
    batch_size: int | None  # None = the workload's default for the size
    nproc: int = 1  # data-parallel ranks (--batch-size is per rank)
    precision: str = "fp32"  # fp32 | tf32 | bf16 | fp16
    compile: bool = False  # torch.compile / XLA / hybridize
    data: str = "host"  # host: the framework's input pipeline; device: a device-resident pool

    @property
    def name(self) -> str:
        """``<model>-<framework>-b<batch>`` (``bdefault`` when the default is used), then
        ``-n<ranks>``, ``-<precision>``, ``-compiled``, ``-devicedata`` where they differ
        from 1 rank, fp32, not compiled and ``--data host``."""
        b = "default" if self.batch_size is None else str(self.batch_size)
        name = f"{self.model}-{self.framework}-b{b}"
        if self.nproc != 1:
            name += f"-n{self.nproc}"
        if self.precision != "fp32":
            name += f"-{self.precision}"
        if self.compile:
            name += "-compiled"
        if self.data != "host":
            name += f"-{self.data}data"
        return name


def registry() -> tuple:  # type: ignore[type-arg]
    """The registered workloads (``workloads.registry.WORKLOADS``)."""
    if str(REPO) not in sys.path and (REPO / "workloads" / "registry.py").exists():
        sys.path.insert(0, str(REPO))
    try:
        from workloads import registry as reg
    except ImportError as e:
        raise TraceError(
            f"cannot import the workload registry ({e}); run tbdtrace bench "
            "from a tbdtrace source checkout"
        ) from None
    return tuple(reg.WORKLOADS)


def interpreter(relative: str) -> str:
    """Absolute interpreter path; the main venv falls back to the running interpreter."""
    p = REPO / relative
    if p.exists():
        return str(p)
    if relative.startswith(".venv/"):
        return sys.executable
    return str(p)  # reported as a failed job with what to do


def make_jobs(cfg: BenchConfig) -> list[Job]:
    """The jobs for ``cfg``, in registry order then batch order.

    Raises TraceError naming an unknown model or framework, or an empty selection.
    """
    works = registry()
    known_models = {w.model for w in works}
    known_fw = {w.framework for w in works}
    for m in cfg.models:
        if m not in known_models:
            raise TraceError(f"unknown model {m!r}; `tbdtrace bench --list` shows the pairs")
    for f in cfg.frameworks:
        if f not in known_fw:
            raise TraceError(f"unknown framework {f!r}; known: {', '.join(sorted(known_fw))}")
    chosen = [
        w
        for w in works
        if (not cfg.models or w.model in cfg.models)
        and (not cfg.frameworks or w.framework in cfg.frameworks)
    ]
    if not chosen:
        raise TraceError(
            "no registered workload matches --models and --frameworks; "
            "`tbdtrace bench --list` shows the pairs"
        )
    batches: tuple[int | None, ...] = cfg.batch_sizes or (None,)
    return [
        Job(w.model, w.framework, w.module, interpreter(w.python), b, n, prec, comp, data)
        for w in chosen
        for data in cfg.data
        for prec in cfg.precisions
        for comp in cfg.compile
        for b in batches
        for n in cfg.nproc
    ]


def resolved_device(cfg: BenchConfig) -> str:
    """``cfg.device`` with ``auto`` decided as the PyTorch workloads decide it (cuda when
    PyTorch sees a GPU); used to tell which precisions a run can have."""
    if cfg.device != "auto":
        return cfg.device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def unsupported(job: Job, device: str, size: str | None = None) -> str | None:
    """Why ``job`` cannot run (``workloads/dimensions.py``) on ``device`` at ``size`` (the
    batch size is checked when both are known), or None."""
    registry()  # puts the checkout on sys.path
    from workloads import dimensions

    why = dimensions.unsupported(
        job.framework, job.model, job.nproc, job.precision, job.compile, device
    )
    if why is None and size is not None and job.batch_size is not None:
        why = dimensions.batch_unsupported(job.framework, job.model, size, job.batch_size)
    if why is None and device == "cuda" and job.nproc > 1:
        import torch

        gpus = torch.cuda.device_count()
        if job.nproc > gpus:
            why = f"--nproc {job.nproc}: NCCL runs one rank per GPU and {gpus} GPU(s) are visible"
    return why


def workload_argv(job: Job, cfg: BenchConfig) -> list[str]:
    """The workload command line (interpreter, module, harness options)."""
    argv = [
        job.python,
        "-m",
        job.module,
        "--size",
        cfg.size,
        "--steps",
        str(cfg.steps),
        "--warmup",
        str(cfg.warmup),
        "--device",
        cfg.device,
    ]
    if job.batch_size is not None:
        argv += ["--batch-size", str(job.batch_size)]
    if cfg.to_quality:
        argv.append("--to-quality")
    if cfg.no_eval:
        argv.append("--no-eval")
    if job.nproc != 1:
        argv += ["--nproc", str(job.nproc)]
    if job.precision != "fp32":
        argv += ["--precision", job.precision]
    if job.compile:
        argv.append("--compile")
    if job.data != "host":
        argv += ["--data", job.data]
    return argv
