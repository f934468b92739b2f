"""The report computes the sections that read the ops table first and then lets go of the
window's ops columns, and lets go of cache entries after their last section
(contents.OPS_READERS, RELEASE_AFTER): none of it may change the document. Checked on real
traces against the same report computed in report order with nothing let go of."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tbdtrace.analysis.engine import context, shared_arrays, window
from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.analysis.passes import summary
from tbdtrace.commands._open import open_or_import
from tbdtrace.report import ReportOptions, build, contents
from tbdtrace.report.contents import OPS_READERS, RELEASE_AFTER, SECTIONS
from tbdtrace.report.cpu_section import cpu_activity_section
from tests.conftest import fixture

# Traces with ops, markers, runtime calls and warm-up steps (a window that keeps rows by
# index), and one whose kernels are all launched from one process.
TRACES = [
    "kineto/hta/df_index_resolver.json.gz",
    "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz",
    "kineto/hta/step_based_trace_2543932.json.gz",
]


def _doc(path: Path, opts: ReportOptions) -> str:
    return json.dumps(build(open_or_import(str(path)), opts), default=str)


@pytest.mark.parametrize("kind", ["measured", "all"])
@pytest.mark.parametrize("name", TRACES)
def test_order_and_release_change_nothing(monkeypatch, name: str, kind: str) -> None:
    path = fixture(name)
    opts = ReportOptions(window=WindowSpec(kind))
    got = _doc(path, opts)
    # The same report in report order, nothing let go of between sections.
    monkeypatch.setattr(contents, "OPS_READERS", ())
    monkeypatch.setattr(contents, "RELEASE_AFTER", {})
    monkeypatch.setattr(context, "release_table", lambda *a, **k: None)
    plain = _doc(path, opts)
    assert got == plain
    assert list(json.loads(got)) == ["trace", "window", *(s.key for s in SECTIONS)]


def test_the_declared_keys_are_sections() -> None:
    keys = {s.key for s in SECTIONS}
    assert set(OPS_READERS) <= keys and len(set(OPS_READERS)) == len(OPS_READERS)
    assert set(RELEASE_AFTER) <= keys


def _view(name: str) -> Any:
    whole = context.of(open_or_import(str(fixture(name))))
    return whole.windowed(window.resolve(whole, WindowSpec("measured")))


def test_a_released_table_is_read_again_the_same() -> None:
    view = _view(TRACES[0])
    s = shared_arrays.ints(view, "ops", "start_ns").copy()
    codes, labels = shared_arrays.codes(view, "ops", "name")
    codes = codes.copy()
    assert view.holds("ops", "start_ns")
    context.release_table(view, "ops", ("op_flops.counts",))
    assert not view.holds("ops", "start_ns") and not view.holds("ops", "name")
    assert not view.cache.contains(shared_arrays.INTS, "ops", "start_ns", -1)
    # Read again from the file: the window's same rows.
    assert np.array_equal(shared_arrays.ints(view, "ops", "start_ns"), s)
    again, labels2 = shared_arrays.codes(view, "ops", "name")
    assert labels2 == labels and np.array_equal(again, codes)
    assert shared_arrays.ints(view, "kernels", "start_ns").size  # other tables untouched


@pytest.mark.parametrize("name", TRACES)
def test_device_activity_flag_is_the_summarys(name: str) -> None:
    # Two views of one figure: the cpu_activity section's flag, and whether the summary
    # has a row (computed on a second context, so the flag does not read the summary's).
    got = cpu_activity_section(_view(name), ReportOptions())["device_activity"]
    assert got == (summary.run(_view(name)).num_rows > 0)
