"""The analysis on a lite-API trace (capture's default, `--api lite`): the committed H200
full-API capture (tests/data/gpu/h200_resnet50_cupti, ResNet-50, 298,293 runtime/driver
rows) cut down to the calls the lite set records, selected here by the rules applied to the
CUDA headers (tests/native/test_api_filter.py), not by the collector's own list. Every
pass that reads runtime rows (idle causes, sync wait, launch latency and statistics,
attribution of kernels to their launching thread, FLOPs by launching op, CPU activity,
steps) gives the same result on it; the one figure that changes is the phases section's
`init` start and `after` end (and so their wall time): they run from the first to the
last *runtime call* of the whole run, and the calls outside the lite set (cudaGetDevice,
cuDevicePrimaryCtxGetState, ...) start earlier and end later than any launch, copy, sync
or allocation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import tbdtrace
from tbdtrace import trace as trace_mod
from tests.native.test_api_filter import DRIVER, RUNTIME

FULL = Path(__file__).resolve().parents[2] / "data" / "gpu" / "h200_resnet50_cupti"


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    full = tbdtrace.open(FULL)
    tables = {f.stem: full.table(f.stem) for f in FULL.glob("*.arrow")}
    rt = tables["runtime"]
    keep = [
        (api == "runtime" and cbid in RUNTIME) or (api == "driver" and cbid in DRIVER)
        for api, cbid in zip(
            rt.column("api").to_pylist(), rt.column("cbid").to_pylist(), strict=True
        )
    ]
    tables["runtime"] = rt.filter(pa.array(keep))
    meta = {k: v for k, v in full.meta.items() if k != "schema_version"}
    meta["extra"] = dict(meta.get("extra") or {}, api="lite")
    return trace_mod.write(tmp_path_factory.mktemp("lite") / "t", tables, meta)


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{path}.{k}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [path]


def test_the_lite_set_keeps_one_runtime_row_in_fifteen(lite: Path) -> None:
    full, cut = tbdtrace.open(FULL), tbdtrace.open(lite)
    assert full.num_rows("runtime") == 298_293
    assert cut.num_rows("runtime") == 19_169
    names = set(cut.table("runtime").column("name").to_pylist())
    assert {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemsetAsync"} <= names
    assert not names & {"cudaGetDevice", "cuDevicePrimaryCtxGetState", "cudaGetLastError"}
    # Every kernel keeps its launch: nothing the joins need was cut.
    rc = set(cut.table("runtime").column("correlation_id").to_pylist())
    kc = cut.table("kernels").column("correlation_id").to_numpy()
    assert np.isin(kc, np.fromiter(rc, np.int64)).all()


@pytest.mark.parametrize("window", [None, "all"])
def test_the_report_is_the_same_but_for_the_phase_bounds(lite: Path, window: str | None) -> None:
    a = tbdtrace.analyze(FULL, window=window).report()
    b = tbdtrace.analyze(lite, window=window).report()
    changed = set(_diff(a, b)) - {".trace.path"}
    assert changed == {
        ".phases[0].start_ns",
        ".phases[0].wall_ns",
        ".phases[3].end_ns",
        ".phases[3].wall_ns",
    }
    assert [p["phase"] for p in a["phases"]][0::3] == ["init", "after"]


@pytest.mark.parametrize("name", ["idle", "steps", "summary", "flops", "cpu_activity", "kernels"])
def test_passes_reading_runtime_rows_agree_on_the_whole_run(lite: Path, name: str) -> None:
    a = getattr(tbdtrace.analyze(FULL, window="all"), name)()
    b = getattr(tbdtrace.analyze(lite, window="all"), name)()
    assert a.equals(b), name
