"""The library facade: ``tbdtrace.analyze(trace)`` offers every declared pass as a
documented method, returns the passes' tables, and its docs/API.md is generated."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.facade import TraceAnalysis, render_markdown
from tbdtrace.analysis.passes.hotspots import HotspotsConfig
from tbdtrace.report import build
from tests.analysis.tiny import US, kernels, make
from tests.conftest import fixture

ROOT = Path(__file__).resolve().parents[2]
SMALL = "kineto/hta/benchmark_result_493459_1694039959_trace.json.gz"


def test_every_pass_is_a_documented_method() -> None:
    names = dir(TraceAnalysis)
    for out in outputs.PASSES:
        assert out.name in names
        doc = inspect.getdoc(getattr(TraceAnalysis, out.name)) or ""
        for c in out.columns:
            assert f"{c.name} (" in doc, (out.name, c.name)
    for extra in ("sql", "diff", "report", "report_text"):
        assert inspect.getdoc(getattr(TraceAnalysis, extra))


def test_tables_from_a_hand_made_trace(tmp_path: Path) -> None:
    tr = make(tmp_path, {"kernels": kernels([(0, 2, "a"), (3, 4, "a"), (5, 10, "b")])})
    a = tbdtrace.analyze(tr)
    k = a.kernels().to_pylist()
    assert [(r["name"], r["count"], r["total_ns"]) for r in k] == [
        ("b", 1, 5 * US),
        ("a", 2, 3 * US),
    ]
    s = a.summary().to_pylist()[0]
    assert (s["span_ns"], s["busy_ns"]) == (10 * US, 8 * US)
    assert a.sql("SELECT count(*) AS n FROM kernels").column("n").to_pylist() == [3]
    d = a.diff(tr).to_pylist()
    assert all(r["delta_ns"] == 0 for r in d) and len(d) == 2
    assert a.hotspots(HotspotsConfig(top=1)).column("name").to_pylist() == ["b"]


def test_analyze_a_profiler_file_and_a_trace_directory(tmp_path: Path) -> None:
    path = fixture(SMALL)
    a = tbdtrace.analyze(path)
    assert a.kernels().num_rows > 0
    doc = a.report()
    assert json.loads(json.dumps(doc)) == json.loads(json.dumps(build(a.whole)))
    assert "tbdtrace report" in a.report_text()
    from tbdtrace.importers import import_files

    tables, meta = import_files([path])
    d = tbdtrace.write(tmp_path / "t", tables, meta)
    b = tbdtrace.analyze(tbdtrace.open(d))
    assert b.kernels().equals(a.kernels())


def test_window_restricts_the_tables(tmp_path: Path) -> None:
    # Step 0 is warm-up: the measured window holds the kernels of steps 1 and 2 only.
    tr = make(
        tmp_path,
        {
            "kernels": kernels([(0, 1, "k"), (10, 11, "k"), (20, 21, "k")]),
            "steps": {
                "step": [0, 1, 2],
                "start_ns": [0, 10 * US, 20 * US],
                "end_ns": [5 * US, 15 * US, 25 * US],
                "warmup": [True, False, False],
            },
        },
    )
    a = tbdtrace.analyze(tr, window="measured")
    assert a.ctx.window is not None and a.ctx.trace is tr and a.whole is tr
    assert a.kernels().column("count").to_pylist() == [2]
    # The default is the report's window, the measured steps (it was the whole trace).
    assert tbdtrace.analyze(tr).kernels().column("count").to_pylist() == [2]
    assert tbdtrace.analyze(tr).report()["kernels"][0]["count"] == 2
    whole = tbdtrace.analyze(tr, window="all")
    assert whole.ctx.window is None and whole.ctx.trace is tr
    assert whole.kernels().column("count").to_pylist() == [3]
    # steps= is --steps: step numbers, inclusive, warm-up or not.
    assert tbdtrace.analyze(tr, steps="0:1").kernels().column("count").to_pylist() == [2]
    assert tbdtrace.analyze(tr, steps=(2, 2)).kernels().column("count").to_pylist() == [1]
    assert tbdtrace.analyze(tr, window="all").report(steps="0")["kernels"][0]["count"] == 1


def test_top_level_names() -> None:
    assert "analyze" in tbdtrace.__all__ and tbdtrace.analyze is not None
    assert tbdtrace.TraceAnalysis is TraceAnalysis


def test_api_doc_is_generated() -> None:
    text = (ROOT / "docs" / "API.md").read_text()
    assert text == render_markdown(), "run `make docs` and commit docs/API.md"


@pytest.mark.parametrize("bad", ["nope"])
def test_a_bad_window_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="window kind"):
        tbdtrace.analyze(fixture(SMALL), window=bad)


@pytest.mark.parametrize("bad", ["x", "5:3", "1:b"])
def test_a_bad_step_range_is_a_clear_error(bad: str) -> None:
    tr = tbdtrace.analyze(fixture(SMALL), window="all")
    with pytest.raises(ValueError, match="steps"):
        tbdtrace.analyze(tr.whole, steps=bad)
    with pytest.raises(ValueError, match="steps"):
        tr.report(steps=bad)


CONTROL = "kineto/hta/control.json.gz"  # six ProfilerStep ranges, 1009-1014
H200 = ROOT / "tests" / "data" / "gpu" / "h200_resnet50_cupti"  # 3 warm-up steps, then 20


def _raw_kernels_in_steps(path: Path, first: int, last: int) -> int:
    """Kernels of the file launched (by their runtime call's start, else their own start)
    inside ProfilerStep#first .. #last, read with the independent reader."""
    from tests import rawkineto as rk

    ev = [e for e in rk.load(path)["traceEvents"] if e.get("ph") == "X"]
    steps = [
        (rk.ns(e["ts"]), rk.ns(e["ts"]) + rk.ns(e["dur"]))
        for e in ev
        if str(e.get("name", "")).startswith("ProfilerStep#")
        and first <= int(e["name"].split("#")[1]) <= last
    ]
    lo, hi = min(s for s, _ in steps), max(e for _, e in steps)
    launch = {
        e["args"]["correlation"]: rk.ns(e["ts"])
        for e in ev
        if e.get("cat") in rk.RUNTIME and "correlation" in e.get("args", {})
    }
    starts = [
        launch.get(e.get("args", {}).get("correlation"), rk.ns(e["ts"]))
        for e in ev
        if e.get("cat") in rk.KERNEL
    ]
    return sum(lo <= t < hi for t in starts)


@pytest.mark.parametrize(
    ("args", "kw"),
    [
        ([], {}),
        (["--steps", "1010:1011"], {"steps": "1010:1011"}),
        (["--window", "all"], {"window": "all"}),
    ],
)
def test_the_api_answers_as_the_cli(tmp_path: Path, args: list[str], kw: dict[str, str]) -> None:
    from tbdtrace.cli import main

    path = fixture(CONTROL)
    out = tmp_path / "r.json"
    assert main(["report", str(path), "--format", "json", "-o", str(out), *args]) == 0
    cli = json.loads(out.read_text())
    a = tbdtrace.analyze(path, **kw)
    # The whole document, through the analysis's window and through report()'s own.
    assert json.loads(json.dumps(a.report())) == cli
    assert (
        json.loads(
            json.dumps(
                tbdtrace.analyze(path, window="all").report(**(kw or {"window": "measured"}))
            )
        )
        == cli
    )
    # The tables hold the figures the command printed.
    k = {r["name"]: (r["count"], r["total_ns"]) for r in a.kernels().to_pylist()}
    assert k == {r["name"]: (r["count"], r["total_ns"]) for r in cli["kernels"]}
    busy = [(r["device_id"], r["busy_ns"]) for r in a.summary().to_pylist()]
    assert busy == [(r["device_id"], r["busy_ns"]) for r in cli["devices"]]
    assert sum(b for _, b in busy) == cli["summary"]["gpu_busy_ns"]
    # And the kernel count of the window, from the raw file.
    first, last = (1010, 1011) if kw.get("steps") else (1009, 1014)
    assert sum(c for c, _ in k.values()) == _raw_kernels_in_steps(path, first, last)


def test_the_default_window_is_the_measured_steps_of_a_capture(tmp_path: Path) -> None:
    """The committed capture has 3 warm-up steps: the default leaves their kernels out, as
    the command does."""
    from tbdtrace.cli import main

    out = tmp_path / "r.json"
    assert main(["report", str(H200), "--format", "json", "-o", str(out)]) == 0
    cli = json.loads(out.read_text())
    a = tbdtrace.analyze(H200)
    assert a.ctx.window is not None and a.ctx.window.spec.kind == "measured"
    count = sum(a.kernels().column("count").to_pylist())
    assert count == sum(r["count"] for r in cli["kernels"])
    assert count < sum(tbdtrace.analyze(H200, window="all").kernels().column("count").to_pylist())
    assert [r["step"] for r in a.steps().to_pylist()] == list(range(20))
