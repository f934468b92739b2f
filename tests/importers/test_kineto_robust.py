"""Kineto import on damaged and big real files (cases from HTA's issue tracker).

Each damaged file is derived from a real fixture; expected values come from the raw JSON
read by tests.rawkineto (which shares no code with the importer) or from the undamaged
file's import.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.errors import TraceError
from tbdtrace.importers import kineto
from tests.conftest import KINETO
from tests.rawkineto import expected_report, load

HTA = KINETO / "hta"
SMALL = HTA / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
RANKS = [HTA / "sampled_rank-0.json.gz", HTA / "sampled_rank-1.json.gz"]
KERNEL_CATS = {"kernel", "Kernel"}


def _raw(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(gzip.decompress(path.read_bytes()))


def _write(tmp: Path, name: str, doc: dict) -> Path:  # type: ignore[type-arg]
    p = tmp / name
    p.write_text(json.dumps(doc))
    return p


def _first(doc: dict, cats: set[str]) -> int:  # type: ignore[type-arg]
    return next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") in cats)


def test_int64_overflow_in_args_becomes_null(tmp_path: Path) -> None:
    doc = _raw(RANKS[0])
    k = _first(doc, KERNEL_CATS)
    doc["traceEvents"][k]["args"]["External id"] = 2**64 + 5
    doc["traceEvents"][k]["args"]["correlation"] = -(2**63) - 1
    doc["traceEvents"][k]["args"]["registers per thread"] = 2**80
    tables, _ = kineto.import_files([_write(tmp_path, "ovf.json", doc)])
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", tables, {"source": "kineto"}))
    kern = tr.table("kernels").to_pylist()
    assert len(kern) == expected_report(RANKS[0])["kernel_count"]
    bad = [r for r in kern if r["external_id"] is None]
    assert len(bad) == 1 and bad[0]["correlation_id"] is None
    assert bad[0]["name"] == doc["traceEvents"][k]["name"]


def test_invalid_utf8_becomes_replacement_char(tmp_path: Path) -> None:
    text = gzip.decompress(RANKS[0].read_bytes())
    name = next(
        e["name"] for e in json.loads(text)["traceEvents"] if e.get("cat") in KERNEL_CATS
    ).encode()
    damaged = text.replace(b'"' + name + b'"', b'"' + name[:5] + b"\xff\xfe" + name[5:] + b'"')
    assert damaged != text
    p = tmp_path / "utf8.json"
    p.write_bytes(damaged)
    tables, _ = kineto.import_files([p])
    names = set(tables["kernels"]["name"].to_pylist())
    assert name[:5].decode() + "\ufffd\ufffd" + name[5:].decode() in names
    assert len(tables["kernels"]["name"]) == expected_report(RANKS[0])["kernel_count"]


def test_unescaped_quotes_in_names_are_repaired(tmp_path: Path) -> None:
    doc = _raw(RANKS[0])
    k = _first(doc, KERNEL_CATS)
    o = _first(doc, {"cpu_op"})
    doc["traceEvents"][k]["name"] = 'void f<"x">(int)'
    doc["traceEvents"][o]["name"] = 'aten::op "quoted" end'
    good = _write(tmp_path, "good.json", doc)
    # What old Kineto wrote: the inner quotes unescaped.
    text = good.read_text().replace('\\"', '"')
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    want, _ = kineto.import_files([good])
    got, _ = kineto.import_files([bad])
    assert got["kernels"] == want["kernels"] and got["ops"] == want["ops"]
    assert 'void f<"x">(int)' in got["kernels"]["name"].to_pylist()


def test_quote_repair_does_not_hide_real_damage(tmp_path: Path) -> None:
    p = tmp_path / "cut.json"
    p.write_text(gzip.decompress(SMALL.read_bytes()).decode()[:5000])
    with pytest.raises(TraceError, match="truncated JSON"):
        kineto.import_files([p])


def test_repaired_file_still_damaged_reports_the_files_own_error(tmp_path: Path) -> None:
    # Unescaped quotes and a cut: the repair is tried, and the line says where the file
    # as written went wrong (line and column counted in the file, not the repair).
    doc = _raw(SMALL)
    doc["traceEvents"][_first(doc, {"cpu_op"})]["name"] = 'a "q" b'
    text = json.dumps(doc, indent=1).replace('\\"', '"')
    p = tmp_path / "both.json"
    p.write_text(text[: len(text) - 200])
    with pytest.raises(TraceError) as e:
        kineto.import_files([p])
    msg = str(e.value)
    assert msg.startswith(f"{p}: invalid JSON at line ") and "re-export" in msg
    line, column = (int(x) for x in msg.split(" at line ")[1].split(" (")[0].split(" column "))
    bad = text.splitlines()[line - 1]
    assert 'a "q" b' in bad and bad[column - 1] == "q"


def test_missing_distributed_info(tmp_path: Path) -> None:
    doc = _raw(RANKS[1])
    del doc["distributedInfo"]
    tables, meta = kineto.import_files([_write(tmp_path, "nodist.json", doc)])
    # An all-null column is left out of the mapping (written as nulls).
    assert "rank" not in tables["kernels"] and meta["ranks"] == []
    assert len(tables["kernels"]["name"]) == expected_report(RANKS[1])["kernel_count"]


def test_one_file_per_rank_becomes_one_trace(tmp_path: Path) -> None:
    tables, meta = kineto.import_files(RANKS)
    tr = tbdtrace.open(tbdtrace.write(tmp_path / "t", tables, meta))
    assert meta["ranks"] == [0, 1]
    k = tr.table("kernels").to_pandas()
    for rank, src in enumerate(RANKS):
        exp = expected_report(src)
        sub = k[k["rank"] == rank]
        assert len(sub) == exp["kernel_count"]
        assert int((sub.end_ns - sub.start_ns).sum()) == exp["kernel_time_ns"]
        raw_rank = load(src)["distributedInfo"]["rank"]
        assert raw_rank == rank
