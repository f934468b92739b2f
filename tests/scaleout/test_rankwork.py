"""Rank-by-rank analysis (process pool, Dask) against the ranks imported as one trace in
one process: the same ``ranks`` section on the real multi-rank fixtures and on a
generated set; missing and broken rank files named while the other ranks are reported."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tbdtrace.cli import main
from tbdtrace.errors import TraceError
from tbdtrace.scaleout import ExecutorSpec, executors, open_executor
from tests.conftest import fixture
from tests.inprocess import tbd
from tests.scaleout.conftest import STRAGGLER

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import gen_ranks  # noqa: E402

NCCL = "kineto/hta/nccl_data.json.gz"


def _report(*args: str) -> tuple[int, dict | None, str]:
    """``tbdtrace report ARGS --format json`` in this process (the per-rank tasks still
    run in the pool's or the cluster's processes): exit code, JSON, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(["report", *args, "--format", "json"])
    assert "Traceback" not in err.getvalue(), err.getvalue()
    text = out.getvalue()
    return rc, json.loads(text) if text.strip() else None, err.getvalue()


def _folder(tmp: Path, rels: list[str]) -> Path:
    for rel in rels:
        f = fixture(rel)
        (tmp / f.name).symlink_to(f)
    return tmp


def _same_three_ways(folder: Path, scheduler: str) -> dict:
    """The ranks section in one process, on the pool and on Dask; asserts they agree."""
    rc, one, err = _report(str(folder))
    assert rc == 0, err
    rc, pool, err = _report(str(folder), "--jobs", "2")
    assert rc == 0 and "local process pool (2 processes)" in err, err
    rc, dask, err = _report(str(folder), "--scheduler", scheduler)
    assert rc == 0 and f"Dask cluster at {scheduler} (2 workers)" in err, err
    assert one is not None and pool is not None and dask is not None
    assert pool["ranks"] == one["ranks"]
    assert dask["ranks"] == one["ranks"]
    return one["ranks"]


def test_real_rank_pair_same_on_pool_and_dask(tmp_path: Path, dask_scheduler: str) -> None:
    folder = _folder(tmp_path, [f"kineto/hta/sampled_rank-{r}.json.gz" for r in (0, 1)])
    ranks = _same_three_ways(folder, dask_scheduler)
    assert [r["rank"] for r in ranks["per_rank"]] == [0, 1]
    assert ranks["collectives"]["matched"] == 10


def test_ddp_fixtures_same_on_pool_and_dask(tmp_path: Path, dask_scheduler: str) -> None:
    folder = _folder(tmp_path, [NCCL, "kineto/hta/df_index_resolver.json.gz"])
    ranks = _same_three_ways(folder, dask_scheduler)
    assert [r["steps"] for r in ranks["per_rank"]] == [3, 5]


def test_generated_set_same_on_pool_and_dask(generated: Path, dask_scheduler: str) -> None:
    ranks = _same_three_ways(generated, dask_scheduler)
    assert [r["rank"] for r in ranks["per_rank"]] == list(range(8))
    rank, step, delay = STRAGGLER
    s = next(x for x in ranks["steps"] if x["step"] == step)
    assert s["straggler"] and s["slowest_rank"] == rank
    assert abs(s["lead_ns"] - delay) <= 0.1 * delay


def test_local_cluster_started_by_the_command(generated: Path, tmp_path: Path) -> None:
    """--workers 2 starts its own cluster; --work-dir keeps the per-rank Parquet parts."""
    rc, one, _ = _report(str(generated))
    rc, doc, err = _report(str(generated), "--workers", "2", "--work-dir", str(tmp_path))
    assert rc == 0 and "local Dask cluster (2 worker processes)" in err, err
    assert doc is not None and one is not None and doc["ranks"] == one["ranks"]
    parts = sorted(p.name for p in tmp_path.glob("input-*/*.parquet"))
    assert parts.count("per_rank.parquet") == parts.count("steps.parquet") == 8


def test_missing_and_broken_rank_files_named(tmp_path: Path, dask_scheduler: str) -> None:
    spec = gen_ranks.JobSpec(ranks=5, steps=2, kernels_per_step=20, missing=(4,), truncated=(1,))
    gen_ranks.generate(fixture(NCCL), spec, tmp_path)
    for how in (["--jobs", "2"], ["--scheduler", dask_scheduler]):
        rc, doc, err = _report(str(tmp_path), str(tmp_path / "rank-4.json.gz"), *how)
        lines = err.strip().splitlines()
        assert rc == 0 and doc is not None
        assert any(str(tmp_path / "rank-1.json.gz") in x and "truncated" in x for x in lines)
        assert any(str(tmp_path / "rank-4.json.gz") in x and "no such" in x for x in lines)
        assert any("3 of 5 ranks present" in x and "rank 1, 4;" in x for x in lines)
        assert [r["rank"] for r in doc["ranks"]["per_rank"]] == [0, 2, 3]
    rc, _, err = _report(str(tmp_path), "--jobs", "2", "--strict")
    assert rc == 1 and "rank-1.json.gz" in err


def test_a_rank_given_twice_is_read_once(tmp_path: Path) -> None:
    for r in (0, 1):
        (tmp_path / f"rank-{r}.json.gz").symlink_to(fixture(f"kineto/hta/sampled_rank-{r}.json.gz"))
    (tmp_path / "rank-9.json.gz").symlink_to(fixture("kineto/hta/sampled_rank-1.json.gz"))
    rc, doc, err = _report(str(tmp_path), "--jobs", "2")
    assert rc == 0 and doc is not None
    assert any("rank-9.json.gz: rank 1 again" in x for x in err.splitlines()), err
    assert [r["rank"] for r in doc["ranks"]["per_rank"]] == [0, 1]


def test_unreachable_scheduler_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1)
    with (
        pytest.raises(TraceError, match=r"tcp://127\.0\.0\.1:9: no Dask scheduler answers"),
        open_executor(ExecutorSpec(scheduler="tcp://127.0.0.1:9"), 1),
    ):
        pass


def test_options_checked(generated: Path) -> None:
    one = str(generated / "rank-0.json.gz")
    for bad in (
        [str(generated), "--jobs", "0"],
        [str(generated), "--workers", "2", "--scheduler", "tcp://x:1"],
        [one, "--jobs", "2"],  # one file: nothing to run rank by rank
    ):
        r = tbd("report", *bad, check=False)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
