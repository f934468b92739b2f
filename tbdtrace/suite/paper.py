"""``tbdtrace bench --paper``: TBD's mini-batch sweep, run with the bench protocol.

Per model, the mini-batch sizes of TBD's figures (:data:`PAPER_BATCHES`, from the TBD
reference sheet; docs/DECISIONS.md says where the sheet gives no list), ascending, over
the selected frameworks. A sweep (one model, framework, rank count, precision and
compilation) stops growing where memory runs out:

* up front, once a batch size of the sweep has run: when the peak memory extrapolated
  from the sweep's own rows (:func:`estimate_peak_bytes`) exceeds the memory available
  on the training device at that moment, the batch gets a ``skipped`` row and is not run;
* when a run fails with out-of-memory (:func:`out_of_memory`: the framework's message in
  the job's log, or a SIGKILL as the kernel's OOM killer sends), its row has status
  ``out_of_memory`` and every larger batch of the sweep a ``skipped`` row saying so.

Neither is a failed bench: the command exits 1 only for rows with status ``failed``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.suite import capture, plan, runner
from tbdtrace.suite.plan import BenchConfig, Job
from tbdtrace.suite.runner import OnDone, OnStart

# TBD's batch sweep (reference sheet, section 5: the v2 scripts' sweep for ResNet-50,
# Inception-v3 and BERT).
TBD_LADDER = (1, 2, 4, 8, 16, 32, 64, 96, 128)

# Per model: the mini-batch sizes of the sweep. The sheet lists them for the two image
# classifiers; the others use the same ladder, except the detector (images per step,
# 600-1000 px) and A3C (the batch is the number of workers, each an Atari emulator):
# docs/DECISIONS.md.
PAPER_BATCHES: dict[str, tuple[int, ...]] = {
    "resnet50": TBD_LADDER,
    "inception_v3": TBD_LADDER,
    "seq2seq": TBD_LADDER,
    "transformer": TBD_LADDER,
    "deepspeech2": TBD_LADDER,
    "wgan": TBD_LADDER,
    "faster_rcnn": (1, 2, 4, 8),
    "a3c": (1, 2, 4, 8, 16),
}

OUT_OF_MEMORY = "out_of_memory"  # row status: the run failed for lack of memory
SKIPPED = "skipped"  # row status: not run (estimated not to fit, or above an OOM)
SUMMARY_MD = "paper_summary.md"
GIB = 1 << 30

SweepKey = tuple[str, str, int, str, bool]


def sweep_key(job: Job) -> SweepKey:
    """What makes jobs one sweep: everything but the batch size."""
    return (job.model, job.framework, job.nproc, job.precision, job.compile)


def batches_for(model: str, only: Sequence[int] = ()) -> tuple[int, ...]:
    """The model's sweep, ascending, intersected with ``only`` when given. A model the
    table does not know has no sweep: ``()`` (its default batch runs once)."""
    ladder = PAPER_BATCHES.get(model, ())
    return tuple(b for b in ladder if not only or b in only)


def make_jobs(cfg: BenchConfig) -> list[Job]:
    """The sweep's jobs: :func:`plan.make_jobs` without batch sizes, each expanded to its
    model's batch sizes (``cfg.batch_sizes`` intersected with them when given), ascending
    within a sweep. Raises TraceError when the intersection leaves no job."""
    base = plan.make_jobs(replace(cfg, batch_sizes=()))
    jobs: list[Job] = []
    for job in base:
        if job.model not in PAPER_BATCHES:
            jobs.append(job)  # no TBD sweep: the workload's default batch
            continue
        jobs += [replace(job, batch_size=b) for b in batches_for(job.model, cfg.batch_sizes)]
    if not jobs:
        wanted = ", ".join(str(b) for b in cfg.batch_sizes)
        raise TraceError(
            f"none of --batch-sizes {wanted} is in TBD's sweep of the selected models; "
            "the sweeps are listed in docs/WORKLOADS.md (Reproducing TBD's figures)"
        )
    return jobs


def estimate_peak_bytes(done: Sequence[dict[str, Any]], batch: int) -> int | None:
    """Peak memory at ``batch`` extrapolated from the ok rows of the same sweep (their
    ``peak_memory_bytes``); None without a row that has it.

    Two or more rows: the line through the two largest batches (never below the largest
    measured peak). One row: its batch-independent part (weights, gradients, optimizer
    state) plus the rest scaled in proportion to the batch."""
    pts = sorted(
        (int(r["batch_size"]), int(r["peak_memory_bytes"]))
        for r in done
        if r.get("status") == "ok"
        and r.get("batch_size") is not None
        and r.get("peak_memory_bytes") is not None
    )
    if not pts:
        return None
    b2, p2 = pts[-1]
    if len(pts) >= 2 and pts[-2][0] != b2:
        b1, p1 = pts[-2]
        slope = (p2 - p1) / (b2 - b1)
        return max(max(p for _, p in pts), round(p2 + slope * (batch - b2)))
    r = next(x for x in done if x.get("batch_size") == b2 and x.get("peak_memory_bytes") == p2)
    fixed = sum(int(r.get(f"{c}_bytes") or 0) for c in ("weights", "gradients", "optimizer_state"))
    fixed = min(fixed, p2)
    return round(fixed + (p2 - fixed) * batch / b2)


def available_memory_bytes(device: str) -> tuple[int | None, str]:
    """(bytes free on the training device now, what they are): GPU 0's free memory from
    NVML on ``cuda``, the host's MemAvailable (/proc/meminfo) on ``cpu``; None when it
    cannot be read (no up-front skip then)."""
    if device == "cuda":
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
                return int(info.free), "free on GPU 0 (NVML)"
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - no NVML: no estimate, the OOM check remains
            return None, "GPU memory unknown (NVML not available)"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "available on the host (MemAvailable)"
    except OSError:
        pass
    return None, "host memory unknown"


# What each framework prints when an allocation fails (CPU and GPU), one per line.
_OOM_PATTERNS = re.compile(
    r"out of memory"  # PyTorch CUDA, MXNet cudaMalloc, cuBLAS/cuDNN messages
    r"|can't allocate memory"  # PyTorch DefaultCPUAllocator
    r"|MemoryError|Unable to allocate"  # torch.OutOfMemoryError, Python, NumPy
    r"|ResourceExhaustedError|OOM when allocating"  # TensorFlow
    r"|std::bad_alloc"  # C++ allocation failure (MXNet, TensorFlow)
    r"|_ALLOC_FAILED",  # CUBLAS_STATUS_ALLOC_FAILED, CUDNN_STATUS_ALLOC_FAILED
    re.IGNORECASE,
)
_SIGKILL = re.compile(r"^(?:unprofiled run: )?exit code (?:-9|137):")


def out_of_memory(row: dict[str, Any], logs: Sequence[Path]) -> str | None:
    """Why a failed ``row`` is an out-of-memory failure (a short quote of its log), or None.

    The framework's allocation-failure message in one of the job's ``logs`` decides; a
    process killed by SIGKILL (exit -9 or 137, not at the timeout) counts too, said with
    its caveat: the kernel's OOM killer sends SIGKILL, but so could something else."""
    if row.get("status") != "failed":
        return None
    for log in logs:
        if not log.exists():
            continue
        found = [ln.strip() for ln in log.read_text(errors="replace").splitlines()]
        hits = [ln for ln in found if _OOM_PATTERNS.search(ln)]
        if hits:
            return hits[-1][:200]
    if _SIGKILL.match(row.get("error") or ""):
        return "killed by SIGKILL, as the kernel's OOM killer does (not confirmed by a message)"
    return None


def failed_log(job: Job, cfg: BenchConfig, row: dict[str, Any]) -> Path:
    """The log of the run that failed: the unprofiled run's when the row's error says so
    (under capture it runs first), else the job's own (a log of an earlier bench in the
    same directory is never read for this run)."""
    out = Path(cfg.out_dir)
    if (row.get("error") or "").startswith("unprofiled run:"):
        out = out / runner.UNPROFILED_DIR
    return capture.Paths.for_job(out, job).log


def skipped_row(job: Job, cfg: BenchConfig, why: str) -> dict[str, Any]:
    """The row of a batch size that was not run because it would not fit."""
    row = runner.unsupported_row(job, cfg, why)
    row["status"] = SKIPPED
    return row


def skip_reason(
    done: Sequence[dict[str, Any]], batch: int, free: int | None, what: str
) -> str | None:
    """Why ``batch`` is not run: its estimated peak (:func:`estimate_peak_bytes` over the
    sweep's ``done`` rows) exceeds ``free`` bytes (``what`` says which memory); None when
    it fits or nothing can be estimated."""
    est = estimate_peak_bytes(done, batch)
    if est is None or free is None or est <= free:
        return None
    return (
        f"not run: estimated peak memory {_mib(est)} (extrapolated from the sweep's "
        f"smaller batches) exceeds the {_mib(free)} {what}"
    )


def _mib(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


def run_sweep(
    jobs: Sequence[Job],
    cfg: BenchConfig,
    on_start: OnStart | None = None,
    on_done: OnDone | None = None,
    available: tuple[int | None, str] | None = None,
) -> list[dict[str, Any]]:
    """Run the sweep's jobs with the bench protocol (:func:`runner.run_job`), in order,
    ending each sweep upward where memory runs out (module docstring). ``available``
    fixes the device memory the estimates are held against (tests); by default it is read
    before each run (:func:`available_memory_bytes`)."""
    ended: dict[SweepKey, str] = {}
    done: dict[SweepKey, list[dict[str, Any]]] = defaultdict(list)

    def run_one(job: Job, cfg: BenchConfig, mode: str, device: str) -> dict[str, Any]:
        key = sweep_key(job)
        if key in ended:
            return skipped_row(job, cfg, ended[key])
        row = _run_or_skip(job, cfg, mode, device, done[key], available)
        if row["status"] == "ok":
            done[key].append(row)
        elif row["status"] == OUT_OF_MEMORY:
            ended[key] = f"not run: batch {job.batch_size} ran out of memory"
        elif row["status"] == SKIPPED:
            ended[key] = f"not run: batch {job.batch_size} was estimated not to fit"
        return row

    return runner.run_jobs(jobs, cfg, on_start, on_done, run_one)


def _run_or_skip(
    job: Job,
    cfg: BenchConfig,
    mode: str,
    device: str,
    done: list[dict[str, Any]],
    available: tuple[int | None, str] | None,
) -> dict[str, Any]:
    if job.batch_size is not None and any(r.get("peak_memory_bytes") for r in done):
        free, what = available if available is not None else available_memory_bytes(device)
        why = skip_reason(done, job.batch_size, free, what)
        if why is not None:
            return skipped_row(job, cfg, why)
    row = runner.run_job(job, cfg, mode)
    oom = out_of_memory(row, [failed_log(job, cfg, row)])
    if oom is not None:
        row["status"] = OUT_OF_MEMORY
        row["error"] = (
            f"out of memory at batch {job.batch_size}: {oom}; larger batches of this "
            f"sweep are not run ({row['error']})"
        )
    return row
