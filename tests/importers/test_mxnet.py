"""MXNet import of a real mx.profiler dump, against MXNet's own aggregate statistics."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace import importers

DATA = Path(__file__).parents[1] / "data" / "mxnet"
PROFILE = DATA / "gluon_mlp_profile.json.gz"
AGGREGATE = DATA / "gluon_mlp_aggregate.json"
MXNET_PY = Path(__file__).parents[2] / ".venv-mxnet" / "bin" / "python"


def _check(profile: Path, aggregate: Path, tmp: Path) -> None:
    assert importers.detect(profile) == "mxnet"
    tables, meta = importers.import_files([profile])
    tr = tbdtrace.open(tbdtrace.write(tmp / "t", tables, meta))
    ops = tr.table("ops").to_pandas()
    ops["dur_ns"] = ops.end_ns - ops.start_ns
    want = json.loads(aggregate.read_text())["Time"]["operator"]
    assert Counter(ops.name.astype(str)) == {k: v["Count"] for k, v in want.items()}
    for name, stats in want.items():
        # MXNet's aggregate Total is ms rounded to 3 decimals (1 us).
        total_ms = ops[ops.name == name].dur_ns.sum() / 1e6
        assert abs(total_ms - stats["Total"]) <= 0.0015 * max(1, stats["Count"] / 10), name
    k = tr.table("kernels").to_pandas()
    assert len(k) == len(ops) and set(k.device_type.astype(str)) == {"cpu"}
    mk = tr.table("markers").to_pandas()
    api = json.loads(aggregate.read_text())["Time"]["MXNET_C_API"]
    got_api = Counter(mk[mk.domain == "MXNET_C_API"].name.astype(str))
    for name, stats in api.items():
        if name not in ("MXNet C API Calls", "MXNet C API Concurrency"):  # counters
            assert got_api[name] == stats["Count"], name
    assert len(api) > 2 and meta["source"] == "mxnet"
    assert meta["extra"]["files"][0]["unmatched_begin_end"] == 0


def test_committed_profile_matches_mxnet_aggregate(tmp_path: Path) -> None:
    _check(PROFILE, AGGREGATE, tmp_path)


@pytest.mark.skipif(not MXNET_PY.exists(), reason="MXNet venv not built (make venv-mxnet)")
def test_fresh_profile_from_mxnet(tmp_path: Path) -> None:
    shutil.copy(DATA / "make_profile.py", tmp_path)
    cp = subprocess.run(
        [str(MXNET_PY), "make_profile.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cp.returncode == 0, cp.stderr[-2000:]
    _check(tmp_path / "mxnet_profile.json", tmp_path / "mxnet_aggregate.json", tmp_path)
