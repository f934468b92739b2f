"""``tbdtrace diff A B`` on the two ranks of a real fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.cli import main
from tbdtrace.importers import kineto
from tests import rawkineto
from tests.conftest import KINETO

A = KINETO / "hta" / "sampled_rank-0.json.gz"
B = KINETO / "hta" / "sampled_rank-1.json.gz"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("diff")
    out = []
    for f in (A, B):
        tables, meta = kineto.import_files([f])
        out.append(tbdtrace.trace.write(root / f.stem, tables, meta))
    return out[0], out[1]


def test_json_deltas_match_the_raw_json(dirs: tuple[Path, Path], capsys) -> None:
    assert main(["diff", str(dirs[0]), str(dirs[1]), "--format", "json", "--top", "5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ka = rawkineto.expected_report(A)
    kb = rawkineto.expected_report(B)
    h = doc["headline"]["kernel_time_ns"]
    assert (h["a"], h["b"], h["delta"]) == (
        ka["kernel_time_ns"],
        kb["kernel_time_ns"],
        kb["kernel_time_ns"] - ka["kernel_time_ns"],
    )
    assert len(doc["kernels"]) == 5
    for r in doc["kernels"]:
        ta = ka["kernels"].get(r["name"], {}).get("total_ns", 0)
        tb = kb["kernels"].get(r["name"], {}).get("total_ns", 0)
        assert r["delta_ns"] == tb - ta
    deltas = [abs(r["delta_ns"]) for r in doc["kernels"]]
    assert deltas == sorted(deltas, reverse=True)


def test_text(dirs: tuple[Path, Path], capsys) -> None:
    assert main(["diff", str(dirs[0]), str(dirs[1])]) == 0
    out = capsys.readouterr().out
    assert "Headline" in out and "Device time by category" in out and "communication" in out


def test_missing_b_is_one_line(dirs: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    assert main(["diff", str(dirs[0]), str(tmp_path / "nope")]) == 1
    assert capsys.readouterr().err.count("\n") == 1
