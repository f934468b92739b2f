"""The executor per-rank tasks run on: a local process pool, a local Dask cluster, or an
existing Dask cluster. All three are the standard ``concurrent.futures.Executor``
(Dask's ``Client.get_executor()``), so the tasks and the reduce are one code path and
give identical results wherever they run."""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from tbdtrace.errors import TraceError

# Seconds to wait for an existing scheduler to answer.
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class ExecutorSpec:
    # Processes of the local pool (None: one per CPU, at most the number of tasks).
    jobs: int | None = None
    # Worker processes of a local Dask cluster started for this command (None: no Dask).
    workers: int | None = None
    # Address of an existing Dask scheduler (tcp://host:8786); wins over ``workers``.
    scheduler: str | None = None

    @property
    def dask(self) -> bool:
        return self.scheduler is not None or self.workers is not None


@contextmanager
def open_executor(spec: ExecutorSpec, tasks: int) -> Iterator[tuple[Executor, str]]:
    """``(executor, description)`` for ``tasks`` tasks; closed (cluster stopped, pool
    joined) on exit. Raises TraceError (one line) when the scheduler cannot be reached."""
    if spec.dask:
        with _dask(spec) as (ex, what):
            yield ex, what
        return
    n = max(1, min(spec.jobs or os.cpu_count() or 1, tasks))
    # forkserver: children fork from a clean server process, not from this one with its
    # Arrow and DuckDB threads (fork after threads can deadlock in the child).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tbdtrace.scaleout.rankwork"])
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as ex:
        yield ex, f"a local process pool ({n} process{'es' if n != 1 else ''})"


def _distributed() -> Any:
    """Dask's ``distributed``, an optional dependency (extra ``dask``): TraceError saying how
    to install it where it is missing."""
    try:
        import distributed
    except ImportError:
        raise TraceError(
            "--workers and --scheduler run on a Dask cluster, an optional dependency: "
            "pip install 'tbdtrace[dask]'"
        ) from None
    return distributed


@contextmanager
def _dask(spec: ExecutorSpec) -> Iterator[tuple[Executor, str]]:
    Client = _distributed().Client  # noqa: N806

    if spec.scheduler is not None:
        try:
            client = Client(spec.scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as e:
            raise TraceError(
                f"{spec.scheduler}: no Dask scheduler answers there ({e}); start one "
                "(dask scheduler; dask worker ADDRESS on each node) or use --workers N"
            ) from None
        with client:
            n = len(client.scheduler_info().get("workers", {}))
            yield _executor(client), f"the Dask cluster at {spec.scheduler} ({n} workers)"
        return
    n = spec.workers or 1
    try:
        cluster = local_cluster(n)
    except (OSError, RuntimeError, TimeoutError) as e:
        raise TraceError(
            f"cannot start a local Dask cluster of {n} workers ({e}); use --jobs N (a "
            "local process pool) or --scheduler ADDRESS"
        ) from None
    with cluster, Client(cluster) as client:
        yield _executor(client), f"a local Dask cluster ({n} worker processes)"


def _executor(client: Any) -> Executor:
    # pure=False: a task writes files, so it always runs (Dask would otherwise hand back
    # the result of an earlier task with the same arguments still held by the cluster).
    return cast(Executor, client.get_executor(pure=False))


def local_cluster(workers: int) -> Any:
    """A started ``distributed.LocalCluster`` of ``workers`` worker processes."""
    LocalCluster = _distributed().LocalCluster  # noqa: N806

    # One thread per worker: the tasks are Python parses and numpy passes (GIL-bound);
    # processes, not threads, run them side by side. The scheduler's HTTP server (its
    # dashboard) on a free port (":0"), not 8787, which another cluster on the machine
    # may hold.
    return LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
