"""One real Dask cluster (LocalCluster, 2 worker processes) and one generated 8-rank set
for the session's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tbdtrace.scaleout import executors
from tests.conftest import fixture

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import gen_ranks  # noqa: E402

NCCL = "kineto/hta/nccl_data.json.gz"
STRAGGLER = (5, 2, 3_000_000)  # rank 5 sleeps 3 ms before step 2


@pytest.fixture(scope="session")
def dask_scheduler() -> Iterator[str]:
    """The address of a running 2-worker local cluster (started once: seconds)."""
    with executors.local_cluster(2) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranks8")
    spec = gen_ranks.JobSpec(ranks=8, steps=3, kernels_per_step=60, stragglers=(STRAGGLER,))
    gen_ranks.generate(fixture(NCCL), spec, out)
    return out
