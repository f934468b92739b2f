"""``report DIR``'s read-ahead list (``READ_AHEAD`` in tbdtrace/commands/report.py) names
columns the default report reads: the list copies the sections' order of reads by hand,
so a section that stops reading a column leaves an entry that only costs decoding time.
Here the default report of three imported fixtures (one with shapes and FLOPs) is
built with every column decode recorded (``Trace._load``, and the columns decoded into
codes or int32 ids: ``Trace.label_codes``, ``Trace.narrow_ints``), and each listed
column must be among those decoded."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tbdtrace import schema
from tbdtrace import trace as trace_mod
from tbdtrace.commands.report import READ_AHEAD
from tbdtrace.report import ReportOptions, build
from tests.conftest import fixture
from tests.inprocess import tbd

FIXTURES = ("kineto/hta/df_index_resolver.json.gz", "kineto/hta/nccl_data.json.gz")
# The report reads the ops' shapes, types, concrete inputs and FLOPs only where a trace has
# them (an all-null column is not read: DECISIONS 264): a fixture recorded with shapes,
# its CPU ops given a "flops" argument as a profiler run with_flops=True writes one.
WITH_SHAPES = "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz"


def _with_flops(src: Path, out: Path) -> Path:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    for i, e in enumerate(ops):
        e.setdefault("args", {})["flops"] = 1000 * (i + 1)
    assert ops and any("Concrete Inputs" in e["args"] for e in ops)
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def _decoded(src: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, str]]:
    tbd("import", str(src), "-o", str(out))
    seen: set[tuple[str, str]] = set()
    load = trace_mod.Trace._load

    def recording(self: Any, decl: schema.Table, cols: list[str]) -> Any:
        seen.update((decl.name, c) for c in cols)
        return load(self, decl, cols)

    # A column decoded straight into codes or int32 ids is read too (a row group at a
    # time, not kept; DECISIONS 267-268).
    label_codes, narrow_ints = trace_mod.Trace.label_codes, trace_mod.Trace.narrow_ints

    def codes(self: Any, name: str, column: str) -> Any:
        got = label_codes(self, name, column)
        if got is not None:
            seen.add((name, column))
        return got

    def ints(self: Any, name: str, column: str) -> Any:
        got = narrow_ints(self, name, column)
        if got is not None:
            seen.add((name, column))
        return got

    with monkeypatch.context() as m:
        m.setattr(trace_mod.Trace, "_load", recording)
        m.setattr(trace_mod.Trace, "label_codes", codes)
        m.setattr(trace_mod.Trace, "narrow_ints", ints)
        build(trace_mod.open(out), ReportOptions())
    return seen


def test_every_column_read_ahead_is_one_the_report_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: set[tuple[str, str]] = set()
    for i, name in enumerate(FIXTURES):
        decoded |= _decoded(fixture(name), tmp_path / f"t{i}", monkeypatch)
    shaped = _with_flops(fixture(WITH_SHAPES), tmp_path / "shapes.json.gz")
    decoded |= _decoded(shaped, tmp_path / "t-shapes", monkeypatch)
    listed = [(t, c) for t, cols in READ_AHEAD for c in cols]
    for t, c in listed:
        schema.table(t).column(c)  # a declared column (raises for a name the schema lacks)
    assert len(set(listed)) == len(listed), "a column listed twice"
    stale = sorted(set(listed) - decoded)
    assert not stale, f"READ_AHEAD lists columns the default report no longer reads: {stale}"
    # the list covers the report's big reads: the kernels', API calls' and ops' times
    for key in [("kernels", "start_ns"), ("runtime", "start_ns"), ("ops", "start_ns")]:
        assert key in decoded and key in listed
