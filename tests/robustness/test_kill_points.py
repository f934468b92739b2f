"""Kill points (class ``kill-points``): each rewrite of a trace killed at every file
operation it makes, the path checked after each kill.

A fault-injection library (faultshim.c, LD_PRELOAD) counts the file operations a command
makes under its output (opening a file for writing, each write, rename, unlink, mkdir,
rmdir) and SIGKILLs the process at the Nth: before the operation, or after half of a
write. For every N from 1 to the count of a whole run, the output must then hold the
old trace, the new one, or an interrupted one that ``report`` refuses in one line and
``tbdtrace recover TRACE`` completes into the new one; never a mixture (every trace is
opened with ``strict``: each table checked against the marker), never a lost user file.

Runs in ``make robustness`` (marker ``robustness``): a few hundred forks.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tbdtrace import outdir
from tbdtrace.cli import main
from tests.robustness import synth

pytestmark = [pytest.mark.robustness, pytest.mark.heavy]  # processes per kill point
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OLD_NAMES = ["old_gemm", "old_relu"]
NEW_NAMES = ["new_gemm", "new_relu", "new_softmax"]
NOTES = b"my notes, not tbdtrace's\n"


@dataclass(frozen=True)
class Rewrite:
    """A command that replaces (or writes) a trace, and how its output starts."""

    id: str
    argv: tuple[str, ...]  # {d} the output, {new} the new profile
    start: str  # trace (imported from the old profile) | v2 (a version-2 trace) | absent
    via: str = "fork"  # fork: the fork server; process: a process of its own per kill


REWRITES = (
    Rewrite("import-force", ("import", "{new}", "--out", "{d}", "--force"), "trace"),
    Rewrite("import-new", ("import", "{new}", "--out", "{d}"), "absent"),
    Rewrite("upgrade", ("upgrade", "{d}"), "v2"),
    Rewrite(
        "capture-force",
        (
            "capture",
            "--backend",
            "torch",
            "--force",
            "--out",
            "{d}",
            "--",
            sys.executable,
            "-c",
            "import torch; torch.ones(4).sum()",
        ),
        "trace",
        via="process",
    ),
)
# capture runs a process per kill point (~4 CPU s each): its kill points are the last
# CAPTURE_TAIL operations (the journal, the renames, the marker: the install) and
# CAPTURE_EARLY spread over the staging writes before them.
CAPTURE_TAIL, CAPTURE_EARLY = 14, 3


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the fault-injection library")
    out = tmp_path_factory.mktemp("shim") / "faultshim.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "faultshim.c"), "-ldl"],
        check=True,
    )
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inputs")
    old = synth.kineto(d / "old.json", OLD_NAMES)
    new = synth.kineto(d / "new.json", NEW_NAMES)
    new2 = synth.kineto(d / "new2.json", ["rank1_gemm"])
    base = d / "base-trace"
    assert main(["import", str(old), "--out", str(base)]) == 0
    return {
        "old": old,
        "new": new,
        "new2": new2,
        "base": base,
        "v2": synth.v2_trace(d / "base-v2", OLD_NAMES),
    }


class Runner:
    """Runs a rewrite with the fault library armed at a kill point (the fork server, or
    a process of its own)."""

    def __init__(self, shim: Path, work: Path):
        self.work = work
        self.ctl = work / "ctl"
        self.ctl.write_bytes(b"\0" * 16)
        self.env = dict(
            os.environ,
            LD_PRELOAD=str(shim),
            TBDTRACE_FAULT_DIR=str(work / "runs"),
            TBDTRACE_FAULT_CTL=str(self.ctl),
            TBDTRACE_FAULT_SKIP=outdir.SPOOL_PREFIX,  # capture's spool: the child's
            PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            OMP_NUM_THREADS="1",
        )
        self.server = subprocess.Popen(
            [sys.executable, str(HERE / "fault_server.py")],
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, argv: list[str], target: int, via: str) -> dict[str, Any]:
        if via == "fork":
            assert self.server.stdin is not None and self.server.stdout is not None
            self.server.stdin.write(json.dumps({"argv": argv, "target": target}) + "\n")
            self.server.stdin.flush()
            return dict(json.loads(self.server.stdout.readline()))
        import struct

        self.ctl.write_bytes(struct.pack("qq", target, 0))
        r = subprocess.run(
            [sys.executable, "-m", "tbdtrace", *argv],
            env=self.env,
            capture_output=True,
            timeout=600,
        )
        count = struct.unpack("qq", self.ctl.read_bytes())[1]
        if r.returncode < 0:
            return {"killed": -r.returncode, "count": count}
        return {"rc": r.returncode, "count": count}

    def close(self) -> None:
        if self.server.stdin is not None:
            self.server.stdin.close()
        self.server.wait(timeout=60)


@pytest.fixture(scope="module")
def runner(shim: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    r = Runner(shim, tmp_path_factory.mktemp("kill"))
    yield r
    r.close()


def _prepare(rw: Rewrite, inputs: dict[str, Path], run_dir: Path) -> tuple[Path, list[str]]:
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    d = run_dir / "t"
    if rw.start == "trace":
        shutil.copytree(inputs["base"], d)
        (d / "notes.txt").write_bytes(NOTES)
    elif rw.start == "v2":
        shutil.copytree(inputs["v2"], d)
        (d / "notes.txt").write_bytes(NOTES)
    subs = {"d": str(d), "new": str(inputs["new"]), "new2": str(inputs["new2"])}
    return d, [a.format(**subs) for a in rw.argv]


def _state(d: Path) -> str:
    """``absent`` (nothing, or only tbdtrace's hidden working entries), ``interrupted``,
    or ``trace`` (a trace that opens strictly)."""
    if not d.exists() or not [n for n in os.listdir(d) if not outdir.is_private(n)]:
        return "absent"
    if getattr(outdir, "interrupted", lambda _: None)(d) is not None:
        return "interrupted"
    synth.content(d)  # raises when it is no sound trace: the test fails with the reason
    return "trace"


def _report_refuses(d: Path) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["report", str(d)])
    lines = err.getvalue().strip().splitlines()
    assert rc == 1 and len(lines) == 1 and "interrupted" in lines[0], err.getvalue()
    assert "recover" in lines[0]


def _targets(rw: Rewrite, total: int) -> list[int]:
    if rw.via != "process":
        return list(range(1, total + 1))
    tail = list(range(max(1, total - CAPTURE_TAIL + 1), total + 1))
    early = [max(1, (total - CAPTURE_TAIL) * i // (CAPTURE_EARLY + 1)) for i in range(1, 4)]
    return sorted(set(early) | set(tail))


def _same(got: tuple[Any, ...], new: tuple[Any, ...], rw: Rewrite) -> bool:
    """Is ``got`` the new trace? A capture differs from run to run (its times): there,
    a sound trace of the new source is the new one."""
    return got == new if rw.via == "fork" else got[:2] == new[:2]


def _check_kill(rw: Rewrite, k: int, res: dict[str, Any], d: Path, old: Any, new: Any) -> str:
    """What a kill at ``k`` left at ``d``; AssertionError when it breaks the promise."""
    # the same run makes the same operations: the kill happens (a capture's count may
    # vary by one or two with its timing, then it may end first)
    assert res.get("killed") == 9 or (rw.via == "process" and res.get("rc") == 0), res
    state = _state(d)
    if state == "interrupted":
        _report_refuses(d)
        assert main(["recover", str(d)]) == 0, "recover failed"
        assert _same(synth.content(d), new, rw), "recover did not give the new trace"
        state = "interrupted, recovered as new"
    elif state == "trace":
        got = synth.content(d)
        assert got == old or _same(got, new, rw), "neither the old trace nor the new one"
        state = "old" if got == old else "new"
    else:
        assert old is None, "the old trace is gone"
    if rw.start != "absent":
        assert (d / "notes.txt").read_bytes() == NOTES, "the user's file changed"
    return state


@pytest.mark.parametrize("rw", REWRITES, ids=lambda r: r.id)
def test_kill_at_every_file_operation(rw: Rewrite, runner: Runner, inputs: dict[str, Path]) -> None:
    run_dir = runner.work / "runs" / rw.id
    d, argv = _prepare(rw, inputs, run_dir)
    old = synth.content(d) if rw.start != "absent" else None
    whole = runner.run(argv, 0, rw.via)  # a run without a kill: the new trace, the count
    assert whole.get("rc") == 0, whole
    new = synth.content(d)
    assert new != old and whole["count"] > 3
    outcomes: dict[str, int] = {}
    bad: list[str] = []  # every kill point that broke the promise, not only the first
    for k in _targets(rw, whole["count"]):
        d, argv = _prepare(rw, inputs, run_dir)
        res = runner.run(argv, k, rw.via)
        try:
            state = _check_kill(rw, k, res, d, old, new)
        except Exception as e:  # noqa: BLE001 - collected, reported below
            bad.append(f"kill at {k}: {type(e).__name__}: {str(e)[:200]}")
            continue
        outcomes[state] = outcomes.get(state, 0) + 1
    print(
        f"{rw.id}: {whole['count']} file operations; outcomes after a kill: {outcomes}; "
        f"broken: {len(bad)}"
    )
    assert not bad, "\n".join(bad)
    assert ("old" in outcomes) == (old is not None)
