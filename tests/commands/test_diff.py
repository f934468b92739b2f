"""``tbdtrace diff A B`` on the two ranks of a real fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tbdtrace import trace as trace_io
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
        out.append(trace_io.write(root / f.stem, tables, meta))
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


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two rank files as a folder (a rank set)."""
    root = tmp_path_factory.mktemp("pair")
    for f in (A, B):
        (root / f.name).symlink_to(f)
    return root


def _diff_json(capsys, *argv: str) -> dict:
    assert main(["diff", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_ranks_of_one_set(pair: Path, capsys) -> None:
    """--rank 0 --rank 1 on the folder: the raw JSON's kernel time of each rank, and the
    same document as the two files compared as whole traces."""
    doc = _diff_json(capsys, str(pair), "--rank", "0", "--rank", "1")
    h = doc["headline"]["kernel_time_ns"]
    ka, kb = rawkineto.expected_report(A), rawkineto.expected_report(B)
    assert (h["a"], h["b"]) == (ka["kernel_time_ns"], kb["kernel_time_ns"])
    assert doc["a"].endswith("[rank 0]") and doc["b"].endswith("[rank 1]")
    whole = _diff_json(capsys, str(A), str(B))
    for k in ("headline", "categories", "kernels"):
        assert doc[k] == whole[k], k


def test_one_rank_of_two_runs(pair: Path, dirs: tuple[Path, Path], capsys) -> None:
    doc = _diff_json(capsys, str(pair), str(dirs[1]), "--rank", "1")
    h = doc["headline"]["kernel_time_ns"]
    kb = rawkineto.expected_report(B)["kernel_time_ns"]
    assert (h["a"], h["b"], h["delta"]) == (kb, kb, 0)
    assert all(r["delta_ns"] == 0 for r in doc["kernels"])


def test_rank_options_checked(pair: Path, capsys) -> None:
    assert main(["diff", str(pair)]) == 2
    assert main(["diff", str(pair), "--rank", "0", "--rank", "7"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "no rank 7 in this trace (ranks: 0, 1)" in err[-1] and "Traceback" not in "".join(err)
