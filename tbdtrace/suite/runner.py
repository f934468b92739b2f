"""Run the jobs one after another, each in its own process, and build the table rows."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tbdtrace import trace
from tbdtrace.errors import TraceError
from tbdtrace.suite import capture, plan, rows
from tbdtrace.suite.plan import BenchConfig, Job

OnStart = Callable[[int, Job], None]
OnDone = Callable[[int, Job, dict[str, Any]], None]


def _batch_from_log(log: Path, job: Job) -> int | None:
    """The batch size the workload reports in the harness's summary line."""
    if not log.exists():
        return None
    pat = re.compile(
        rf"^{re.escape(job.model)} {re.escape(job.framework)} size=\S+ "
        r"batch=(\d+) ",
        re.MULTILINE,
    )
    found = pat.findall(log.read_text(errors="replace"))
    return int(found[-1]) if found else None


_QUALITY = re.compile(
    r"^(?P<model>\S+) (?P<fw>\S+) quality metric=(?P<metric>\S+) value=(?P<value>\S+) "
    r"target=(?P<target>\S+) reached=(?:yes|no) steps=\d+ time_to_quality_s=(?P<ttq>\S+)$",
    re.MULTILINE,
)


def _float(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v else None  # NaN: no value


def quality_from_log(log: Path, job: Job) -> dict[str, Any]:
    """The quality cells from the harness's last quality line in the job's log (empty
    when the workload printed none)."""
    if not log.exists():
        return {}
    found = [
        m
        for m in _QUALITY.finditer(log.read_text(errors="replace"))
        if m["model"] == job.model and m["fw"] == job.framework
    ]
    if not found:
        return {}
    m = found[-1]
    ttq = _float(m["ttq"])
    return {
        "quality_metric": m["metric"],
        "quality": _float(m["value"]),
        "quality_target": _float(m["target"]),
        "time_to_quality_ns": None if ttq is None else round(ttq * 1e9),
    }


# Where a job's unprofiled run (throughput, CPU utilization) leaves its trace and logs.
UNPROFILED_DIR = "unprofiled"


def _dimensions(job: Job) -> dict[str, Any]:
    return {
        "nproc": job.nproc,
        "precision": job.precision,
        "compiled": "yes" if job.compile else "no",
        "data": job.data,
    }


def unsupported_row(job: Job, cfg: BenchConfig, why: str) -> dict[str, Any]:
    """The row of a job that was not run because its settings are not supported."""
    return rows.empty_row(
        model=job.model,
        framework=job.framework,
        batch_size=job.batch_size,
        size=cfg.size,
        status="unsupported",
        error=why,
        **_dimensions(job),
    )


def run_job(job: Job, cfg: BenchConfig, mode: str) -> dict[str, Any]:
    """Run one job and return its table row (failed rows carry the error).

    Under capture (``tbdtrace``) the job runs twice: first without the profiler (steps
    file and process-tree samples only: throughput, its spread, CPU utilization), then
    profiled (the analysis columns); :func:`rows.protocol` joins the two."""
    paths = capture.Paths.for_job(Path(cfg.out_dir), job)
    row = rows.empty_row(
        model=job.model,
        framework=job.framework,
        batch_size=job.batch_size,
        size=cfg.size,
        status="failed",
        **_dimensions(job),
    )
    unprofiled: dict[str, Any] | None = None
    notes: list[str] = []
    if mode == "tbdtrace":
        upaths = capture.Paths.for_job(Path(cfg.out_dir) / UNPROFILED_DIR, job)
        un = capture.execute("steps", job, cfg, upaths)
        if un.error is not None:
            row.update(wall_ns=un.wall_ns, error=f"unprofiled run: {un.error}")
            return row
        try:
            unprofiled, _ = rows.compute(trace.open(upaths.trace_dir))
        except TraceError as e:
            row["error"] = f"unprofiled run: {e}"
            return row
        if not unprofiled["measured_steps"]:
            notes.append("unprofiled run: no measured steps (throughput unknown)")
    outcome = capture.execute(mode, job, cfg, paths)
    row["wall_ns"] = outcome.wall_ns
    if row["batch_size"] is None:
        row["batch_size"] = _batch_from_log(paths.log, job)
    if outcome.error is not None:
        row["error"] = outcome.error
        return row
    try:
        cells, pnotes = rows.compute(trace.open(paths.trace_dir))
    except TraceError as e:
        row["error"] = str(e)
        return row
    notes += pnotes
    if unprofiled is not None:
        cells = rows.protocol(unprofiled, cells)
    else:
        cells = rows.protocol(cells, None)
    row.update(cells)
    row.update(quality_from_log(paths.log, job))
    row["trace"] = str(paths.trace_dir)
    if not row["measured_steps"]:
        notes.insert(
            0,
            "no measured steps in the trace (the workload must mark its steps "
            "through workloads/harness.py)",
        )
    else:
        row["status"] = "ok"
    row["error"] = "; ".join(notes) or None
    return row


# Runs one supported job: (job, cfg, capture mode, resolved device) -> its row.
RunOne = Callable[[Job, BenchConfig, str, str], dict[str, Any]]


def _run_one(job: Job, cfg: BenchConfig, mode: str, device: str) -> dict[str, Any]:
    return run_job(job, cfg, mode)


def run_jobs(
    jobs: Sequence[Job],
    cfg: BenchConfig,
    on_start: OnStart | None = None,
    on_done: OnDone | None = None,
    run_one: RunOne = _run_one,
) -> list[dict[str, Any]]:
    """Run every job (a failure does not stop the others); rows in job order. A job
    ``workloads/dimensions.py`` rules out gets an ``unsupported`` row; the others go to
    ``run_one`` (:func:`run_job` by default; ``bench --paper`` passes its sweep's)."""
    mode = capture.resolve(cfg.capture)
    device = plan.resolved_device(cfg)
    out: list[dict[str, Any]] = []
    for i, job in enumerate(jobs):
        if on_start:
            on_start(i, job)
        why = plan.unsupported(job, device, cfg.size)
        row = unsupported_row(job, cfg, why) if why else run_one(job, cfg, mode, device)
        out.append(row)
        if on_done:
            on_done(i, job, row)
    rows.add_scaling(out)
    return out
