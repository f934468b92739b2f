"""Runs the case tables of cases_capture.py: outputs, stopping, OS errors, concurrency,
full disks and noise. Every case must end with its exit code and its one line, never a
traceback, and every file listed as surviving must hold the same bytes afterwards.

The real captures (SCENARIOS) run once per session, side by side, on a small PyTorch
program; the first one is also the trace the CLI cases copy.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace import outdir
from tests.inprocess import tbd
from tests.robustness.cases_capture import CASES, SCENARIOS, Case, Scenario

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[2]
# One intra-op thread: the captured ResNet-50 and bench's workload run beside the other
# captures, and with two threads each step waits on the other thread's turn.
ENV = dict(
    os.environ,
    PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    OMP_NUM_THREADS="1",
)
LONG_NAME = "n" * 300

WORKLOAD = r"""
import json, os, sys, time
import torch

steps, delay = int(sys.argv[1]), float(sys.argv[2])
code = int(sys.argv[3]) if len(sys.argv) > 3 else 0
if len(sys.argv) > 4 and sys.argv[4] != "-":
    os.makedirs(sys.argv[4], exist_ok=True)
    os.chdir(sys.argv[4])  # as Hydra does: relative paths now mean something else
fill = len(sys.argv) > 5 and sys.argv[5] == "fill"
slow_stop = len(sys.argv) > 6 and sys.argv[6] == "slow-stop"
steps_file = os.environ.get("TBDTRACE_STEPS_FILE")
x = torch.ones(32, 32)
for i in range(steps):
    try:
        t0 = time.time_ns()
        y = torch.nn.functional.linear(x, x).relu().sum()
        time.sleep(delay)
    except KeyboardInterrupt:
        if not slow_stop:
            raise
        print("saving a checkpoint", file=sys.stderr, flush=True)
        time.sleep(120)  # a program that takes long to stop: a second Ctrl-C ends it
    if steps_file:
        with open(steps_file, "a") as f:
            f.write(json.dumps({"step": i, "start_ns": t0, "end_ns": time.time_ns(),
                                "samples": 32, "warmup": False, "loss": float(y),
                                "pid": os.getpid()}) + "\n")
if fill:  # fill the file system of the output (the spool lives there)
    out = os.environ["TBDTRACE_TORCH_SPOOL"]
    target = os.path.join(os.path.dirname(os.path.dirname(out)), "filler")
    try:
        with open(target, "wb") as f:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
    except OSError:
        pass
sys.exit(code)
"""


def _mount_tmpfs(path: Path, size: str, ro: bool = False) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    opts = f"size={size}" + (",ro" if ro else "")
    cp = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True
    )
    return cp.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(path: Path, leave: int) -> None:
    """Fill the file system of ``path`` until ``leave`` bytes are free."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    fd = os.open(path / ".filler", os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"\0" * max(free - leave, 0))
        while leave == 0:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass  # full
    finally:
        os.close(fd)


# --- the session's real captures ----------------------------------------------------


def _wait(cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


FOREIGN_STEPS = '{"step": 0, "start_ns": 1, "end_ns": 2}\n'


def _spool(out: Path) -> Path | None:
    found = sorted(p for p in out.glob(f"{outdir.SPOOL_PREFIX}*") if not p.name.endswith("-old"))
    return found[0] if found else None


def _step_records(out: Path) -> list[dict[str, Any]]:
    sp = _spool(out)
    if sp is None or not (sp / "steps.jsonl").exists():
        return []
    lines = (sp / "steps.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if x.endswith("}")]


class Run:
    """One scenario's process and what came of it."""

    def __init__(self, sc: Scenario, base: Path, script: Path):
        self.sc = sc
        self.dir = base / sc.id
        self.run_dir = self.dir / "run"
        self.run_dir.mkdir(parents=True)
        self.out = self.run_dir / sc.out
        self.rc: int | None = None
        self.stderr = ""
        self.error = ""
        self.child_pid: int | None = None
        self.mounted = False
        if sc.mount:
            self.mounted = _mount_tmpfs(self.out.parent, sc.mount)
        self.script = script
        if sc.pre == "old-trace":
            cols = {"step": [0], "start_ns": [1], "end_ns": [2], "source": ["old"]}
            tbdtrace.write(self.out, {"steps": cols}, {"source": "test"})
            (self.out / "notes.txt").write_text(FOREIGN_STEPS)
        if sc.pre == "foreign-spool":
            other = self.out / f"{outdir.SPOOL_PREFIX}1-old"
            other.mkdir(parents=True)
            (other / "steps.jsonl").write_text(FOREIGN_STEPS)

    def go(self) -> None:
        try:
            self._go()
        except Exception as e:  # reported by the test that reads it
            self.error = f"{type(e).__name__}: {e}"

    def _go(self) -> None:
        sc = self.sc
        prog = ["-m", sc.module] if sc.module else [str(self.script)]
        argv = [
            sys.executable,
            "-m",
            "tbdtrace",
            "capture",
            "--backend",
            "torch",
            "--sample-hz",
            "20",
            *sc.flags,
            "--out",
            sc.out,
            "--",
            sys.executable,
            *prog,
            *sc.workload,
        ]
        err = (self.dir / "stderr").open("w")
        ignore = sc.pre == "sigint-ignored"
        proc = subprocess.Popen(
            argv,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore else None,
            cwd=self.run_dir,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        try:
            self._trigger(proc)
            self._act(proc)
            proc.wait(timeout=240)
            self.rc = proc.returncode
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                self.error = self.error or "timed out"
            err.close()
            self.stderr = (self.dir / "stderr").read_text()

    def _trigger(self, proc: subprocess.Popen[bytes]) -> None:
        t = self.sc.trigger
        if t == "none":
            return
        if t == "profiler":
            ok = _wait(
                lambda: (sp := _spool(self.out)) is not None and any(sp.glob("profiler-*.log")), 180
            )
        else:
            n = int(t.split(":")[1])
            ok = _wait(lambda: len(_step_records(self.out)) >= n, 180)
        if not ok:
            raise RuntimeError(f"trigger {t} never came")
        recs = _step_records(self.out)
        self.child_pid = recs[0]["pid"] if recs else None

    def _act(self, proc: subprocess.Popen[bytes]) -> None:
        a = self.sc.action
        if a == "int":
            os.kill(proc.pid, signal.SIGINT)
        elif a == "term":
            os.kill(proc.pid, signal.SIGTERM)
        elif a == "int-int":
            os.kill(proc.pid, signal.SIGINT)
            saving = self.dir / "stderr"
            if not _wait(lambda: "saving a checkpoint" in saving.read_text(), 120):
                raise RuntimeError("the program never got the first SIGINT")
            os.kill(proc.pid, signal.SIGINT)
        elif a in ("kill-child", "term-child"):
            assert self.child_pid is not None
            os.kill(self.child_pid, signal.SIGKILL if a == "kill-child" else signal.SIGTERM)
        elif a == "kill-tbdtrace":
            os.kill(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    base = tmp_path_factory.mktemp("scenarios")
    script = base / "train.py"
    script.write_text(WORKLOAD)
    runs = {sc.id: Run(sc, base, script) for sc in SCENARIOS if not sc.run}
    threads = [threading.Thread(target=r.go) for r in runs.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    yield runs
    for r in runs.values():
        if r.mounted:
            _umount(r.out.parent)


@pytest.fixture(scope="session")
def base_trace(scenarios: dict[str, Run]) -> Path:
    r = scenarios["base-hydra-chdir"]
    assert r.rc == 0, r.stderr[-2000:]
    return r.out


@pytest.fixture(scope="session")
def leftover_spool(scenarios: dict[str, Run]) -> Path:
    r = scenarios["kill-tbdtrace"]
    sp = _spool(r.out)
    assert sp is not None, r.stderr[-2000:]
    _wait(lambda: not _alive(r.child_pid), 30)
    return sp


@pytest.fixture(scope="session")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small PyTorch profiler file, made here by torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    path = tmp_path_factory.mktemp("profile") / "small.pt.trace.json"
    x = torch.ones(64, 64)
    with prof(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        for _ in range(60):
            x = torch.nn.functional.linear(x, x).tanh()
    p.export_chrome_trace(str(path))
    return path


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _status(pid)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return ""


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[-3000:]


def _no_tbdtrace_traceback(text: str) -> None:
    """No traceback through tbdtrace's code (the captured program's own traceback, e.g. its
    KeyboardInterrupt on Ctrl-C, is the program's business)."""
    pkg = str(ROOT / "tbdtrace")
    frames: list[str] = []
    for block in text.split("Traceback (most recent call last):")[1:]:
        lines = [x for x in block.splitlines() if x.strip()]
        # The program's own Ctrl-C lands wherever it is running, also inside tbdtrace's
        # hooks that run in the program (memory tracking): that traceback is the program's.
        if any(x.startswith("KeyboardInterrupt") for x in lines):
            continue
        frames += [x for x in lines if x.strip().startswith("File ") and pkg in x]
    assert not frames, text[-3000:]
    assert "tbdtrace: internal error" not in text, text[-3000:]


def _tbd_lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith(("tbdtrace", "wrote "))]


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(sc: Scenario, scenarios: dict[str, Run], tmp_path: Path) -> None:
    r = scenarios[sc.run or sc.id]
    if sc.run:  # the same command as the scenario whose run it reads
        same = {f: getattr(r.sc, f) for f in ("workload", "trigger", "action", "out", "pre")}
        assert same == {f: getattr(sc, f) for f in same}, sc.id
        assert (r.sc.mount, r.sc.module, r.sc.flags) == (sc.mount, sc.module, sc.flags)
    if sc.mount and not r.mounted:
        pytest.skip("mounting a tmpfs is not allowed here (needs root and mount rights)")
    assert not r.error, f"{r.error}\n{r.stderr[-2000:]}"
    _no_tbdtrace_traceback(r.stderr)
    if sc.rc is None:
        assert r.rc == -signal.SIGKILL
    else:
        assert r.rc == sc.rc, r.stderr[-2000:]
    if sc.line:
        lines = _tbd_lines(r.stderr)
        assert any(re.search(sc.line, x) for x in lines), r.stderr[-2000:]
    for chk in sc.check:
        _scenario_check(chk, r, tmp_path)


def _scenario_check(chk: str, r: Run, tmp_path: Path) -> None:
    name, _, arg = chk.partition(":")
    if name in ("spool-left", "child-gone", "recovers"):
        sp = _spool(r.out)
        assert sp is not None and (sp / "steps.jsonl").exists(), chk
        if name == "child-gone":
            assert _wait(lambda: not _alive(r.child_pid), 30), "the command runs on, orphaned"
        if name == "recovers":
            assert _wait(lambda: not _alive(r.child_pid), 30)
            with contextlib.suppress(FileNotFoundError):
                (r.out.parent / "filler").unlink()  # the disk-fills workload's file
            want = len(_step_records(r.out))
            out = tmp_path / "recovered"
            cp = tbd("recover", str(sp), "--out", str(out), check=False)
            assert cp.returncode == 0, cp.stderr
            _no_traceback(cp.stderr)
            tr = tbdtrace.open(out)
            assert tr.meta["partial"] is True
            assert tr.num_rows("steps") == want >= 1
            assert sp.exists() and (sp / "steps.jsonl").exists()  # recover never deletes it
        return
    tr = tbdtrace.open(r.out)
    steps = tr.table("steps").to_pylist()
    harness = [s for s in steps if s["source"] == "harness"]
    if name.startswith("steps>="):
        assert len(harness) >= int(name[7:]), steps
    elif name.startswith("steps="):
        assert len(harness) == int(name[6:]), steps
    elif name == "ops>0":
        assert tr.num_rows("ops") > 0
    elif name == "ops=0":
        assert tr.num_rows("ops") == 0
    elif name == "partial":
        assert tr.meta["partial"] is True and tr.meta["extra"]["partial"]
    elif name == "complete":
        assert tr.meta["partial"] is False
    elif name == "host-samples":
        rows = tr.table("host_samples").to_pylist()
        assert sum(1 for x in rows if x["metric"] == "rss_bytes") >= 2
    elif name == "no-spool":
        assert _spool(r.out) is None
    elif name == "report":
        cp = tbd("report", str(r.out), check=False)
        assert cp.returncode == 0 and cp.stdout.strip(), cp.stderr
        _no_traceback(cp.stderr)
    elif name == "foreign-spool-kept":
        other = r.out / f"{outdir.SPOOL_PREFIX}1-old" / "steps.jsonl"
        assert other.read_text() == FOREIGN_STEPS
    elif name == "user-file-kept":
        assert (r.out / "notes.txt").read_text() == FOREIGN_STEPS
    elif name == "quiet":
        assert "USDT:" not in r.stderr and "gpuGetDeviceCount" not in r.stderr, r.stderr
    elif name == "log-has":
        log = (r.out / "capture.log").read_text()
        assert arg in log
        marker = json.loads((r.out / outdir.MARKER).read_text())
        assert "capture.log" in marker["files"]
    else:
        raise AssertionError(f"unknown check {chk}")


# --- the CLI cases ------------------------------------------------------------------


class Env:
    """A case's work directory and what its setup started."""

    def __init__(self, w: Path):
        self.w = w
        self.mounts: list[Path] = []
        self.procs: list[subprocess.Popen[str]] = []
        self.umask: int | None = None
        self.min_free: int | None = None
        self.tight: Path | None = None

    def close(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait()
        for m in reversed(self.mounts):
            _umount(m)


def _setup(step: str, env: Env, request: pytest.FixtureRequest) -> None:
    kind, _, arg = step.partition(":")
    w = env.w
    if kind in ("trace", "legacy"):
        shutil.copytree(request.getfixturevalue("base_trace"), w / arg, symlinks=True)
        if kind == "legacy":
            (w / arg / outdir.MARKER).unlink()
            (w / arg / "capture.log").unlink()
    elif kind == "file":
        rel, _, text = arg.partition("=")
        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        (w / rel).write_text(text)
    elif kind == "dir":
        (w / arg).mkdir(parents=True, exist_ok=True)
    elif kind == "steps-trace":
        cols = {"step": [0, 1], "start_ns": [10, 30], "end_ns": [20, 40], "source": ["t"] * 2}
        tbdtrace.write(w / arg, {"steps": cols}, {"source": "test"})
    elif kind == "corrupt":
        data = (w / arg).read_bytes()
        (w / arg).write_bytes(data[: len(data) // 2])
    elif kind == "link":
        rel, _, target = arg.partition("=")
        (w / rel).symlink_to(target)
    elif kind == "spool":
        shutil.copytree(request.getfixturevalue("leftover_spool"), w / arg)
    elif kind in ("ro", "full", "tight"):
        size = "1m"
        ok = _mount_tmpfs(w / arg, size, ro=kind == "ro")
        if ok:
            env.mounts.append(w / arg)
        elif kind == "ro" and os.geteuid() != 0:
            (w / arg).chmod(0o555)
        else:
            pytest.skip("mounting a tmpfs is not allowed here (needs root and mount rights)")
        if kind == "full":
            _fill(w / arg, 0)
        elif kind == "tight":
            env.tight = w / arg
    elif kind == "lock":
        code = (
            "import sys; from tbdtrace import outdir; o = outdir.claim(sys.argv[1], "
            "force=True, min_free_bytes=0); print('held', flush=True); sys.stdin.read()"
        )
        p = subprocess.Popen(
            [sys.executable, "-c", code, str(w / arg)],
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        env.procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
    elif kind == "holder":
        spool = str((w / arg).resolve())
        p = subprocess.Popen(
            ["sleep", "60"], env=dict(os.environ, TBDTRACE_TORCH_SPOOL=spool), text=True
        )
        env.procs.append(p)
    elif kind == "umask":
        env.umask = int(arg, 8)
    elif kind == "min-free":
        env.min_free = int(arg)
    else:
        raise AssertionError(f"unknown setup {step}")


def _snapshot(w: Path, rels: tuple[str, ...]) -> dict[str, bytes]:
    snap = {}
    for rel in rels:
        p = w / rel
        assert p.is_file(), f"{rel}: the setup did not make it"
        snap[rel] = p.read_bytes()
    return snap


def _argv(case: Case, w: Path, profile: Path) -> list[str]:
    subs = {
        "{w}": str(w),
        "{profile}": str(profile),
        "{long}": LONG_NAME,
        "{python}": sys.executable,
    }
    out = []
    for a in case.argv:
        for k, v in subs.items():
            a = a.replace(k, v)
        out.append(a.replace("~", " "))
    return out


def _inproc(argv: list[str], cwd: Path, env: Env) -> tuple[int, str, str]:
    from tbdtrace import _pandas_gate, cli

    out, err = io.StringIO(), io.StringIO()
    old_cwd = os.getcwd()
    old_mask = os.umask(env.umask) if env.umask is not None else None
    old_min = outdir.MIN_FREE_BYTES
    if env.min_free is not None:
        outdir.MIN_FREE_BYTES = env.min_free
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except SystemExit as e:  # argparse usage errors
                rc = int(e.code or 0)
    finally:
        os.chdir(old_cwd)
        if old_mask is not None:
            os.umask(old_mask)
        outdir.MIN_FREE_BYTES = old_min
        _pandas_gate.open_()
    return rc, out.getvalue(), err.getvalue()


def _proc(case: Case, argv: list[str], cwd: Path) -> tuple[int, str, str]:
    cmd = [sys.executable, "-m", "tbdtrace", *argv]
    if case.run == "full":
        with open("/dev/full", "w") as full:
            cp = subprocess.run(
                cmd, cwd=cwd, env=ENV, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120
            )
        return cp.returncode, "", cp.stderr
    if case.run == "head":  # `| head -1`: the reader goes away after one line
        p = subprocess.Popen(
            cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert p.stdout is not None and p.stderr is not None
        first = p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read()
        rc = p.wait(timeout=120)
        return rc, first, err
    cp = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)
    return cp.returncode, cp.stdout, cp.stderr


def _check(chk: str, w: Path) -> None:
    name, _, arg = chk.partition(":")
    rel, _, val = arg.partition("=")
    p = w / rel
    if name == "trace":
        tbdtrace.open(p)
        assert (p / outdir.MARKER).exists()
    elif name == "source":
        assert tbdtrace.open(p).meta["source"] == val
    elif name == "absent":
        assert not os.path.lexists(p), f"{rel} exists"
    elif name == "mode":
        assert oct(p.stat().st_mode & 0o777) == oct(int(val, 8))
    elif name == "no-lock":
        assert not (p / outdir.LOCK).exists()
    elif name == "no-staging":
        assert not list(p.glob(".tbdtrace-staging-*")), list(p.iterdir())
    elif name == "marker-lists":
        assert val in json.loads((p / outdir.MARKER).read_text())["files"]
    else:
        raise AssertionError(f"unknown check {chk}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, tmp_path: Path, profile: Path, request: pytest.FixtureRequest) -> None:
    w = tmp_path / "w"
    w.mkdir()
    (w / "touch.py").write_text(f"open({str(w / 'ran')!r}, 'w').close()\n")
    env = Env(w)
    try:
        for step in case.setup:
            _setup(step, env, request)
        if env.tight is not None:
            _fill(env.tight, 8 << 10)
        before = _snapshot(w, case.survive)
        argv = _argv(case, w, profile)
        cwd = w / case.cwd if case.cwd else w
        if case.run == "inproc":
            rc, out, err = _inproc(argv, cwd, env)
        else:
            rc, out, err = _proc(case, argv, cwd)
        for p in env.procs:  # the other writer or spool user: not needed any more
            p.kill()
        _no_traceback(err)
        assert rc == case.rc, err
        lines = [x for x in err.splitlines() if x.strip()]
        if rc == 2:  # argparse: the usage, then the one line that says what is wrong
            lines = lines[-1:]
        if case.line:
            assert len(lines) == 1, err
            assert re.search(case.line, lines[0]), lines[0]
        else:
            assert lines == [], err
        for rel, data in before.items():  # (before the tmpfs of the case is unmounted)
            assert (w / rel).read_bytes() == data, f"{rel} changed or lost"
        for chk in case.check:
            _check(chk, w)
    finally:
        env.close()


def test_the_table_is_large_enough() -> None:
    n = len(CASES) + len(SCENARIOS) + len(CONCURRENT_IDS) + 1  # + the bench case
    assert n >= 70
    assert len({c.id for c in CASES} | {s.id for s in SCENARIOS}) == len(CASES) + len(SCENARIOS)


# --- concurrency between processes, and bench ---------------------------------------

CONCURRENT_IDS = ("parallel-imports", "parallel-force-imports", "capture-vs-import")


def _start_imports(profile: Path, out: Path, n: int, force: bool) -> list[tuple[int, str]]:
    cmd = [sys.executable, "-m", "tbdtrace", "import", str(profile), "--out", str(out)]
    procs = [
        subprocess.Popen(
            cmd + (["--force"] if force else []),
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    return [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]


def test_parallel_imports(profile: Path, tmp_path: Path) -> None:
    """parallel-imports: four imports to one new --out at once: one writes, the others
    say why not; the trace is whole."""
    out = tmp_path / "t"
    res = _start_imports(profile, out, 4, force=False)
    for _, err in res:
        _no_traceback(err)
    assert sorted(rc for rc, _ in res) == [0, 1, 1, 1], res
    for rc, err in res:
        if rc == 1:
            assert re.search(r"another tbdtrace process|holds a trace already", err), err
    assert tbdtrace.open(out).num_rows("ops") > 0
    assert not list(out.glob(".tbdtrace-staging-*")) and not (out / outdir.LOCK).exists()


def test_parallel_force_imports(profile: Path, tmp_path: Path, base_trace: Path) -> None:
    """parallel-force-imports: three --force imports over a trace with a user file."""
    out = tmp_path / "t"
    shutil.copytree(base_trace, out)
    (out / "notes.txt").write_text("mine")
    res = _start_imports(profile, out, 3, force=True)
    assert 0 in [rc for rc, _ in res], res
    for rc, err in res:
        _no_traceback(err)
        assert rc == 0 or "another tbdtrace process" in err, err
    assert (out / "notes.txt").read_text() == "mine"
    assert tbdtrace.open(out).meta["source"] == "kineto"
    assert not list(out.glob(".tbdtrace-staging-*"))


def test_capture_vs_import(profile: Path, tmp_path: Path) -> None:
    """capture-vs-import: an import to the --out of a running capture is refused."""
    out = tmp_path / "t"
    cap = subprocess.Popen(
        [sys.executable, "-m", "tbdtrace", "capture", "--out", str(out), "--", "sleep", "30"],
        env=ENV,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert _wait(lambda: (out / outdir.LOCK).exists() and _spool(out) is not None, 60)
        cp = subprocess.run(
            [sys.executable, "-m", "tbdtrace", "import", str(profile), "--out", str(out)],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cp.returncode == 1 and "another tbdtrace process" in cp.stderr, cp.stderr
        _no_traceback(cp.stderr)
    finally:
        os.kill(cap.pid, signal.SIGINT)
        rc = cap.wait(timeout=60)
    err = cap.stderr.read() if cap.stderr else ""
    _no_traceback(err)
    # `sleep` is not a PyTorch program: no profile, but the stop still gives a trace of
    # what there is (host samples), marked partial.
    assert rc == 130, err
    assert tbdtrace.open(out).meta["partial"] is True


def test_bench_relative_out_from_any_cwd(tmp_path: Path) -> None:
    """bench-relative-out: `bench --out rel` from another directory writes there, and
    nothing into the checkout."""

    def untracked() -> set[str]:
        cp = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        return set(cp.stdout.splitlines())

    before = untracked()
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    cp = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbdtrace",
            "bench",
            "--models",
            "wgan",
            "--frameworks",
            "pytorch",
            "--capture",
            "steps",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--device",
            "cpu",
            "--no-eval",
            "--out",
            "rel",
        ],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    _no_traceback(cp.stderr)
    assert cp.returncode == 0, cp.stderr[-2000:]
    rows = json.loads((cwd / "rel" / "bench.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert [r["status"] for r in rows] == ["ok"]
    trace_dir = Path(rows[0]["trace"])
    assert trace_dir.parent == cwd / "rel"
    assert tbdtrace.open(trace_dir).num_rows("steps") == 1
    assert untracked() == before
