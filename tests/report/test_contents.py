"""The report's sections: one explicit ordered list, every declared section in it once,
and the document and the text report in that order."""

from __future__ import annotations

import importlib
import io
import pkgutil
from pathlib import Path

import tbdtrace.report
from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.report import ReportOptions, Section, build
from tbdtrace.report.contents import SECTIONS
from tbdtrace.report.text import render
from tbdtrace.report.textui import Console
from tests.analysis.tiny import kernels, make


def _declared() -> dict[str, Section]:
    found = {}
    for m in pkgutil.iter_modules(tbdtrace.report.__path__):
        mod = importlib.import_module(f"tbdtrace.report.{m.name}")
        for name, v in vars(mod).items():
            if isinstance(v, Section) and name.isupper():
                found[f"{m.name}.{name}"] = v
    return found


def test_every_declared_section_is_listed_once() -> None:
    keys = [s.key for s in SECTIONS]
    assert len(keys) == len(set(keys))
    declared = _declared()
    assert sorted(s.key for s in declared.values()) == sorted(keys)
    for s in SECTIONS:
        assert callable(s.compute) and (s.render_text is None or callable(s.render_text))


def test_document_follows_the_list(tmp_path: Path) -> None:
    tr = make(tmp_path, {"kernels": kernels([(0, 2, "gemm_kernel"), (3, 9, "relu")])})
    doc = build(tr, ReportOptions(window=WindowSpec("all")))
    assert list(doc) == ["trace", "window", *(s.key for s in SECTIONS)]
    assert doc["window"]["sections"] == {
        s.key: "whole trace" for s in SECTIONS
    }  # the window is the whole trace here, so every section covers it
    buf = io.StringIO()
    render(doc, ReportOptions(), Console(file=buf, width=160))
    text = buf.getvalue()
    # The text shows the kernels table (kernels section) after the summary line.
    assert text.index("relu") > text.index("tbdtrace report")


def test_the_text_report_computes_only_the_sections_it_shows() -> None:
    """``tbdtrace report`` in text leaves out the sections without a text view (the series
    for plots) and prints what the whole document prints."""
    from tbdtrace.commands._open import begin_open
    from tbdtrace.report.documents import ReportDoc
    from tests.conftest import fixture
    from tests.inprocess import tbd

    src = fixture("kineto/hta/df_index_resolver.json.gz")  # memory events and steps
    tr = begin_open(str(src), False).trace()
    opts = ReportOptions(window=WindowSpec("measured"))
    full = build(tr, opts)
    shown = build(tr, opts, text_only=True)
    no_text = {s.key for s in SECTIONS if s.render_text is None}
    assert no_text and set(full) - set(shown) == no_text
    assert all(full[k] for k in no_text)  # they have data on this file, left out all the same

    def text(doc: dict[str, object]) -> str:
        buf = io.StringIO()
        ReportDoc(doc, opts).render_text(Console(file=buf, width=ReportDoc.text_width))
        return buf.getvalue()

    assert text(shown) == text(full)
    assert tbd("report", str(src)).stdout == text(full)
