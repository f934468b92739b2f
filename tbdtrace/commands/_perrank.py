"""Command options and driver of the rank-by-rank path of ``report``, ``import`` and ``sql``
over a rank set: per-rank tasks on a process pool or a Dask cluster
(:mod:`tbdtrace.scaleout`), their parts in a work directory."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbdtrace.commands import _args
from tbdtrace.errors import TraceError

if TYPE_CHECKING:
    # The scale-out code (process pools, Dask, cloudpickle: ~0.1-0.15 s of imports) loads
    # only when a command takes the rank-by-rank path, never for one trace or file.
    from tbdtrace.scaleout import ExecutorSpec, RankPart


def add_options(p: argparse.ArgumentParser, what: str) -> None:
    g = p.add_argument_group(
        "rank by rank",
        f"with per-rank files: {what} each rank in its own task and reduce across ranks, "
        "so no process holds every rank's tables (docs/DISTRIBUTED.md)",
    )
    g.add_argument(
        "--jobs",
        type=_args.positive_int,
        metavar="N",
        help="run the per-rank tasks in N local processes (default with --work-dir: one per CPU)",
    )
    g.add_argument(
        "--workers",
        type=_args.positive_int,
        metavar="N",
        help="run them on a local Dask cluster of N worker processes started for this command",
    )
    g.add_argument(
        "--scheduler",
        type=_args.scheduler_address,
        metavar="ADDRESS",
        help="run them on an existing Dask cluster (e.g. tcp://head:8786); the rank files "
        "and --work-dir must be on storage every worker and this machine read",
    )
    g.add_argument(
        "--work-dir",
        metavar="DIR",
        help="folder for the per-rank parts (Parquet), kept afterwards (default: a "
        "temporary folder, removed at the end)",
    )


def requested(args: argparse.Namespace) -> bool:
    """True when an option asks for the rank-by-rank path."""
    return any(getattr(args, k, None) is not None for k in ("jobs", "workers", "scheduler"))


def check(args: argparse.Namespace, prog: str) -> str | None:
    """A usage line for bad options, else None."""
    if args.scheduler is not None and args.workers is not None:
        return f"tbdtrace {prog}: --scheduler uses an existing cluster; drop --workers"
    if args.jobs is not None and (args.scheduler is not None or args.workers is not None):
        return f"tbdtrace {prog}: --jobs is the local process pool; drop it with Dask"
    return None


def spec(args: argparse.Namespace) -> ExecutorSpec:
    from tbdtrace.scaleout import ExecutorSpec

    return ExecutorSpec(jobs=args.jobs, workers=args.workers, scheduler=args.scheduler)


@contextmanager
def work_dir(given: str | None) -> Iterator[Path]:
    """``given`` (created when absent, kept), else a temporary folder removed on exit."""
    if given is not None:
        p = Path(given)
        if p.exists() and not p.is_dir():
            raise TraceError(f"{p}: exists and is a file; --work-dir names a folder")
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TraceError(f"{p}: cannot create the work folder ({e.strerror or e})") from None
        yield p.resolve()
        return
    tmp = Path(tempfile.mkdtemp(prefix="tbdtrace-ranks-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_tasks(
    args: argparse.Namespace,
    prog: str,
    sources: list[Path],
    work: Path,
    keep_trace: bool = False,
    window: Any = None,
) -> tuple[list[RankPart], list[str]]:
    """The usable parts of ``sources`` and the problem lines (also printed as warnings)."""
    from tbdtrace import progress
    from tbdtrace.scaleout import map_ranks, open_executor
    from tbdtrace.scaleout.rankwork import problems_of

    with open_executor(spec(args), len(sources)) as (ex, what):
        print(
            f"tbdtrace {prog}: {len(sources)} rank input{'s' if len(sources) != 1 else ''} "
            f"rank by rank on {what}",
            file=sys.stderr,
        )
        with progress.task(f"{prog}: ranks", len(sources), "ranks") as shown:
            done = shown.update if shown.shown else None
            parts = map_ranks(
                ex,
                [str(s) for s in sources],
                work,
                keep_trace,
                window,
                on_done=(lambda: done(advance=1)) if done else None,
            )
    ok, problems = problems_of(parts)
    for line in problems:
        print(f"tbdtrace {prog}: warning: {line}", file=sys.stderr)
    if not ok:
        raise TraceError("no rank input could be read" + (f": {problems[0]}" if problems else ""))
    return ok, problems
