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


# (name, argv) per output case; {S} a small single-rank fixture, {R0} {R1} two ranks of
# one job, {O} a path in the case's temporary folder (what is written there is kept).
_SQL = (
    "SELECT name, count(*) AS n, sum(end_ns - start_ns) AS t FROM kernels "
    "GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT 12"
)
OUTPUT_CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("report-text", ("report", "{S}")),
    ("report-text-file", ("report", "{S}", "-o", "{O}/r.txt")),
    ("report-json-file", ("report", "{S}", "--format", "json", "-o", "{O}/r.json")),
    ("report-csv-dir", ("report", "{S}", "--format", "csv", "-o", "{O}/csv")),
    ("report-csv-section", ("report", "{S}", "--format", "csv", "--section", "kernels")),
    ("report-json-section", ("report", "{S}", "--format", "json", "--section", "kernels")),
    ("report-html", ("report", "{S}", "--format", "html", "-o", "{O}/r.html")),
    ("report-ranks-text", ("report", "{R0}", "{R1}")),
    ("report-rank-by-rank-text", ("report", "{R0}", "{R1}", "--jobs", "1")),
    ("report-rank-by-rank-json", ("report", "{R0}", "{R1}", "--jobs", "1", "--format", "json")),
    (
        "report-rank-by-rank-csv",
        ("report", "{R0}", "{R1}", "--jobs", "1", "--format", "csv", "-o", "{O}/csv"),
    ),
    ("hotspots-text", ("hotspots", "{S}")),
    ("hotspots-op-text", ("hotspots", "{S}", "--by", "op")),
    ("hotspots-category-text", ("hotspots", "{S}", "--by", "category")),
    ("hotspots-json", ("hotspots", "{S}", "--format", "json")),
    ("hotspots-csv", ("hotspots", "{S}", "--format", "csv")),
    ("diff-text", ("diff", "{R0}", "{R1}")),
    ("diff-json", ("diff", "{R0}", "{R1}", "--format", "json")),
    ("diff-json-file", ("diff", "{R0}", "{R1}", "--format", "json", "-o", "{O}/d.json")),
    ("diff-json-section", ("diff", "{R0}", "{R1}", "--format", "json", "--section", "kernels")),
    ("diff-csv-dir", ("diff", "{R0}", "{R1}", "--format", "csv", "-o", "{O}/csv")),
    ("diff-csv-section", ("diff", "{R0}", "{R1}", "--format", "csv", "--section", "kernels")),
    ("sql-text", ("sql", "{S}", _SQL)),
    ("sql-json", ("sql", "{S}", _SQL, "--format", "json")),
    ("sql-csv", ("sql", "{S}", _SQL, "--format", "csv")),
    ("sql-out-csv", ("sql", "{S}", _SQL, "--output", "{O}/q.csv")),
    ("sql-out-json", ("sql", "{S}", _SQL, "--output", "{O}/q.json")),
    ("sql-out-parquet", ("sql", "{S}", _SQL, "--output", "{O}/q.parquet")),
    ("info-text", ("info", "{S}")),
    ("info-json", ("info", "{S}", "--format", "json")),
    ("export-chrome", ("export", "{S}", "--format", "chrome", "-o", "{O}/t.json")),
    ("export-perfetto", ("export", "{S}", "--format", "perfetto", "-o", "{O}/t.pftrace")),
)
OUTPUT_FIXTURES = {
    "S": "hta/step_based_trace_2543932.json.gz",
    "R0": "hta/sampled_rank-0.json.gz",
    "R1": "hta/sampled_rank-1.json.gz",
}


def snapshot_outputs(fixtures: Path, out: Path) -> int:
    """Every OUTPUT_CASES command's stdout, stderr and written files under out/outputs."""
    import tempfile

    # SOURCE_DATE_EPOCH: matplotlib's SVG metadata date, else the time of the run
    env = dict(os.environ, PYTHONPATH=str(ROOT), SOURCE_DATE_EPOCH="0")
    subs = {k: str(fixtures / v) for k, v in OUTPUT_FIXTURES.items()}
    bad = 0
    for name, argv in OUTPUT_CASES:
        dest = out / "outputs" / name
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            o = Path(tmp) / "o"
            o.mkdir()
            cmd = [a.format(O=o, **subs) for a in argv]
            r = subprocess.run(
                [sys.executable, "-m", "tbdtrace", *cmd], cwd=ROOT, env=env, capture_output=True
            )
            (dest / "stdout").write_bytes(r.stdout.replace(str(o).encode(), b"TMP"))
            err = r.stderr.replace(str(o).encode(), b"TMP")
            (dest / "stderr").write_bytes(f"exit {r.returncode}\n".encode() + err)
            for f in sorted(o.rglob("*")):
                if f.is_file():
                    target = dest / "files" / f.relative_to(o)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(f.read_bytes())
        bad += r.returncode != 0
        print(f"{name}: exit {r.returncode}, {len(r.stdout)} bytes")
    return 1 if bad else 0


def _same(x: Path, y: Path) -> bool:
    return x.is_file() and y.is_file() and filecmp.cmp(x, y, shallow=False)


def compare(a: Path, b: Path) -> int:
    names = sorted(
        {
            p.relative_to(d)
            for d in (a, b)
            for p in d.rglob("*.json")
            if p.relative_to(d).parts[0] != "outputs"
        }
    )
    differ = [n for n in names if not _same(a / n, b / n)]
    for n in differ:
        print(f"differs: {n}")
    print(f"{len(names) - len(differ)} of {len(names)} report JSON files identical")
    outs = sorted(
        {p.relative_to(d) for d in (a, b) for p in (d / "outputs").rglob("*") if p.is_file()}
    )
    if outs:
        odiff = [n for n in outs if not _same(a / n, b / n)]
        for n in odiff:
            print(f"differs: {n}")
        print(f"{len(outs) - len(odiff)} of {len(outs)} command output files identical")
        differ += odiff
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
    ap.add_argument(
        "--outputs", action="store_true", help="also every command's output in every format"
    )
    ap.add_argument("--only-outputs", action="store_true", help="only the --outputs cases")
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("give OUT or --compare A B")
    rc = 0 if args.only_outputs else snapshot(args.fixtures, args.out, args.window)
    if args.outputs or args.only_outputs:
        rc = max(rc, snapshot_outputs(args.fixtures, args.out))
    return rc


if __name__ == "__main__":
    sys.exit(main())
