"""Progress on a terminal (tbdtrace/progress.py), run under a real pseudo-terminal.

Each command runs in its own process with stderr on a pty (what a user's terminal is) or
on a pipe; the progress facility's size rule is lowered in that process (``BIG_BYTES``
and ``BIG_ROWS`` set to 0, so a fixture counts as long work). Checked: the lines each
command shows (what, how far, of what total), that they are transient (stdout and the
command's own stderr lines are unchanged), and that nothing is shown when stderr is a
pipe or with ``--quiet``.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.conftest import fixture

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = "kineto/hta/df_index_resolver.json.gz"
# The CLI with every input counting as big (the rule itself is tested below).
RUN = (
    "import sys; import tbdtrace.progress as p; p.BIG_BYTES = 0; p.BIG_ROWS = 0; "
    "from tbdtrace import cli; sys.argv = ['tbdtrace', *sys.argv[1:]]; cli.run()"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_pty(args: list[str], timeout: float = 600) -> tuple[int, str, str]:
    """Run ``tbdtrace ARGS`` with stderr on a pseudo-terminal; (exit code, stdout, what
    the terminal received, escape sequences removed and carriage returns as newlines)."""
    master, slave = pty.openpty()
    stdout = tempfile.TemporaryFile()  # noqa: SIM115 - closed below; a pipe could fill
    p = subprocess.Popen(
        [sys.executable, "-c", RUN, *args],
        cwd=ROOT,
        stdout=stdout,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    got = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if master in ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the child closed its end
                chunk = b""
            if not chunk:
                break
            got += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    rc = p.wait(timeout)
    stdout.seek(0)
    out = stdout.read().decode()
    stdout.close()
    text = ANSI.sub("", got.decode(errors="replace")).replace("\r", "\n")
    return rc, out, text


def piped(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_import_shows_bytes_read_and_rows_written(tmp_path: Path) -> None:
    src = fixture(FIXTURE)
    rc, _, term = on_pty(["import", str(src), "-o", str(tmp_path / "t")])
    assert rc == 0, term[-2000:]
    size_mb = f"{src.stat().st_size / 1e6:,.0f} MB"
    assert re.search(rf"reading {src.name} .*/ {re.escape(size_mb)}", term), term[-3000:]
    _rows_written_of_the_total(term)


def _rows_written_of_the_total(term: str) -> list[tuple[str, str]]:
    """The "writing the trace" line's (done, total) pairs; the total is the rows the
    import reports writing (its own line, unchanged)."""
    rows = re.findall(r"writing the trace .*?([\d,]+) / ([\d,]+) ?\n? *rows", term)
    assert rows, term[-3000:]
    wrote = re.search(r"wrote .*\((.*)\)", term)
    assert wrote is not None
    counts = [int(x.split()[0]) for x in wrote.group(1).split(", ") if "devices" not in x]
    assert {int(t.replace(",", "")) for _, t in rows} == {sum(counts)}
    return rows


def test_the_streamed_import_shows_its_files_and_rows(tmp_path: Path) -> None:
    """Two files go through the streaming import (a spool, row group by row group): the
    line names both files and their bytes, then the rows written of the import's total."""
    a = fixture("kineto/hta/sampled_rank-0.json.gz")
    b = fixture("kineto/hta/sampled_rank-1.json.gz")
    rc, _, term = on_pty(["import", str(a), str(b), "-o", str(tmp_path / "t")])
    assert rc == 0, term[-2000:]
    size_mb = f"{(a.stat().st_size + b.stat().st_size) / 1e6:,.0f} MB"
    assert re.search(rf"reading 2 files .*/ {re.escape(size_mb)}", term), term[-3000:]
    rows = _rows_written_of_the_total(term)
    assert all(int(d.replace(",", "")) <= int(t.replace(",", "")) for d, t in rows)


def test_report_shows_the_section_and_leaves_stdout_alone(tmp_path: Path) -> None:
    src = fixture(FIXTURE)
    rc, out, term = on_pty(["report", str(src), "--format", "json"])
    assert rc == 0, term[-2000:]
    from tbdtrace.report.contents import SECTIONS

    # the frame drawn shows one section's name, of all the report's sections
    shown = re.findall(r"analysing: (\w+)", term)
    assert shown and set(shown) <= {s.key for s in SECTIONS}, term[-2000:]
    assert f"/ {len(SECTIONS)} sections" in term
    assert out == piped(["report", str(src), "--format", "json"]).stdout


def test_nothing_when_piped_or_quiet(tmp_path: Path) -> None:
    src = fixture(FIXTURE)
    r = piped(["import", str(src), "-o", str(tmp_path / "a")])
    assert r.returncode == 0
    assert r.stderr.splitlines() == [ln for ln in r.stderr.splitlines() if ln.startswith("wrote")]
    rc, _, term = on_pty(["import", "-q", str(src), "-o", str(tmp_path / "b")])
    assert rc == 0
    lines = [ln for ln in term.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("wrote"), lines
    rc, _, term = on_pty(["report", str(src), "--quiet"])
    assert rc == 0 and "analysing" not in term and "reading" not in term


@pytest.mark.heavy  # a process pool
def test_ranks_done_rank_by_rank(tmp_path: Path) -> None:
    a = fixture("kineto/hta/sampled_rank-0.json.gz")
    b = fixture("kineto/hta/sampled_rank-1.json.gz")
    rc, _, term = on_pty(["report", str(a), str(b), "--jobs", "2", "--format", "json"])
    assert rc == 0, term[-2000:]
    assert re.search(r"report: ranks .*[0-2] / 2 ranks", term), term[-3000:]


CHILD = textwrap.dedent(
    """
    import json, os, time
    import torch
    m = torch.nn.Linear(4, 2)
    with open(os.environ["TBDTRACE_STEPS_FILE"], "a") as steps:
        for i in range(3):
            t0 = time.time_ns()
            m(torch.randn(3, 4)).sum().backward()
            time.sleep(0.8)
            steps.write(json.dumps({"step": i, "start_ns": t0, "end_ns": time.time_ns(),
                                    "samples": 3, "warmup": i == 0, "loss": 1.0,
                                    "pid": os.getpid()}) + "\\n")
            steps.flush()
    """
)


@pytest.mark.heavy  # a capture
def test_capture_shows_the_step_and_seconds_per_step(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(CHILD)
    out = tmp_path / "run"
    rc, _, term = on_pty(
        ["capture", "--backend", "torch", "-o", str(out), "--", sys.executable, str(script)]
    )
    assert rc == 0, term[-3000:]
    assert "capture: warm-up step 0 done" in term, term[-3000:]
    got = re.findall(r"capture: step (\d) done, ([\d.]+) s/step", term)
    assert got and got[-1][0] == "2", term[-3000:]
    assert all(0.8 <= float(s) < 30 for _, s in got)  # each step slept 0.8 s
    assert "wrote" in term


def test_the_size_rule() -> None:
    from tbdtrace import progress

    assert not progress.is_big(nbytes=progress.BIG_BYTES - 1, rows=progress.BIG_ROWS - 1)
    assert progress.is_big(nbytes=progress.BIG_BYTES)
    assert progress.is_big(rows=progress.BIG_ROWS)
    progress.set_quiet(True)
    try:
        assert not progress.on_terminal()
        assert not progress.task("x", 10, big=True).shown
    finally:
        progress.set_quiet(False)
