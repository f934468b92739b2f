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
from tests.analysis.tiny import US, make
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


@pytest.mark.parametrize("table", ["kernels", "memcpy", "memset"])
@pytest.mark.parametrize("name", TRACES)
def test_window_matches_taken_from_the_whole_trace(monkeypatch, name: str, table: str) -> None:
    # A window that keeps kernels by index takes its runtime matches from the whole
    # trace's where it may; the same as joining the window's own ids.
    got = shared_arrays.runtime_match(_view(name), table)
    monkeypatch.setattr(shared_arrays, "_picked_matches", lambda *a: None)
    monkeypatch.setattr(shared_arrays, "_carried_matches", lambda *a: None)
    joined = shared_arrays.runtime_match(_view(name), table)
    assert got.dtype == joined.dtype and np.array_equal(got, joined)


# (start_us, end_us, correlation id, launch_us or None): a kernel launched before the
# trace began (id 3, below every launch) among launched ones, so a measured window keeps
# the kernels by index, not as one run; the runtime call of id 9 falls before step 1, so
# the window's runtime rows are a run that does not start at the first.
ROWS = [
    (105, 140, 10, 101),
    (120, 130, 3, None),
    (160, 170, 11, 150),
    (220, 230, 12, 210),
    (260, 265, 13, 250),
]


def test_window_matches_of_kernels_kept_by_index(tmp_path: Path) -> None:
    launches = [(9, 50)] + [(c, t) for *_, c, t in ROWS if t is not None]
    tables = {
        "kernels": {
            "start_ns": [s * US for s, *_ in ROWS],
            "end_ns": [e * US for _, e, *_ in ROWS],
            "name": ["k"] * len(ROWS),
            "correlation_id": [c for *_, c, _ in ROWS],
            "device_id": [0] * len(ROWS),
            "device_type": ["cuda"] * len(ROWS),
        },
        "runtime": {
            "start_ns": [t * US for _, t in launches],
            "end_ns": [t * US + 3 * US for _, t in launches],
            "name": ["cudaLaunchKernel"] * len(launches),
            "correlation_id": [c for c, _ in launches],
            "pid": [1] * len(launches),
            "tid": [1] * len(launches),
        },
        "steps": {
            "step": [1, 2],
            "start_ns": [100 * US, 200 * US],
            "end_ns": [200 * US, 300 * US],
            "warmup": [False, False],
        },
    }
    whole = context.of(make(tmp_path, tables))
    view = whole.windowed(window.resolve(whole, WindowSpec("measured")))
    assert view.row_run("kernels") is None and view.row_run("runtime") == (1, 5)
    shared_arrays.runtime_match(whole, "kernels")
    picked = shared_arrays._picked_matches(view, "kernels")
    # The window's kernels (the pre-trace one left out) and their calls' rows among the
    # window's runtime rows (the call of id 9 cut): written out from the rows above.
    assert view.kept_rows("kernels").tolist() == [0, 2, 3, 4]
    assert picked is not None and picked.tolist() == [0, 1, 2, 3]
    assert shared_arrays.runtime_match(view, "kernels").tolist() == [0, 1, 2, 3]
