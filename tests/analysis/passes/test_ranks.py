"""Cross-rank analysis: the collectives table against the raw JSON, real rank pairs as a
folder, matching by sequence number, nccl-tests bandwidth, injected stragglers and slow
links found (expected values from the generator's parameters), missing/broken rank files."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import fixture

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import gen_ranks  # noqa: E402

NCCL = "kineto/hta/nccl_data.json.gz"
STRAGGLER = (1, 3, 4_000_000)  # rank 1 sleeps 4 ms before step 3
SLOW = (2, 500_000)  # rank 2's collectives end 500 us late


def _report(*args: str, strict: bool = False) -> tuple[int, dict | None, str]:
    cmd = [sys.executable, "-m", "tbdtrace", "report", *args, "--format", "json"]
    r = subprocess.run(cmd + (["--strict"] if strict else []), capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None, r.stderr


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("job")
    spec = gen_ranks.JobSpec(
        ranks=4, steps=5, kernels_per_step=120, stragglers=(STRAGGLER,), slow_link=SLOW
    )
    gen_ranks.generate(fixture(NCCL), spec, out)
    rc, doc, err = _report(str(out))
    assert rc == 0, err
    return {"dir": out, "doc": doc, "spec": spec}


def _raw(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def test_collectives_rows_equal_the_raw_kernel_args() -> None:
    from tbdtrace.importers import import_files
    from tbdtrace.trace import from_tables

    path = fixture(NCCL)
    doc = _raw(path)
    base = int(doc.get("baseTimeNanoseconds", 0))
    names = {"allreduce": "all_reduce", "broadcast": "broadcast"}
    size = {"Float": 4, "Byte": 1, "Long": 8}  # bytes per element of the c10 dtypes
    expect = sorted(
        (
            base + int(e["ts"] * 1000),
            names[e["args"]["Collective name"]],
            e["args"]["Process Group Name"],
            e["args"]["In msg nelems"] * size[e["args"]["dtype"]],
            e["args"]["Out msg nelems"] * size[e["args"]["dtype"]],
            e["args"]["Group size"],
            e["args"]["correlation"],
        )
        for e in doc["traceEvents"]
        if e.get("cat") == "kernel" and e["name"].startswith("nccl")
    )
    tables, meta = import_files([path])
    tr = from_tables(tables, meta, path)
    t = tr.table("collectives").to_pydict()
    got = sorted(
        zip(
            t["start_ns"],
            t["op"],
            t["process_group"],
            t["in_bytes"],
            t["out_bytes"],
            t["group_size"],
            t["correlation_id"],
            strict=True,
        )
    )
    assert got == expect and len(got) == 21
    assert all(h is not None for h in t["host_start_ns"])  # record_param_comms joined


def test_real_rank_pair_as_a_folder(tmp_path: Path) -> None:
    files = [fixture(f"kineto/hta/sampled_rank-{r}.json.gz") for r in (0, 1)]
    for f in files:
        (tmp_path / f.name).symlink_to(f)
    per_rank_nccl = [
        sum(1 for e in _raw(f)["traceEvents"] if e.get("cat") == "kernel" and "nccl" in e["name"])
        for f in files
    ]
    rc, doc, err = _report(str(tmp_path))
    assert rc == 0
    assert "2 of 128 ranks present" in err  # world_size 128 in the files
    ranks = doc["ranks"]
    assert [r["rank"] for r in ranks["per_rank"]] == [0, 1]
    assert [r["steps"] for r in ranks["per_rank"]] == [2, 2]
    coll = ranks["collectives"]
    assert coll["method"] == "order"  # these traces carry no Seq arg
    assert coll["matched"] == min(per_rank_nccl) == 10
    assert [s["step"] for s in ranks["steps"]] == [551, 552]
    assert ranks["across_ranks"]["steps"]["spread"] == 0
    assert ranks["notes"] == []  # one job: the ranks' spans overlap


def test_ddp_fixtures_as_a_folder(tmp_path: Path) -> None:
    """nccl_data (rank 0) and df_index_resolver (rank 1): both world size 2, but recorded
    on different GPUs two years apart, so not one job; they are still reported per rank."""
    for rel in (NCCL, "kineto/hta/df_index_resolver.json.gz"):
        f = fixture(rel)
        (tmp_path / f.name).symlink_to(f)
    rc, doc, err = _report(str(tmp_path))
    assert rc == 0, err
    rows = doc["ranks"]["per_rank"]
    assert [r["rank"] for r in rows] == [0, 1]
    assert [r["steps"] for r in rows] == [3, 5]
    assert all(r["communication_ns"] > 0 for r in rows)
    assert "do not overlap" in doc["ranks"]["notes"][0]


def test_text_report_of_a_folder_shows_ranks_stragglers_and_skew(job: dict) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", str(job["dir"])],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Ranks (4 ranks)" in r.stdout and "spread" in r.stdout
    assert "Stragglers per step" in r.stdout
    assert "matched across ranks by sequence number" in r.stdout and "arrival skew" in r.stdout
    assert "suspect" in r.stdout


def test_generated_collectives_match_by_sequence_number(job: dict) -> None:
    coll = job["doc"]["ranks"]["collectives"]
    spec = job["spec"]
    assert coll["method"] == "sequence_number"
    assert coll["matched"] == spec.steps * spec.collectives_per_step
    assert coll["unmatched_rows"] == 0
    # The straggler's sleep makes the others wait for it at step 3's first collective.
    worst = coll["largest_skew"][0]
    rank, _, delay = STRAGGLER
    assert worst["last_rank_in"] == rank
    assert abs(worst["arrival_skew_ns"] - delay) <= 0.1 * delay
    assert {w["rank"]: w["wait_ns"] for w in worst["waits"]}[rank] == 0


def test_order_matching_without_sequence_numbers(tmp_path: Path) -> None:
    spec = gen_ranks.JobSpec(ranks=3, steps=2, kernels_per_step=20, seq=False)
    gen_ranks.generate(fixture(NCCL), spec, tmp_path)
    rc, doc, _ = _report(str(tmp_path))
    coll = doc["ranks"]["collectives"]
    assert rc == 0 and coll["method"] == "order"
    assert coll["matched"] == spec.steps * spec.collectives_per_step


def test_injected_straggler_is_found_within_10_percent(job: dict) -> None:
    rank, step, delay = STRAGGLER
    steps = {s["step"]: s for s in job["doc"]["ranks"]["steps"]}
    s = steps[step]
    assert s["straggler"] and s["slowest_rank"] == rank
    assert abs(s["lead_ns"] - delay) <= 0.1 * delay
    assert not any(x["straggler"] for n, x in steps.items() if n != step)


def test_injected_slow_link_is_found_within_10_percent(job: dict) -> None:
    rank, extra = SLOW
    per = {r["rank"]: r for r in job["doc"]["ranks"]["collectives"]["per_rank"]}
    assert per[rank]["slow_link"]
    assert abs(per[rank]["excess_ns"] - extra) <= 0.1 * extra
    assert [r for r, x in per.items() if x["slow_link"]] == [rank]


def test_bandwidth_follows_nccl_tests() -> None:
    from tbdtrace.analysis.passes.ranks import collective_stats

    size, n = 1 << 30, 4
    starts, ends = np.array([0, 400, 1000, 700]), np.array([5000, 5000, 5000, 5200])
    for op, factor in (
        ("all_reduce", 2 * (n - 1) / n),
        ("all_gather", (n - 1) / n),
        ("reduce_scatter", (n - 1) / n),
        ("all_to_all", (n - 1) / n),
        ("broadcast", 1.0),
    ):
        c = {"op": op, "starts": starts, "ends": ends, "size_bytes": size, "group_size": n}
        x = collective_stats(c)
        transfer = 5200 - 1000  # last end - last arrival
        assert x["arrival_skew_ns"] == 1000
        assert x["wait_ns"] == [1000, 600, 0, 300]
        assert x["algbw_bytes_per_s"] == pytest.approx(size / (transfer * 1e-9))
        assert x["busbw_bytes_per_s"] == pytest.approx(size / (transfer * 1e-9) * factor)


def test_missing_and_truncated_rank_files_are_named(tmp_path: Path) -> None:
    spec = gen_ranks.JobSpec(ranks=4, steps=2, kernels_per_step=20, missing=(3,), truncated=(0,))
    gen_ranks.generate(fixture(NCCL), spec, tmp_path)
    rc, doc, err = _report(str(tmp_path), str(tmp_path / "rank-3.json.gz"))
    lines = err.strip().splitlines()
    assert rc == 0 and "Traceback" not in err
    assert any(str(tmp_path / "rank-0.json.gz") in x and "truncated" in x for x in lines)
    assert any(str(tmp_path / "rank-3.json.gz") in x and "no such" in x for x in lines)
    assert any("2 of 4 ranks present" in x and "rank 0, 3;" in x for x in lines)
    assert [r["rank"] for r in doc["ranks"]["per_rank"]] == [1, 2]
    rc, _, err = _report(str(tmp_path), strict=True)
    assert rc == 1 and "rank-0.json.gz" in err


def test_kineto_collectives_of_a_generated_rank(job: dict) -> None:
    from tbdtrace.importers import kineto

    path = job["dir"] / "rank-0.json.gz"
    tables, _ = kineto.import_files([path])
    a = tables["collectives"]
    assert a["sequence_number"].to_pylist() == list(
        range(job["spec"].steps * job["spec"].collectives_per_step)
    )
    assert set(a["group_size"].to_pylist()) == {4}


def test_generated_launches_leave_the_ranks_section_unchanged(job: dict, tmp_path: Path) -> None:
    """bench/gen_ranks.py --launches (for HTA): one host launch per kernel, the rank where
    HTA's pattern finds it, and the same cross-rank figures as without launches."""
    import re
    from dataclasses import replace

    spec = replace(job["spec"], launches=True)
    gen_ranks.generate(fixture(NCCL), spec, tmp_path)
    for r in range(spec.ranks):
        path = tmp_path / f"rank-{r}.json.gz"
        with gzip.open(path, "rt") as f:
            head = f.readline()
        m = re.search(r'"rank":\s+(\d+)', head)  # HTA 0.5.0's rank pattern
        assert m is not None and int(m.group(1)) == r
        ev = _raw(path)["traceEvents"]
        kernels = [e["args"]["correlation"] for e in ev if e["cat"] == "kernel"]
        launches = sorted(
            (e["ts"], e["ts"] + e["dur"], e["args"]["correlation"])
            for e in ev
            if e["cat"] == "cuda_runtime"
        )
        assert sorted(kernels) == sorted(c for _, _, c in launches)
        assert len(set(kernels)) == len(kernels) == len(launches)
        assert all(a[1] <= b[0] for a, b in zip(launches, launches[1:], strict=False))
    rc, doc, err = _report(str(tmp_path))
    assert rc == 0, err
    assert doc["ranks"] == job["doc"]["ranks"]
