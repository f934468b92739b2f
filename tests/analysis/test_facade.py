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
    assert a.hotspots(top=1).column("name").to_pylist() == ["b"]


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
    assert tbdtrace.analyze(tr).kernels().column("count").to_pylist() == [3]
    whole = tbdtrace.analyze(tr, window="all").ctx
    assert whole.window is None and whole.trace is tr


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
