"""Report JSON of every Kineto fixture, for checking that a refactoring changes nothing.

Runs `tbdtrace report FILE --format json --window all` (`--window KIND` for another;
in a child process, with this checkout on PYTHONPATH) for every file under
../shared/fixtures/kineto (or $TBDTRACE_FIXTURES/kineto, or --fixtures DIR) and writes
one `<relative path>.json` per file into OUT (stdout, or `exit N` plus stderr when the
report fails), and `hostile-inputs.txt`: for every hostile-input case of
tests/robustness/cases_input.py, the exit code and stderr of `tbdtrace import` (the
case's temporary folder written as `TMP`).
`--compare A B` diffs two such folders and exits 1 on a difference.

    .venv/bin/python bench/report_snapshot.py out/snap-before
    ... change the code ...
    .venv/bin/python bench/report_snapshot.py out/snap-after
    .venv/bin/python bench/report_snapshot.py --compare out/snap-before out/snap-after
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = (
    Path(os.environ.get("TBDTRACE_FIXTURES") or ROOT.parent / "shared" / "fixtures") / "kineto"
)


def snapshot(fixtures: Path, out: Path, window: str = "all") -> int:
    files = sorted(p for p in fixtures.rglob("*.json.gz") if p.is_file())
    if not files:
        print(f"report_snapshot: no *.json.gz under {fixtures}", file=sys.stderr)
        return 1
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for f in files:
        rel = f.relative_to(fixtures)
        dest = out / (str(rel) + ".json")
        dest.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "tbdtrace", "report", str(f), "--format", "json"]
        cmd += ["--window", window]
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        text = r.stdout if r.returncode == 0 else f"exit {r.returncode}\n{r.stdout}{r.stderr}"
        dest.write_text(text)
        print(f"{rel}: exit {r.returncode}, {len(r.stdout)} characters")
    r = subprocess.run(
        [sys.executable, "-c", HOSTILE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if r.returncode:
        print(f"report_snapshot: the hostile-input run failed:\n{r.stderr}", file=sys.stderr)
        return 1
    (out / "hostile-inputs.txt").write_text(r.stdout)
    print(f"hostile inputs: {r.stdout.count(chr(10) + '== ') + 1} cases")
    return 0


# Runs in a child process: every hostile-input case through `tbdtrace import`.
HOSTILE = """
import contextlib, io, sys, tempfile
from pathlib import Path
from tbdtrace.cli import main
from tests.robustness.cases_input import CASES
for case in CASES:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / f"input{case.suffix}"
        src.write_bytes(case.content)
        args = ["import", str(src), "--out", str(Path(d) / "out")]
        args += ["--format", case.fmt] if case.fmt else []
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(args)
        print(f"== {case.name}: exit {rc}")
        print(err.getvalue().replace(d, "TMP").rstrip())
"""


def _same(x: Path, y: Path) -> bool:
    return x.is_file() and y.is_file() and filecmp.cmp(x, y, shallow=False)


def compare(a: Path, b: Path) -> int:
    names = sorted({p.relative_to(d) for d in (a, b) for p in d.rglob("*.json")})
    differ = [n for n in names if not _same(a / n, b / n)]
    for n in differ:
        print(f"differs: {n}")
    print(f"{len(names) - len(differ)} of {len(names)} report JSON files identical")
    hostile = Path("hostile-inputs.txt")
    if (a / hostile).is_file() or (b / hostile).is_file():
        if _same(a / hostile, b / hostile):
            print("hostile inputs: exit codes and messages identical")
        else:
            print(f"differs: {hostile} (diff {a / hostile} {b / hostile})")
            differ.append(hostile)
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", type=Path, help="folder for the JSON files")
    ap.add_argument("--fixtures", type=Path, default=FIXTURES)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    ap.add_argument("--window", default="all", help="the reports' --window (default: all)")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("give OUT or --compare A B")
    return snapshot(args.fixtures, args.out, args.window)


if __name__ == "__main__":
    sys.exit(main())
