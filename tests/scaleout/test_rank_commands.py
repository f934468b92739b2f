"""``import`` and ``sql`` over a rank set, rank by rank: per-rank trace directories and a
query over every rank's Parquet files, checked against the rank files' raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.inprocess import tbd

pytestmark = pytest.mark.heavy  # a Dask cluster and process pools (DECISIONS 185)

KERNELS_BY_RANK = "SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank"


def _cli(*argv: str) -> tuple[int, str, str]:
    cp = tbd(*argv, check=False)
    assert "Traceback" not in cp.stderr, cp.stderr
    return cp.returncode, cp.stdout, cp.stderr


def _raw_kernels(folder: Path) -> list[dict]:
    """Per rank file: its rank (distributedInfo) and its kernel events, from the JSON."""
    rows = []
    for f in sorted(folder.glob("rank-*.json.gz")):
        with gzip.open(f, "rt") as fh:
            doc = json.load(fh)
        n = sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel")
        rows.append({"rank": doc["distributedInfo"]["rank"], "n": n})
    return sorted(rows, key=lambda r: r["rank"])


def test_import_on_dask_then_sql_over_the_ranks(
    generated: Path,
    tmp_path: Path,
    dask_scheduler: str,
) -> None:
    out = tmp_path / "job"
    rc, _, err = _cli("import", str(generated), "--out", str(out), "--scheduler", dask_scheduler)
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == [f"rank-{r:05d}" for r in range(8)]
    expect = _raw_kernels(generated)
    rc, text, err = _cli("sql", str(out), KERNELS_BY_RANK, "--format", "json")
    assert rc == 0, err
    assert json.loads(text) == expect
    # The folder of rank trace directories reported (rank by rank, no re-import): the
    # ranks section of the raw files imported as one trace in one process.
    rc, text, err = _cli("report", str(out), "--format", "json")
    assert rc == 0 and "rank by rank" in err, err
    rc, whole, err = _cli("report", str(generated), "--format", "json")
    assert rc == 0 and json.loads(text)["ranks"] == json.loads(whole)["ranks"], err
    # The raw files queried directly (imported to a work folder on the pool): the same.
    rc, text, err = _cli("sql", str(generated), KERNELS_BY_RANK, "--format", "json", "--jobs", "2")
    assert rc == 0 and json.loads(text) == expect, err


def test_import_rank_by_rank_keeps_an_existing_folder(
    generated: Path,
    tmp_path: Path,
) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("kept")
    rc, _, err = _cli("import", str(generated), "--out", str(tmp_path), "--jobs", "2")
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "not an empty folder" in err
    assert mine.read_text() == "kept"


@pytest.mark.parametrize(
    "query", ["COPY kernels TO 'x.csv'", "SELECT * FROM read_text('/etc/hostname')"]
)
def test_sql_over_ranks_stays_sandboxed(
    generated: Path,
    query: str,
) -> None:
    rc, _, err = _cli("sql", str(generated), query, "--jobs", "2")
    assert rc == 1 and "refused" in err
