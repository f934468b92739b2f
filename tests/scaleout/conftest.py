"""One real Dask cluster (LocalCluster, 2 worker processes) for the session's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tbdtrace.scaleout import executors


@pytest.fixture(scope="session")
def dask_scheduler() -> Iterator[str]:
    """The address of a running 2-worker local cluster (started once: seconds)."""
    with executors.local_cluster(2) as cluster:
        yield cluster.scheduler_address
