"""hotspots pass: attribution golden test and per-kernel / per-op sums on a real fixture."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.analysis.passes import hotspots
from tbdtrace.importers import kineto
from tests import rawkineto
from tests.analysis.tiny import US, kernels, make
from tests.conftest import KINETO


def _trace(tmp_path: Path):
    # Thread (1, 1): linear [0,100] > addmm [10,50]; relu [60,90]; all inside marker "fwd".
    ops = {
        "start_ns": [0, 10 * US, 60 * US, 500 * US, 0],
        "end_ns": [100 * US, 50 * US, 90 * US, 510 * US, 200 * US],
        "name": ["aten::linear", "aten::addmm", "aten::relu", "aten::mul", "nn.Module: Linear_0"],
        "category": ["cpu_op"] * 4 + ["python_function"],
        "pid": [1, 1, 1, 2, 1],
        "tid": [1, 1, 1, 2, 1],
        "external_id": [1, 2, 3, 7, 8],
    }
    runtime = {
        "start_ns": [20 * US, 70 * US, 95 * US],
        "end_ns": [22 * US, 72 * US, 97 * US],
        "correlation_id": [11, 12, 13],
        "pid": [1] * 3,
        "tid": [1] * 3,
        "name": ["cudaLaunchKernel"] * 3,
    }
    markers = {
        "start_ns": [0, 0],
        "end_ns": [200 * US, 300 * US],
        "pid": [1, 1],
        "tid": [1, 1],
        "name": ["fwd", "ProfilerStep#1"],
        "kind": ["range", "range"],
    }
    k = kernels(
        [
            (1000, 1030, "sgemm"),
            (1040, 1050, "sgemm"),
            (1060, 1065, "tail"),
            (1070, 1072, "mul_kernel"),
        ],
        correlation_id=[11, 12, 13, 99],
        external_id=[None, None, None, 7],
        grid_x=[4, 4, 2, None],
        grid_y=[1, 1, 1, None],
        grid_z=[1, 1, 1, None],
        block_x=[128, 128, 64, None],
        block_y=[1, 1, 1, None],
        block_z=[1, 1, 1, None],
    )
    return make(tmp_path, {"kernels": k, "ops": ops, "runtime": runtime, "markers": markers})


def test_by_kernel_attribution(tmp_path: Path) -> None:
    rows = {r["name"]: r for r in hotspots.run(_trace(tmp_path)).to_pylist()}
    sg = rows["sgemm"]
    assert sg["count"] == 2 and sg["total_ns"] == 40 * US
    assert sg["op"] == "aten::addmm" and sg["op_share"] == pytest.approx(0.75)
    assert sg["marker"] == "fwd" and sg["module"] == "nn.Module: Linear_0"
    assert sg["launch"] == "grid=(4,1,1) block=(128,1,1)" and sg["category"] == "gemm"
    # launched at 95 us: only aten::linear contains it
    assert rows["tail"]["op"] == "aten::linear"
    # no runtime call: found through external id; no launch thread, so no marker
    mk = rows["mul_kernel"]
    assert mk["op"] == "aten::mul" and mk["marker"] is None and mk["launch"] is None


def test_by_op_and_category(tmp_path: Path) -> None:
    tr = _trace(tmp_path)
    ops = {r["op"]: r for r in hotspots.run(tr, hotspots.HotspotsConfig(by="op")).to_pylist()}
    assert ops["aten::addmm"]["total_ns"] == 30 * US
    assert ops["aten::relu"]["total_ns"] == 10 * US
    assert ops["aten::linear"]["top_kernel"] == "tail"
    assert sum(r["share"] for r in ops.values()) == pytest.approx(1.0)
    cats = hotspots.run(tr, hotspots.HotspotsConfig(by="category")).to_pylist()
    # "tail" (a name no table knows) is launched by aten::linear: gemm by its op.
    assert {r["category"]: r["by_op_ns"] for r in cats} == {"gemm": 5 * US, "elementwise": 0}
    assert hotspots.run(tr, hotspots.HotspotsConfig(top=1)).num_rows == 1


def test_empty_trace(tmp_path: Path) -> None:
    tr = make(tmp_path, {})
    for by in hotspots.BY:
        assert hotspots.run(tr, hotspots.HotspotsConfig(by=by)).num_rows == 0


def _raw_op_times(path: Path) -> dict[str, int]:
    """Independent attribution: kernel -> runtime (correlation) -> innermost cpu_op."""
    events = rawkineto.load(path)["traceEvents"]
    ops_by_thread: dict[tuple, list] = defaultdict(list)
    runtime = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") in ("cpu_op", "Operator"):
            s = Decimal(e["ts"])
            ops_by_thread[(e["pid"], e["tid"])].append((s, s + Decimal(e.get("dur", 0)), e["name"]))
        elif e.get("cat") in rawkineto.RUNTIME:
            runtime[e["args"]["correlation"]] = e
    out: dict[str, int] = defaultdict(int)
    for s, e, _, k in rawkineto.device_events(path)["kernels"]:
        r = runtime.get(k["args"].get("correlation"))
        name = "<unattributed>"
        if r is not None:
            t = Decimal(r["ts"])
            inside = [o for o in ops_by_thread[(r["pid"], r["tid"])] if o[0] <= t <= o[1]]
            if inside:
                name = max(inside, key=lambda o: (o[0], -o[1]))[2]
        out[name] += e - s
    return dict(out)


@pytest.mark.parametrize(
    "rel",
    [
        "hta/benchmark_result_493459_1694039959_trace.json.gz",
        "hta/step_based_trace_2543932.json.gz",
    ],
)
def test_fixture_sums_match_the_raw_json(rel: str, tmp_path: Path) -> None:
    path = KINETO / rel
    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    want = rawkineto.expected_report(path)["kernels"]
    got = {r["name"]: r for r in hotspots.run(tr, hotspots.HotspotsConfig(top=None)).to_pylist()}
    assert {n: (r["count"], r["total_ns"]) for n, r in got.items()} == {
        n: (w["count"], w["total_ns"]) for n, w in want.items()
    }
    by_op = hotspots.run(tr, hotspots.HotspotsConfig(top=None, by="op")).to_pylist()
    assert {r["op"]: r["total_ns"] for r in by_op} == _raw_op_times(path)


def test_join_fast_and_general_paths_agree() -> None:
    import numpy as np

    from tbdtrace.analysis.engine.joins import NULL_ID, join_pairs

    rng = np.random.default_rng(3)
    b_hi, b_lo = rng.integers(-1, 3, 300), rng.integers(0, 100, 300)
    a_hi, a_lo = rng.integers(-1, 3, 500), rng.integers(0, 120, 500)
    a_lo[::7] = NULL_ID
    fast = join_pairs(a_hi, a_lo, b_hi, b_lo)
    big = 1 << 50  # forces the general path
    slow = join_pairs(a_hi, np.where(a_lo == NULL_ID, NULL_ID, a_lo + big), b_hi, b_lo + big)
    for i in range(a_lo.size):
        cands = [j for j in range(b_lo.size) if b_hi[j] == a_hi[i] and b_lo[j] == a_lo[i]]
        if a_lo[i] == NULL_ID or not cands:
            assert fast[i] == -1 and slow[i] == -1
        else:
            assert fast[i] in cands and slow[i] in cands


def test_row_codes_groups_equal_rows() -> None:
    import numpy as np

    from tbdtrace.analysis.engine.grouping import row_codes

    rng = np.random.default_rng(5)
    cols = [rng.integers(-1, 3, 2000) for _ in range(4)]
    code, first = row_codes(*cols)
    rows = list(zip(*(c.tolist() for c in cols), strict=True))
    seen: dict[tuple, int] = {}
    for r, c in zip(rows, code.tolist(), strict=True):
        assert seen.setdefault(r, c) == c  # equal rows, equal codes
    assert len(set(seen.values())) == len(seen) == first.size  # distinct rows, distinct codes
    assert [rows[i] for i in first] == sorted(seen, key=seen.get)
