"""CSV and JSON outputs: ``report --format csv``, ``hotspots`` and ``diff`` in CSV, read
back with the csv module and compared with the JSON outputs cell by cell."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.report import tabular
from tests.conftest import fixture
from tests.inprocess import tbd as _run

SMALL = "kineto/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz"
OTHER = "kineto/hta/step_based_trace_2543932.json.gz"


def _cell(v: Any) -> str:
    """How a JSON value is written in a CSV cell (written here, not taken from the code)."""
    if v is None:
        return ""
    if v is True or v is False:
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def _read(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    src = fixture(SMALL)
    out = tmp_path_factory.mktemp("csv") / "tables"
    _run("report", str(src), "--format", "csv", "-o", str(out))
    doc = json.loads(_run("report", str(src), "--format", "json").stdout)
    return out, doc, src


def test_every_list_of_the_report_is_a_csv_file_with_the_same_values(report) -> None:
    out, doc, _ = report
    lists = {
        "kernels": doc["kernels"],
        "categories": doc["categories"],
        "devices": doc["devices"],
        "hotspots.ops": doc["hotspots"]["ops"],
        "steps.steps": doc["steps"]["steps"],
        "utilization.devices": doc["utilization"]["devices"],
        "memory_timeline": doc["memory_timeline"],
        "step_timeline.events": doc["step_timeline"]["events"],
    }
    for name, rows in lists.items():
        got = _read((out / f"{name}.csv").read_text())
        assert len(got) == len(rows), name
        for g, want in zip(got, rows, strict=True):
            assert g == {k: _cell(v) for k, v in want.items()}, name


def test_a_section_of_scalars_is_one_row_and_nested_dicts_are_dotted_columns(report) -> None:
    out, doc, _ = report
    (summary,) = _read((out / "summary.csv").read_text())
    scalars = {k: v for k, v in doc["summary"].items() if not isinstance(v, list | dict)}
    assert summary == {k: _cell(v) for k, v in scalars.items()}
    ranks = _read((out / "summary.ranks.csv").read_text())  # a list in a section: its own table
    assert [r["kernel_count"] for r in ranks] == [
        _cell(r["kernel_count"]) for r in doc["summary"]["ranks"]
    ]
    (mem,) = _read((out / "memory.csv").read_text())
    for cat, v in doc["memory"]["breakdown_at_peak"].items():
        assert mem[f"breakdown_at_peak.{cat}"] == _cell(v)
    steps = _read((out / "memory.steps.csv").read_text())
    assert [s["breakdown_at_peak.other"] for s in steps] == [
        _cell(s["breakdown_at_peak"]["other"]) for s in doc["memory"]["steps"]
    ]


def test_one_table_to_stdout_and_one_section_as_json(report) -> None:
    out, doc, src = report
    one = _run("report", str(src), "--format", "csv", "--section", "hotspots.kernels").stdout
    assert one == (out / "hotspots.kernels.csv").read_text()
    sec = json.loads(_run("report", str(src), "--format", "json", "--section", "idle").stdout)
    assert sec == doc["idle"]


def test_hotspots_csv_matches_its_json() -> None:
    src = fixture(SMALL)
    for by in ("kernel", "op", "category"):
        rows = json.loads(_run("hotspots", str(src), "--by", by, "--format", "json").stdout)["rows"]
        got = _read(_run("hotspots", str(src), "--by", by, "--format", "csv").stdout)
        assert got == [{k: _cell(v) for k, v in r.items()} for r in rows]


def test_diff_csv_and_json(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _run("import", str(fixture(SMALL)), "--out", str(a))
    _run("import", str(fixture(OTHER)), "--out", str(b))
    doc = json.loads(_run("diff", str(a), str(b), "--format", "json").stdout)
    _run("diff", str(a), str(b), "--format", "csv", "-o", str(tmp_path / "d"))
    head = _read((tmp_path / "d" / "headline.csv").read_text())
    assert [h["figure"] for h in head] == list(doc["headline"])
    for h in head:
        want = doc["headline"][h["figure"]]
        assert {k: h[k] for k in ("a", "b", "delta", "ratio")} == {
            k: _cell(want[k]) for k in ("a", "b", "delta", "ratio")
        }
    kern = _read(_run("diff", str(a), str(b), "--format", "csv", "--section", "kernels").stdout)
    assert kern == [{k: _cell(v) for k, v in r.items()} for r in doc["kernels"]]


def test_usage_and_output_errors_are_one_line(tmp_path: Path) -> None:
    src = str(fixture(SMALL))
    for args, code in (
        (("--format", "csv"), 2),
        (("--format", "csv", "--section", "nope"), 2),
        (("--section", "kernels"), 2),
    ):
        r = _run("report", src, *args, check=False)
        assert r.returncode == code and len(r.stderr.strip().splitlines()) == 1, r.stderr
    f = tmp_path / "file.txt"
    f.write_text("mine")
    r = _run("report", src, "--format", "csv", "-o", str(f), check=False)
    assert r.returncode == 1 and str(f) in r.stderr and "Traceback" not in r.stderr
    assert f.read_text() == "mine"  # the user's file is left alone
    r = _run("report", src, "--format", "html", "-o", str(tmp_path / "no" / "x.html"), check=False)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1


def test_tables_of_any_shape() -> None:
    data = {"n": 1, "by": {"x": 2, "rows": [{"a": 1, "d": {"b": None}}]}, "l": [3, [4]]}
    got = {t.name: (t.columns, t.rows) for t in tabular.tables("s", data)}
    assert got == {
        "s": (["n", "by.x"], [[1, 2]]),
        "s.by.rows": (["a", "d.b"], [[1, None]]),
        "s.l": (["value"], [[3], ["[4]"]]),
    }
