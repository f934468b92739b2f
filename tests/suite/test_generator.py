"""bench/gen_kineto.py and bench/gen_native.py: synthetic traces keep the fixture's rules.

Checked from the raw output (plain json / Arrow reads), against the fixture's own events.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import gen_kineto  # noqa: E402

from tests.conftest import KINETO  # noqa: E402

FIXTURE = KINETO / "hta" / "benchmark_result_493459_1694039959_trace.json.gz"


def _ns(v: object) -> int:
    return int(Decimal(str(v)) * 1000)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict], int]:
    out = tmp_path_factory.mktemp("gen") / "syn.json.gz"
    n = 3000
    assert gen_kineto.main([str(FIXTURE), "--kernels", str(n), "--out", str(out)]) == 0
    syn = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    fx = json.loads(gzip.decompress(FIXTURE.read_bytes()))["traceEvents"]
    return syn, fx, n


def test_kernel_count_and_fixture_kernels(generated: tuple[list[dict], list[dict], int]) -> None:
    syn, fx, n = generated
    ks = [e for e in syn if e.get("cat") == "kernel"]
    assert len(ks) == n
    fx_pairs = {(e["name"], _ns(e["dur"])) for e in fx if e.get("cat") == "kernel"}
    assert all((k["name"], _ns(k["dur"])) in fx_pairs for k in ks)


def test_streams_do_not_overlap_and_launches_precede(
    generated: tuple[list[dict], list[dict], int],
) -> None:
    syn, _, _ = generated
    ks = [e for e in syn if e.get("cat") == "kernel"]
    by_stream: dict[int, list[tuple[int, int]]] = {}
    for k in ks:
        by_stream.setdefault(k["args"]["stream"], []).append((_ns(k["ts"]), _ns(k["dur"])))
    for rows in by_stream.values():
        rows.sort()
        assert all(a[0] + a[1] <= b[0] for a, b in zip(rows, rows[1:], strict=False))
    launch = {e["args"]["correlation"]: e for e in syn if e.get("cat") == "cuda_runtime"}
    flows = Counter((e["ph"], e["id"]) for e in syn if e.get("cat") == "ac2g")
    for k in ks:
        c = k["args"]["correlation"]
        r = launch[c]
        assert _ns(r["ts"]) + _ns(r["dur"]) <= _ns(k["ts"])
        assert flows[("s", c)] == 1 and flows[("f", c)] == 1


def test_other_kinds_keep_fixture_ratios(generated: tuple[list[dict], list[dict], int]) -> None:
    syn, fx, n = generated
    n_fx = sum(1 for e in fx if e.get("cat") == "kernel")
    for cat in ("cpu_op", "gpu_memcpy", "gpu_memset", "user_annotation"):
        want = round(sum(1 for e in fx if e.get("ph") == "X" and e.get("cat") == cat) / n_fx * n)
        assert sum(1 for e in syn if e.get("cat") == cat) == want, cat


def test_importer_reads_generated_trace(tmp_path: Path) -> None:
    from tbdtrace.importers import kineto

    out = tmp_path / "s.json"
    gen_kineto.main([str(FIXTURE), "--kernels", "500", "--out", str(out)])
    tables, _ = kineto.import_files([out])
    assert len(tables["kernels"]["start_ns"]) == 500
    assert len(tables["runtime"]["start_ns"]) == 500


def test_missing_fixture_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = gen_kineto.main([str(tmp_path / "nope.json.gz"), "--kernels", "1", "--out", "x.json"])
    assert rc == 1
    assert "no such file" in capsys.readouterr().err
