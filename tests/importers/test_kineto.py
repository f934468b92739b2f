"""Kineto import on every bundled real trace, checked against an independent reader."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.importers import kineto, validate
from tests.conftest import KINETO, KINETO_TRACES
from tests.inprocess import tbd
from tests.rawkineto import expected_report, load, ns

IDS = [p.name[:40] for p in KINETO_TRACES]


@pytest.fixture(scope="module", params=KINETO_TRACES, ids=IDS)
def imported(request, tmp_path_factory):
    src: Path = request.param
    out = tmp_path_factory.mktemp("kineto") / "trace"
    tables, meta = kineto.import_files([src])
    tbdtrace.write(out, tables, meta)
    return src, tbdtrace.open(out)


def test_row_counts_and_sums_match_raw_json(imported):
    src, tr = imported
    exp = expected_report(src)
    k = tr.table("kernels")
    assert k.num_rows == exp["kernel_count"]
    dur = sum(
        e - s for s, e in zip(k["start_ns"].to_pylist(), k["end_ns"].to_pylist(), strict=True)
    )
    assert dur == exp["kernel_time_ns"]
    assert tr.table("memcpy").num_rows == exp["memcpy_count"]
    assert sum(tr.table("memcpy")["bytes"].to_pylist()) == exp["memcpy_bytes"]
    assert tr.table("memset").num_rows == exp["memset_count"]
    assert tr.table("runtime").num_rows == exp["runtime_count"]


def test_kernel_rows_keep_launch_fields(imported):
    src, tr = imported
    raw = [e for e in load(src)["traceEvents"] if e.get("cat") in ("kernel", "Kernel")]
    if not raw:
        pytest.skip("no kernels in this trace")
    k = tr.table("kernels").to_pylist()
    base = int(load(src).get("baseTimeNanoseconds", 0))
    first = min(raw, key=lambda e: (ns(e["ts"]), e["name"]))
    row = min(k, key=lambda r: (r["start_ns"], r["name"]))
    a = first.get("args", {})
    assert row["start_ns"] == base + ns(first["ts"])
    assert row["name"] == first["name"]
    assert row["correlation_id"] == a.get("correlation")
    assert row["stream_id"] == a.get("stream")
    if "grid" in a:
        assert [row["grid_x"], row["grid_y"], row["grid_z"]] == a["grid"]
        assert [row["block_x"], row["block_y"], row["block_z"]] == a["block"]
    if "registers per thread" in a:
        assert row["registers_per_thread"] == a["registers per thread"]
        assert row["static_shared_bytes"] == a["shared memory"]


def test_runtime_rows_keep_api_name_and_correlation(imported):
    src, tr = imported
    raw = [
        e
        for e in load(src)["traceEvents"]
        if e.get("cat") in ("cuda_runtime", "Runtime", "cuda_driver") and e.get("ph") == "X"
    ]
    rt = tr.table("runtime")
    got = sorted(
        zip(rt["name"].to_pylist(), rt["correlation_id"].to_pylist(), strict=True),
        key=lambda x: (x[0], x[1] or 0),
    )
    want = sorted(
        ((e["name"], e["args"].get("correlation")) for e in raw), key=lambda x: (x[0], x[1] or 0)
    )
    assert got == want


def test_profiler_steps_become_steps(imported):
    src, tr = imported
    names = [
        e["name"]
        for e in load(src)["traceEvents"]
        if e.get("ph") == "X"
        and str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("cat") != "gpu_user_annotation"
    ]
    steps = tr.table("steps")
    assert sorted(steps["step"].to_pylist()) == sorted(int(n.split("#")[1]) for n in names)


def test_report_json_figures_exact(imported):
    src, tr = imported
    exp = expected_report(src)
    out = tbd("report", str(tr.path), "--format", "json", "--window", "all")
    doc = json.loads(out.stdout)
    s = doc["summary"]
    for key in ("kernel_count", "kernel_time_ns", "memcpy_count", "memcpy_bytes", "memset_count"):
        assert s[key] == exp[key], key
    assert s["span_ns"] == exp["rank_span_ns"]
    assert s["gpu_busy_ns"] == exp["rank_busy_ns"]
    devs = {d["device_id"]: d for d in doc["devices"]}
    assert set(devs) == set(exp["devices"])
    for dev, e in exp["devices"].items():
        d = devs[dev]
        for key, v in e.items():
            assert d[key] == v, (dev, key)
        assert d["utilization"] == pytest.approx(e["busy_ns"] / e["span_ns"])
        assert d["compute_utilization"] == pytest.approx(e["compute_busy_ns"] / e["span_ns"])
    ks = {k["name"]: k for k in doc["kernels"]}
    assert set(ks) == set(exp["kernels"])
    for name, e in exp["kernels"].items():
        for key, v in e.items():
            assert ks[name][key] == pytest.approx(v), (name, key)
    totals = [k["total_ns"] for k in doc["kernels"]]
    assert totals == sorted(totals, reverse=True)
    if doc["kernels"]:
        assert sum(k["share"] for k in doc["kernels"]) == pytest.approx(1.0)


def test_old_category_names_are_read():
    src = KINETO / "kineto_tb_plugin" / "worker0.1623143089861.pt.trace.json.gz"
    tables, _ = kineto.import_files([src])
    assert len(tables["kernels"]["start_ns"]) == 8772
    ops = [e for e in load(src)["traceEvents"] if e.get("cat") == "Operator"]
    steps = [e for e in ops if e["name"].startswith("ProfilerStep#")]
    # ProfilerStep ranges are steps and markers, every other operator an ops row.
    assert len(tables["ops"]["start_ns"]) == len(ops) - len(steps) == 23640
    assert len(tables["steps"]["step"]) == len(steps) == 6
    assert set(tables["memcpy"]["copy_kind"].to_pylist()) <= {"HtoD", "DtoH", "DtoD"}


def test_rocm_trace_marks_devices_rocm():
    src = KINETO / "hta" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    tables, meta = kineto.import_files([src])
    assert set(tables["kernels"]["device_type"].to_pylist()) == {"rocm"}
    assert meta["extra"]["rocm"] is True


def test_cpu_only_trace_imports_and_reports(tmp_path):
    src = KINETO / "hta" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    tables, meta = kineto.import_files([src])
    assert "kernels" not in tables
    assert meta["ranks"] == [34]
    tbdtrace.write(tmp_path / "t", tables, meta)
    doc = tbd("report", str(tmp_path / "t"), "--format", "json").stdout
    assert json.loads(doc)["summary"]["kernel_count"] == 0


def test_base_time_offset_is_applied():
    src = KINETO / "hta" / "triton_example.json.gz"
    raw = load(src)
    tables, meta = kineto.import_files([src])
    assert meta["clock_offset_ns"] == raw["baseTimeNanoseconds"]
    k = [e for e in raw["traceEvents"] if e.get("cat") == "kernel"][0]
    assert tables["kernels"]["start_ns"][0].as_py() == raw["baseTimeNanoseconds"] + ns(k["ts"])


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1", 1000),
        ("1.5", 1500),
        ("0.001", 1),
        ("1694039968955744", 1694039968955744000),
        ("4203669604595.407", 4203669604595407),
        ("-2.25", -2250),
        ("1.0005", 1000),
        ("1.0015", 1002),
        ("1e3", 1000000),
        ("2.5E-3", 2),
    ],
)
def test_us_to_ns_is_exact_decimal(text, expected):
    assert validate.us_to_ns(text) == expected


def test_int_times_scale_exactly():
    assert validate.us_to_ns(2**53 + 1) == (2**53 + 1) * 1000


def _write_gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


@pytest.mark.parametrize(
    "content,needle",
    [
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1', b"truncated JSON"),
        (b'{"traceEvents": [}', b"invalid JSON"),
        (b'{"schemaVersion": 1}', b"no traceEvents"),
    ],
)
def test_bad_json_is_one_line_exit_1(tmp_path, content, needle):
    src = _write_gz(tmp_path / "bad.json.gz", content)
    out = tmp_path / "out"
    r = tbd("import", str(src), "--out", str(out), "--format", "kineto", check=False)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(src) in lines[0] and needle.decode() in lines[0]
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_truncated_gzip_is_one_line(tmp_path):
    good = gzip.compress(b'{"traceEvents": []}' * 50)
    src = tmp_path / "cut.json.gz"
    src.write_bytes(good[: len(good) // 2])
    r = tbd("import", str(src), "--out", str(tmp_path / "o"), check=False)
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and str(src) in r.stderr


def test_failed_import_keeps_existing_trace(tmp_path):
    good = KINETO / "hta" / "triton_example.json.gz"
    out = tmp_path / "trace"
    tbd("import", str(good), "--out", str(out))
    before = sorted(p.name for p in out.iterdir())
    bad = _write_gz(tmp_path / "bad.json.gz", b'{"traceEvents": [')
    r = tbd("import", str(bad), "--out", str(out), "--format", "kineto", check=False)
    assert r.returncode == 1
    assert sorted(p.name for p in out.iterdir()) == before
    assert tbdtrace.open(out).table("kernels").num_rows == 1


def test_missing_file_is_one_line(tmp_path):
    r = tbd("import", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o"), check=False)
    assert r.returncode == 1 and "no such file" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_two_ranks_become_one_trace(tmp_path):
    files = [KINETO / "hta" / "sampled_rank-0.json.gz", KINETO / "hta" / "sampled_rank-1.json.gz"]
    tables, meta = kineto.import_files(files)
    assert meta["ranks"] == [0, 1]
    ranks = tables["kernels"]["rank"].to_pylist()
    assert ranks.count(0) == 1154 and ranks.count(1) == 1104
