"""``tbdtrace bench``: the TBD table (throughput, utilization, FP32 efficiency, memory)
for model x framework x batch size, each workload captured in its own process."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tbdtrace import output_policy
from tbdtrace.commands import _args
from tbdtrace.suite import capture, paper, plan, table
from tbdtrace.suite.plan import DATA_MODES, DEVICES, PRECISIONS, SIZES, BenchConfig, Job
from tbdtrace.suite.runner import run_jobs


class _Extend(argparse.Action):
    """Accept ``--models a,b``, ``--models a b`` and repeated options alike."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        ns: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        items = list(getattr(ns, self.dest) or [])
        for v in values:
            items += [s for s in v.split(",") if s]
        setattr(ns, self.dest, items)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bench",
        help="run TBD workloads under capture and write the benchmark table",
        description="Run each selected workload (model x framework x batch size x ranks x "
        "precision x compilation x input pipeline) in its own process under capture, then "
        "write the TBD table (throughput, scaling efficiency, utilization, FP32 efficiency, "
        "peak memory and its breakdown) as bench.md, bench.csv and bench.json in --out, with TBD's "
        "figures as PNG and bench_findings.md beside them. A failed "
        "workload gets a row with its error, a combination its framework does not support "
        "a row with status unsupported and the reason; the others still run.",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="print the available pairs, one 'model framework' per line, and exit",
    )
    p.add_argument(
        "--models",
        nargs="+",
        action=_Extend,
        default=[],
        metavar="MODEL",
        help="models to run (comma or space separated; default: all)",
    )
    p.add_argument(
        "--frameworks",
        nargs="+",
        action=_Extend,
        default=[],
        metavar="FW",
        help="frameworks to run: pytorch, tensorflow, mxnet (default: all)",
    )
    p.add_argument(
        "--batch-sizes",
        nargs="+",
        action=_Extend,
        default=[],
        metavar="N",
        help="one run per batch size (default: each workload's default)",
    )
    p.add_argument(
        "--size",
        choices=SIZES,
        default=None,
        help="workload size: tiny (seconds on a CPU), small, paper (TBD's) (default tiny; "
        "paper with --paper)",
    )
    p.add_argument(
        "--paper",
        action="store_true",
        help="run TBD's sweep: per model the mini-batch sizes of TBD's figures (--batch-sizes "
        "keeps only those it lists), at --size paper unless --size says otherwise; a sweep "
        "stops where memory runs out (rows out_of_memory and skipped, not failures); writes "
        f"{paper.SUMMARY_MD}, TBD's findings checked against the rows",
    )
    p.add_argument(
        "--steps",
        type=_args.positive_int,
        default=None,
        help=f"measured steps per run (default {GPU_STEPS} with a usable GPU, {CPU_STEPS} "
        "without: CPU steps of the paper-size models take seconds each)",
    )
    p.add_argument(
        "--warmup", type=_args.nonnegative_int, default=1, help="warm-up steps per run (default 1)"
    )
    p.add_argument("--device", choices=DEVICES, default="auto")
    _args.mark_output(
        p.add_argument(
            "--out",
            "-o",
            default="out/bench",
            metavar="DIR",
            help="output directory (default out/bench); one holding files is written "
            "into only with --force",
        ),
        "folder",
    )
    _args.add_force(
        p, "the results of an earlier run in --out (files of other names there are kept)"
    )
    p.add_argument(
        "--timeout",
        type=_args.positive_float,
        default=3600.0,
        metavar="S",
        help="stop a run after S seconds and report it failed (default 3600)",
    )
    p.add_argument(
        "--capture",
        choices=capture.CAPTURES,
        default="auto",
        help="tbdtrace: `tbdtrace capture` around each run; steps: the harness "
        "steps file only; auto: tbdtrace when available (default)",
    )
    p.add_argument(
        "--to-quality",
        action="store_true",
        help="train each run until its held-out quality target is met and report "
        "time-to-quality (MLPerf-style); --steps is then ignored",
    )
    p.add_argument(
        "--no-eval",
        action="store_true",
        help="skip the held-out evaluation each run makes after its last step (a forward "
        "pass over the held-out set, longer than the steps of a short run); the quality "
        "columns stay empty",
    )
    p.add_argument(
        "--nproc",
        nargs="+",
        action=_Extend,
        default=[],
        metavar="N",
        help="data-parallel ranks per run, one run per count, e.g. 1,2 (PyTorch DDP: gloo "
        "on CPU, NCCL on GPU; --batch-sizes are per rank); adds the scaling columns "
        "(default: 1)",
    )
    p.add_argument(
        "--precision",
        nargs="+",
        action=_Extend,
        default=[],
        metavar="P",
        help="training precisions, one run each: fp32, tf32, bf16, fp16 (default fp32); "
        "what each framework supports: docs/WORKLOADS.md",
    )
    p.add_argument(
        "--compile",
        nargs="?",
        const="on",
        default="off",
        metavar="on|off|off,on",
        help="compile the models (torch.compile; --compile off,on runs both)",
    )
    p.add_argument(
        "--data",
        nargs="+",
        action=_Extend,
        default=[],
        metavar="MODE",
        help="input pipelines, one run each: host (the framework's loader, batches built "
        "ahead in workers; default), device (a pool of batches kept on the device); "
        "docs/WORKLOADS.md",
    )
    p.set_defaults(func=_run, _parser=p)


# Default measured steps: enough for a stable median and spread on a GPU (TBD-style runs
# of milliseconds per step); fewer on a CPU, where one paper-size step takes seconds.
GPU_STEPS, CPU_STEPS = 20, 5


def default_steps() -> int:
    """:data:`GPU_STEPS` when NVML sees a GPU, else :data:`CPU_STEPS`."""
    from tbdtrace.collector import gpu_usable

    return GPU_STEPS if gpu_usable()[0] else CPU_STEPS


def _config(args: argparse.Namespace) -> BenchConfig:
    p: argparse.ArgumentParser = args._parser
    if args.size is None:
        args.size = "paper" if args.paper else "tiny"
    if args.steps is None:
        args.steps = default_steps()
    if args.to_quality and args.no_eval:
        p.error("--to-quality needs the evaluation; drop --no-eval")
    try:
        batches = tuple(int(b) for b in args.batch_sizes)
    except ValueError:
        p.error(f"--batch-sizes takes integers, got {' '.join(args.batch_sizes)}")
    if any(b < 1 for b in batches):
        p.error("--batch-sizes must be >= 1")
    try:
        nproc = tuple(int(n) for n in args.nproc) or (1,)
    except ValueError:
        p.error(f"--nproc takes integers, got {' '.join(args.nproc)}")
    if any(n < 1 for n in nproc):
        p.error("--nproc must be >= 1")
    precisions = tuple(args.precision) or ("fp32",)
    bad = [x for x in precisions if x not in PRECISIONS]
    if bad:
        p.error(f"--precision: unknown {', '.join(bad)}; use {', '.join(PRECISIONS)}")
    data = tuple(args.data) or ("host",)
    bad = [x for x in data if x not in DATA_MODES]
    if bad:
        p.error(f"--data: unknown {', '.join(bad)}; use {', '.join(DATA_MODES)}")
    modes = [m for m in args.compile.split(",") if m]
    if not modes or any(m not in ("on", "off") for m in modes):
        p.error(f"--compile takes on, off or off,on, got {args.compile}")
    return BenchConfig(
        out_dir=Path(os.path.abspath(args.out)),  # jobs run elsewhere: not relative
        models=tuple(args.models),
        frameworks=tuple(args.frameworks),
        batch_sizes=batches,
        size=args.size,
        steps=args.steps,
        warmup=args.warmup,
        device=args.device,
        timeout_s=args.timeout,
        capture=args.capture,
        to_quality=args.to_quality,
        no_eval=args.no_eval,
        nproc=tuple(dict.fromkeys(nproc)),
        precisions=tuple(dict.fromkeys(precisions)),
        compile=tuple(dict.fromkeys(m == "on" for m in modes)),
        data=tuple(dict.fromkeys(data)),
    )


def _run(args: argparse.Namespace) -> int:
    if args.list:
        for w in plan.registry():
            print(f"{w.model} {w.framework}")
        return 0
    cfg = _config(args)
    # The results folder is checked before any job runs (an hour of runs, then a refusal,
    # is the failure this avoids).
    output_policy.folder_target(cfg.out_dir, args.force, what="--out")
    jobs = paper.make_jobs(cfg) if args.paper else plan.make_jobs(cfg)
    con = Console(stderr=True)
    mode = capture.resolve(cfg.capture)
    con.print(f"{len(jobs)} run(s), capture: {mode}, results in {cfg.out_dir}")
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=con,
        transient=False,
    ) as bar:
        task = bar.add_task("bench", total=len(jobs))

        def start(_: int, job: Job) -> None:
            bar.update(task, description=job.name)

        def done(_: int, job: Job, row: dict[str, Any]) -> None:
            if row["status"] == "unsupported":
                msg = f"[yellow]unsupported[/yellow] {job.name}: {row['error']}"
            elif row["status"] in (paper.OUT_OF_MEMORY, paper.SKIPPED):
                msg = f"[yellow]{row['status']}[/yellow] {job.name}: {row['error']}"
            elif row["status"] == "ok":
                rate = row["throughput_samples_per_s"]
                msg = (
                    f"[green]ok[/green] {job.name}: {rate:.2f} samples/s"
                    if rate
                    else f"[green]ok[/green] {job.name}"
                )
            else:
                msg = f"[red]failed[/red] {job.name}: {row['error']}"
            bar.console.print(msg, markup=True, highlight=False)
            bar.advance(task)

        run = paper.run_sweep if args.paper else run_jobs
        rows = run(jobs, cfg, start, done)
        bar.update(task, description="done")
    # Imported here, once there are rows: matplotlib's import is most of the start-up of
    # `bench --list` and of a command line refused as a usage error.
    from tbdtrace.suite import figures, paper_summary

    paths = table.write(rows, cfg) + figures.write(rows, cfg.out_dir)
    if args.paper:
        paths.append(paper_summary.write(rows, cfg, plan.resolved_device(cfg), paths))
    sys.stdout.write(table.markdown(rows, cfg))
    con.print("wrote " + ", ".join(str(p) for p in paths))
    failed = sum(r["status"] == "failed" for r in rows)
    if failed:
        con.print(f"tbdtrace: {failed} of {len(rows)} run(s) failed; see the error column")
        return 1
    return 0
