"""The analysis API declared once: every pass keeps the ``run(trace, config=None)``
contract and returns exactly its declared output (tbdtrace/passes/outputs.py), on a real
trace and on an empty one; docs/METRICS.md holds the tables generated from the
declarations."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pyarrow as pa
import pytest

import tbdtrace
import tbdtrace.analysis.passes
from tbdtrace.analysis import compare as diff
from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.passes import hotspots
from tbdtrace.importers import kineto
from tbdtrace.trace import Trace
from tests.analysis.tiny import make
from tests.conftest import fixture

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def real() -> Trace:
    path = fixture("kineto/hta/benchmark_result_493459_1694039959_trace.json.gz")
    tables, meta = kineto.import_files([path])
    return tbdtrace.trace.from_tables(tables, meta, path)


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return make(tmp_path_factory.mktemp("empty"), {})


def test_the_passes_package_holds_only_declared_passes() -> None:
    names = {m.name for m in pkgutil.iter_modules(tbdtrace.analysis.passes.__path__)}
    assert names == {o.name for o in outputs.PASSES}
    for name in names:
        assert callable(importlib.import_module(f"tbdtrace.analysis.passes.{name}").run)


@pytest.mark.parametrize("out", outputs.PASSES, ids=lambda o: o.name)
def test_run_contract_and_declared_schema(out: outputs.Output, real: Trace, empty: Trace) -> None:
    run = importlib.import_module(f"tbdtrace.analysis.passes.{out.name}").run
    params = list(inspect.signature(run).parameters.values())
    assert [p.name for p in params] == ["ctx", "config"]
    assert params[1].default is None
    for tr in (real, empty):
        got = run(tr, None)
        assert isinstance(got, pa.Table)
        assert got.schema.equals(out.arrow_schema()), (tr, got.schema)


def test_the_real_trace_gives_rows(real: Trace) -> None:
    # The schema checks above are on tables with rows for the passes this trace feeds.
    for name in ("summary", "kernels", "categories", "idle", "phases"):
        assert importlib.import_module(f"tbdtrace.analysis.passes.{name}").run(real).num_rows > 0


@pytest.mark.parametrize("tr_name", ["real", "empty"])
def test_hotspots_and_diff_tables(tr_name: str, request: pytest.FixtureRequest) -> None:
    tr = request.getfixturevalue(tr_name)
    kt, ot = hotspots.kernels_and_ops(tr, top=None)
    assert kt.schema.equals(outputs.HOTSPOTS_KERNEL.arrow_schema())
    assert ot.schema.equals(outputs.HOTSPOTS_OP.arrow_schema())
    assert diff.run(tr, tr).schema.equals(outputs.DIFF_KERNELS.arrow_schema())
    assert diff.by_category(tr, tr).schema.equals(outputs.DIFF_CATEGORIES.arrow_schema())
    assert diff.by_op(tr, tr).schema.equals(outputs.DIFF_OPS.arrow_schema())


def test_declarations_are_well_formed() -> None:
    names = [o.name for o in outputs.OUTPUTS]
    assert len(names) == len(set(names))
    for o in outputs.OUTPUTS:
        cols = o.column_names
        assert len(cols) == len(set(cols)), o.name
        for c in o.columns:
            assert c.doc and c.unit, (o.name, c.name)
            if c.name.endswith("_ns"):
                assert c.unit == "ns", (o.name, c.name)
            if c.name.endswith("_bytes"):
                assert c.unit == "bytes", (o.name, c.name)


def test_metrics_doc_holds_the_generated_tables() -> None:
    text = (ROOT / "docs" / "METRICS.md").read_text()
    assert outputs.update_metrics(text) == text, "run `make docs` and commit docs/METRICS.md"
    for o in outputs.OUTPUTS:
        assert f"### `{o.name}`" in text
