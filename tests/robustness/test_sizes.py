"""Hostile sizes (tests/robustness/cases_sizes.py) under a 4 GiB address-space limit.

Each case's file (a few MB of gzip holding gigabytes) goes through ``tbdtrace import`` and
``tbdtrace report FILE``, each in its own process whose address space is limited to 4 GiB
(``RLIMIT_AS``: memory that would grow with the file fails there as it would on a small
machine). Each ends as its case says: exit 0 (and, for import, the rows), or exit 1 with
one line that names the file and holds the case's words; never a traceback. A report that
may run out of memory (exit code -1 in the table) must either succeed or say so in that
one line, with the file's size. Slow (gigabytes of content each): `make robustness`.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.robustness.cases_sizes import CASES, SizeCase

ROOT = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 4 << 30

# Gigabytes of content per case: the robustness tier, never the quick one.
pytestmark = [pytest.mark.robustness, pytest.mark.heavy]


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("sizes")
    return {c.name: c.write(d / f"case{i}.json.gz") for i, c in enumerate(CASES)}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tbdtrace", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=_limit,
        timeout=1200,
    )


RUNS = [(c, cmd) for c in CASES for cmd in c.expect]


@pytest.mark.parametrize(("case", "command"), RUNS, ids=[f"{c.name}: {m}" for c, m in RUNS])
def test_size_case(case: SizeCase, command: str, files: dict[str, Path], tmp_path: Path) -> None:
    src = files[case.name]
    assert src.stat().st_size < 200 << 20 and case.content_bytes > 1 << 30
    out = tmp_path / "out"
    args = ["import", str(src), "-o", str(out)] if command == "import" else ["report", str(src)]
    args += ["--format", case.fmt] if case.fmt else []  # import only (see the table)
    r = _run(args, tmp_path)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    want, words = case.expect[command]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    if want == -1 and r.returncode == 0:  # the report fit after all
        return
    if want in (1, -1):
        assert r.returncode == 1, r.stderr[-3000:]
        assert len(lines) == 1, lines
        assert str(src) in lines[0] and all(w in lines[0] for w in words), lines[0]
        assert not out.exists()
        return
    assert r.returncode == 0, r.stderr[-3000:]
    if command == "import":
        meta = json.loads((out / "meta.json").read_text())
        assert meta["source"] == "kineto"
        import tbdtrace

        tr = tbdtrace.open(out)
        for table, n in case.rows.items():
            assert tr.num_rows(table) == n
        if case.name == "25 million events":
            assert tr.num_rows("kernels") == 1 + case.units >= 25_000_000
