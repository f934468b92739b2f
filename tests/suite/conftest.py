"""Bench runs that several test files of the suite read, each made once per test run.

``make test`` runs each file on one worker (``--dist loadfile``), so files that read the
same bench run may be on different workers: the run is made by whichever asks first,
under a file lock in the directory the workers share, and the others wait for it and
read its output. Runs go through ``tbdtrace.cli.main`` in the test process
(tests/inprocess.py); their workloads are still processes of their own.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.inprocess import tbd

BenchRun = tuple[subprocess.CompletedProcess[str], Path]


def run_bench(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``tbdtrace bench ARGS --out OUT`` in the test process, with one intra-op thread
    for its workloads (steady on a loaded 2-core machine). A run that hangs is stopped
    by bench's own ``--timeout`` (per workload run)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            mp.delenv(k, raising=False)
        return tbd("bench", *args, "--timeout", "600", "--out", str(out), check=False)


@pytest.fixture(scope="session")
def shared_bench(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., BenchRun]:
    """``shared_bench(name, *args)``: the bench run ``name`` (``tbdtrace bench ARGS``),
    made once per test run whichever worker asks first; its result and output folder."""
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker has its own basetemp inside the run's folder; alone, the
    # basetemp is the run's folder (its parent holds earlier runs: never shared).
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-bench"
    root.mkdir(exist_ok=True)

    def get(name: str, *args: str) -> BenchRun:
        out = root / name
        done = root / f"{name}.json"
        with (root / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if done.exists():
                rec = json.loads(done.read_text())
                if rec["args"] != list(args):
                    raise AssertionError(f"bench run {name} asked for with other arguments")
                cp = subprocess.CompletedProcess(
                    rec["argv"], rec["returncode"], rec["stdout"], rec["stderr"]
                )
            else:
                cp = run_bench(out, *args)
                rec = {
                    "args": list(args),
                    "argv": list(cp.args),
                    "returncode": cp.returncode,
                    "stdout": cp.stdout,
                    "stderr": cp.stderr,
                }
                done.write_text(json.dumps(rec))
        return cp, out

    return get


@pytest.fixture(scope="session")
def wgan_steps_run(shared_bench: Callable[..., BenchRun]) -> BenchRun:
    """WGAN (PyTorch, tiny, default batch) under the steps capture, once per input
    pipeline (``--data host,device``), 1 warm-up and 2 measured steps, each run evaluated
    after its last step: the quality columns (test_quality_columns.py) and the data
    dimension (test_data_dimension.py) are read from it."""
    return shared_bench(
        "wgan-steps",
        *("--models", "wgan", "--frameworks", "pytorch", "--data", "host,device"),
        *("--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"),
        *("--capture", "steps"),
    )
