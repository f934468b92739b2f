"""`import` and `report FILE` of a big Kineto file against decompressing it alone.

``.venv/bin/python bench/stream_import.py FILE.json.gz [--code DIR ...] [--limit-gib 12]``

One run of each, in this order, each in its own child process (``bench/measure.py``: wall
time, CPU time and peak RSS from ``os.wait4``): the floor (``bench/floor.py --bare``:
inflate the file with isal and scan every byte, the physical floor of reading it), then
per checkout of tbdtrace (``--code``, default this one) ``tbdtrace import FILE -o DIR``
and ``tbdtrace report FILE --format json``. Prints each command's ratio to the floor's wall
time and its peak RSS (the largest process's; for a command that runs part of its work in a
child process, as ``report FILE`` does for a big file's import, also each process's own
peak and the most they held at once, bench/measure.py), and whether the reports of the
checkouts are identical. A command past ``--limit-gib`` of RSS (its processes together)
is killed (a checkout that holds the whole file in memory may not fit the machine beside
others' jobs). Generate the file with ``bench/gen_kineto.py``
(the 10M-kernel file is ~1.5 GiB: under /tmp, never in the repository).

Goals (issue 35): peak RSS at most 2 GiB for both commands; wall time at most 2.5x the
floor on the 10M-kernel file, and ``report FILE`` within 1.5x of it on the 1M-kernel file.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Run, measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _in(code: Path, cmd: list[str]) -> list[str]:
    """``cmd`` run with ``code`` first on the path (its tbdtrace package)."""
    boot = f"import sys; sys.path.insert(0, {str(code)!r}); import runpy; "
    boot += (
        "sys.argv = ['tbdtrace', *sys.argv[1:]]; runpy.run_module('tbdtrace', run_name='__main__')"
    )
    return [PY, "-c", boot, *cmd]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--code", type=Path, action="append", default=[])
    ap.add_argument("--limit-gib", type=float, default=12.0)
    ap.add_argument("--work", type=Path, default=None, help="where traces and reports go")
    a = ap.parse_args(argv)
    if not a.file.is_file():
        print(f"{a.file}: no such file", file=sys.stderr)
        return 1
    codes = [c.resolve() for c in a.code] or [ROOT]
    limit = int(a.limit_gib * 2**30)
    work = Path(tempfile.mkdtemp(prefix="stream-bench-", dir=a.work))
    load = os.getloadavg()[0]
    runs: list[tuple[str, Run]] = []
    floor = measure(
        "floor (isal inflate + scan)", [PY, str(ROOT / "bench" / "floor.py"), str(a.file), "--bare"]
    )
    runs.append(("floor", floor))
    reports = {}
    try:
        for i, code in enumerate(codes):
            out = work / f"trace{i}"
            r = measure(
                f"{code.name}: import", _in(code, ["import", str(a.file), "-o", str(out)]), limit
            )
            runs.append((f"{code}: import", r))
            shutil.rmtree(out, ignore_errors=True)
            rep = work / f"report{i}.json"
            cmd = _in(code, ["report", str(a.file), "--format", "json"])
            with rep.open("wb") as f:
                r = _measure_to(f"{code.name}: report FILE", cmd, limit, f)
            runs.append((f"{code}: report FILE", r))
            if not r.killed_at_limit:
                reports[code] = rep
        print(
            f"{a.file} ({a.file.stat().st_size / 2**30:.2f} GiB), load average {load:.1f} before, "
            f"{os.getloadavg()[0]:.1f} after"
        )
        # peak: the largest process's (wait4); own and child: each process's own peak,
        # at once: the most the command's processes held together (both sampled, 50 ms)
        print(
            f"{'command':<48} {'wall s':>7} {'CPU s':>7} {'x floor':>7} {'peak GiB':>8} "
            f"{'own':>6} {'child':>6} {'at once':>7}"
        )
        for label, r in runs:
            killed = f"  (killed past {a.limit_gib:g} GiB)" if r.killed_at_limit else ""
            print(
                f"{label[-48:]:<48} {r.wall_s:7.1f} {r.cpu_s:7.1f} {r.wall_s / floor.wall_s:7.2f} "
                f"{r.peak_rss_bytes / 2**30:8.2f} {r.own_peak_rss_bytes / 2**30:6.2f} "
                f"{r.children_peak_rss_bytes / 2**30:6.2f} {r.sum_peak_rss_bytes / 2**30:7.2f}"
                f"{killed}"
            )
        if len(reports) > 1:
            first = next(iter(reports.values()))
            same = all(filecmp.cmp(first, p, shallow=False) for p in reports.values())
            print(f"reports identical across checkouts: {same}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _measure_to(label: str, cmd: list[str], limit: int, out: object) -> Run:
    """:func:`measure` with stdout to ``out`` (the report's JSON)."""
    import subprocess

    real = subprocess.Popen

    def popen(*args: object, **kw: object) -> object:
        kw["stdout"] = out
        return real(*args, **kw)  # type: ignore[arg-type]

    subprocess.Popen = popen  # type: ignore[assignment,misc]
    try:
        return measure(label, cmd, limit)
    finally:
        subprocess.Popen = real  # type: ignore[misc]


if __name__ == "__main__":
    sys.exit(main())
