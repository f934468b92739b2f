"""``tbdtrace hotspots``: text and JSON on a real fixture, usage and input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tbdtrace.trace
from tbdtrace.cli import main
from tbdtrace.importers import kineto
from tests import rawkineto
from tests.conftest import KINETO

FIXTURE = KINETO / "hta" / "benchmark_result_493459_1694039959_trace.json.gz"


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tables, meta = kineto.import_files([FIXTURE])
    return tbdtrace.trace.write(tmp_path_factory.mktemp("hs") / "t", tables, meta)


def test_json_top_kernels_match_the_raw_json(trace_dir: Path, capsys) -> None:
    argv = ["hotspots", str(trace_dir), "--top", "3", "--format", "json", "--window", "all"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["window"]["label"] == "whole trace"
    rows = doc["rows"]
    want = rawkineto.expected_report(FIXTURE)["kernels"]
    top3 = sorted(want.items(), key=lambda kv: (-kv[1]["total_ns"], kv[0]))[:3]
    assert [(r["name"], r["total_ns"], r["count"]) for r in rows] == [
        (n, w["total_ns"], w["count"]) for n, w in top3
    ]
    assert all(r["op"] and r["category"] for r in rows)


@pytest.mark.parametrize(
    "by,header", [("kernel", "Grid x block"), ("op", "Top kernel"), ("category", "Category")]
)
def test_text_by(trace_dir: Path, capsys, by: str, header: str) -> None:
    assert main(["hotspots", str(trace_dir), "--by", by, "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert f"Hotspots by {by}" in out and header in out


def test_bad_top_is_usage_error(trace_dir: Path, capsys) -> None:
    assert main(["hotspots", str(trace_dir), "--top", "0"]) == 2
    assert "--top" in capsys.readouterr().err


def test_not_a_trace_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["hotspots", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a trace directory" in err
