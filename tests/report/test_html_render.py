"""The HTML renderer on documents made for the test (no fixture needed): any section as
tables, plots that tolerate other shapes, escaping, and the page's sorter in Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tbdtrace.report import html
from tests.report.conftest import browse


def test_any_section_renders_and_known_plots_tolerate_other_shapes() -> None:
    doc: dict[str, Any] = {
        "trace": {"path": "x", "source": "test"},
        "steps": {"steps": "not a list of steps"},  # a shape the plot does not expect
        "new_section": {"total_ns": 5, "rows": [{"name": "a<b", "share": 0.25}]},
        "flops": [
            {"precision": "bf16", "efficiency_busy": 0.4, "coverage": 0.9},
            {"precision": "fp32", "efficiency_busy": None},  # no number: not drawn
        ],
    }
    figs, notes = html.figures(doc)
    assert [k for k, _ in figs] == ["flops"]
    assert [n.split(":")[0] for n in notes] == ["steps", "ranks"]
    assert "steps.steps is not a list of records" in notes[0]
    nothing = {"efficiency_busy": None, "efficiency_wall": None, "coverage_threshold": None}
    assert html.flops_rows(doc) == [
        {**nothing, "label": "bf16", "efficiency_busy": 0.4, "coverage": 0.9, "note": None},
        # no number: no bar, the plot names it ("no peak")
        {**nothing, "label": "fp32", "coverage": None, "note": None},
    ]
    page = html.render(doc)
    assert 'id="s-new_section"' in page and "new_section.rows" in page
    assert "a&lt;b" in page and "25.0%" in page and "5 ns" in page
    assert 'data-plot="flops"' in page and "not drawn" in page
    # The section's rows only (never its per-kernel rows), each with its own coverage
    # (never the section's threshold); dtype names the precision.
    sec = {
        "flops": {
            "coverage_threshold": 0.8,
            "kernels": [{"precision": "fp16", "efficiency": 0.9}],
            "rows": [
                {"dtype": "fp16", "efficiency_wall": 0.2, "coverage": 0.5, "flops_source": "c"}
            ],
        }
    }
    assert html.flops_rows(sec) == [
        {
            **nothing,
            "label": "fp16",
            "efficiency_wall": 0.2,
            "coverage": 0.5,
            "coverage_threshold": 0.8,
            "note": "c",
        }
    ]
    # Without a flops section, FP32 efficiency stands in.
    fp32 = {"fp32": [{"rank": None, "efficiency_busy": 0.125, "flops_source": "matmuls only"}]}
    assert html.flops_rows(fp32) == [
        {
            **nothing,
            "label": "fp32",
            "efficiency_busy": 0.125,
            "coverage": None,
            "note": "matmuls only",
        }
    ]


def test_names_are_text_not_markup() -> None:
    odd = "k<$x$>_</svg>&"
    rows = [{"name": odd, "total_ns": 5, "share": 1.0}]
    page = html.render({"kernels": rows, "hotspots": {"ops": [dict(rows[0], op=odd)]}})
    assert odd not in page  # escaped everywhere: in the tables and in the plots' SVG text
    assert page.count("k&lt;$x$&gt;_&lt;/svg&gt;&amp;") >= 2
    assert "k&lt;\\$x\\$&gt;" not in page


@pytest.mark.heavy
def test_tables_sort_in_the_browser(chromium: str, tmp_path: Path) -> None:
    """The page's sorter, clicked in Chromium: numbers by value (nulls first), text
    alphabetically, a second click reverses."""
    doc = {"t": [{"name": n, "total_ns": v} for n, v in (("b", 30), ("a", 1000), ("c", None))]}
    page = html.render(doc).replace(
        "</body>",
        "<script>var t=document.querySelector('table.sortable'),h=t.tHead.rows[0].cells;"
        "function col(i){return Array.prototype.map.call(t.tBodies[0].rows,"
        "function(r){return r.cells[i].textContent;}).join(',');}"
        "var out=[];h[1].click();out.push(col(0));h[1].click();out.push(col(0));"
        "h[0].click();out.push(col(0));"
        "document.body.setAttribute('data-sorted',out.join('|'));</script></body>",
    )
    path = tmp_path / "sort.html"
    path.write_text(page, encoding="utf-8")
    r = browse(chromium, path.as_uri(), "--dump-dom")
    assert 'data-sorted="c,b,a|a,b,c|a,b,c"' in r.stdout
