"""A big profiler file's import in a process of its own (tbdtrace/commands/_import_child.py,
_import_child_main.py).

``report FILE`` runs in its own process here with the size rule lowered to 0 bytes
(``_open.STREAM_GZIP_BYTES``), so a generated Kineto file of a few thousand events goes
through the child: its report equals the in-memory import's and the counts of an
independent reader of the raw JSON (tests/rawkineto.py); an error in the child is the
one line the import in the parent's process gives; its progress shows on a terminal; no
child and no temporary folder outlives the parent, whether it is interrupted, terminated
or killed. Each run records the child it started (the pid ``start`` returned, written to
a file), so a test knows the child did the import.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import rawkineto
from tests.core.test_progress import ANSI

ROOT = Path(__file__).resolve().parents[2]
# argv: TMPDIR STREAM_BYTES PIDFILE tbdtrace-args...; PIDFILE gets the child's pid.
RUN = """
import sys, tempfile
tempfile.tempdir, PIDS = sys.argv[1], sys.argv[3]
import tbdtrace.progress as p; p.BIG_BYTES = 0; p.BIG_ROWS = 0
from tbdtrace.commands import _open, _import_child
_open.STREAM_GZIP_BYTES = int(sys.argv[2])
start = _import_child.start
def started(*a):
    c = start(*a)
    with open(PIDS, "a") as f:
        f.write(f"{c.proc.pid if c else 'none'}\\n")
    return c
_import_child.start = started
from tbdtrace import cli
sys.argv = ["tbdtrace", *sys.argv[4:]]
cli.run()
"""
THROUGH_CHILD, IN_MEMORY = 0, 1 << 40


def _kineto(path: Path, kernels: int) -> Path:
    """A Kineto trace: ``kernels`` kernels on two streams, each launched by a
    cudaLaunchKernel of the same correlation id, a step marker over them."""
    ev: list[dict] = []
    for i in range(kernels):
        ts = 1000.0 + i * 4.5
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11,
                   "tid": 11, "ts": ts, "dur": 2.0, "args": {"correlation": i}})  # fmt: skip
        ev.append({"ph": "X", "cat": "kernel", "name": f"gemm_{i % 13}", "pid": 0,
                   "tid": 7 + i % 2, "ts": ts + 3.0, "dur": 1.0 + i % 7 * 0.5,
                   "args": {"stream": 7 + i % 2, "correlation": i, "device": 0}})  # fmt: skip
    ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 11,
               "tid": 11, "ts": 999.0, "dur": kernels * 4.5 + 10})  # fmt: skip
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode(), 1))
    return path


def _run(
    tmp: Path, args: list[str], stream_bytes: int = THROUGH_CHILD, **kw: object
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``tbdtrace ARGS`` (temporary folders under ``tmp/t``): the run and the children it
    started ('none' for a start that failed)."""
    t, pids = tmp / "t", tmp / "pids"
    t.mkdir(exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-c", RUN, str(t), str(stream_bytes), str(pids), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,  # type: ignore[call-overload]
    )
    started = pids.read_text().split() if pids.exists() else []
    pids.unlink(missing_ok=True)
    return r, started


def test_report_through_the_child_equals_the_in_memory_import(tmp_path: Path) -> None:
    src = _kineto(tmp_path / "k.json.gz", 3000)
    args = ["report", str(src), "--format", "json", "--window", "all"]
    child, pids = _run(tmp_path, args)
    assert child.returncode == 0, child.stderr
    assert len(pids) == 1 and pids[0].isdigit() and int(pids[0]) != os.getpid()
    assert list((tmp_path / "t").iterdir()) == []  # the temporary trace removed
    assert not _alive(int(pids[0]))
    memory, none = _run(tmp_path, args, IN_MEMORY)
    assert memory.returncode == 0 and none == []  # no child for a small file
    assert child.stdout == memory.stdout and child.stderr == memory.stderr == ""
    doc, raw = json.loads(child.stdout), rawkineto.expected_report(src)
    assert doc["trace"]["path"] == str(src)
    assert doc["summary"]["kernel_count"] == raw["kernel_count"] == 3000
    durations_ns = [round((1.0 + i % 7 * 0.5) * 1000) for i in range(3000)]
    assert doc["summary"]["kernel_time_ns"] == raw["kernel_time_ns"] == sum(durations_ns)
    by_name = {k["name"]: (k["count"], k["total_ns"]) for k in doc["kernels"]}
    assert by_name == {n: (v["count"], v["total_ns"]) for n, v in raw["kernels"].items()}


def test_skipped_events_noted_once(tmp_path: Path) -> None:
    """The import's skipped events, counted in the child, are named once by the parent."""
    src = tmp_path / "neg.json.gz"
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0 + i,
           "dur": -1 if i % 10 == 0 else 0.5, "args": {"stream": 7, "correlation": i}}
          for i in range(100)]  # fmt: skip
    src.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
    r, pids = _run(tmp_path, ["report", str(src), "--format", "json"])
    assert r.returncode == 0 and len(pids) == 1, r.stderr
    assert r.stderr.splitlines() == [f"tbdtrace: {src}: 10 events skipped (negative_duration: 10)"]
    assert json.loads(r.stdout)["summary"]["kernel_count"] == 90


@pytest.mark.parametrize("damage", ["truncated gzip", "bad JSON"])
def test_an_error_in_the_child_is_the_one_line_of_the_import_in_process(
    tmp_path: Path, damage: str
) -> None:
    """A file whose head is sound (the format is detected in the parent) and whose body is
    not: the child's parse fails; the parent prints the line the import in its own
    process prints (a child that cannot start: no interpreter at sys.executable),
    once, exit 1, and leaves nothing."""
    good = gzip.decompress(_kineto(tmp_path / "k.json.gz", 4000).read_bytes())
    src = tmp_path / "bad.json.gz"
    if damage == "truncated gzip":
        whole = gzip.compress(good)
        src.write_bytes(whole[: len(whole) * 2 // 3])
    else:
        src.write_bytes(gzip.compress(good[: len(good) // 2] + b"}}{{" + good[len(good) // 2 :]))
    child, pids = _run(tmp_path, ["report", str(src)])
    assert len(pids) == 1 and pids[0].isdigit()
    no_python = f"import sys; sys.executable = {str(tmp_path / 'no-python')!r}\n"
    inproc = subprocess.run(
        [sys.executable, "-c", no_python + RUN, str(tmp_path / "t"), "0", str(tmp_path / "p")]
        + ["report", str(src)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (tmp_path / "p").read_text().split() == ["none"]  # imported in the parent
    for r in (child, inproc):
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr.startswith(f"tbdtrace: {src}: ") and len(r.stderr.splitlines()) == 1
    assert child.stderr == inproc.stderr
    assert ("truncated" if damage == "truncated gzip" else "invalid JSON") in child.stderr
    assert list((tmp_path / "t").iterdir()) == []


def test_the_childs_progress_on_a_terminal_and_nothing_when_quiet(tmp_path: Path) -> None:
    import pty

    src = _kineto(tmp_path / "k.json.gz", 3000)
    for quiet in (False, True):
        master, slave = pty.openpty()
        pids = tmp_path / "pids"
        (tmp_path / "t").mkdir(exist_ok=True)
        args = ["report", str(src), "--format", "json", *(["-q"] if quiet else [])]
        out = tmp_path / "out.json"  # a file: a pipe could fill while the pty is read
        with out.open("wb") as f:
            p = subprocess.Popen(
                [sys.executable, "-c", RUN, str(tmp_path / "t"), "0", str(pids), *args],
                cwd=ROOT,
                stdout=f,
                stderr=slave,
                stdin=subprocess.DEVNULL,
            )
        os.close(slave)
        term = _read_all(master)
        assert p.wait(120) == 0, term[-2000:]
        assert json.loads(out.read_text())["summary"]["kernel_count"] == 3000
        assert len(pids.read_text().split()) == 1
        pids.unlink()
        text = ANSI.sub("", term.decode(errors="replace"))
        if quiet:
            assert text.strip() == "", text
            continue
        assert re.search(rf"reading {re.escape(src.name)}", text), text[-2000:]
        assert "importing into a temporary trace" in text, text[-2000:]


def _read_all(fd: int) -> bytes:
    got = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        got += chunk
    os.close(fd)
    return got


def _alive(pid: int) -> bool:
    """A process of that pid exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def longer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file whose import takes long enough to be signalled in the middle (~1 s): the
    kernels of :func:`_kineto`, written as text (faster than json.dumps)."""
    launch = (
        '{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11, '
        '"tid": 11, "ts": {ts}, "dur": 2.0, "args": {{"correlation": {i}}}}}'
    )
    kernel = (
        '{{"ph": "X", "cat": "kernel", "name": "gemm_{n}", "pid": 0, "tid": {s}, '
        '"ts": {k}, "dur": {d}, "args": {{"stream": {s}, "correlation": {i}, "device": 0}}}}'
    )
    ev = []
    for i in range(300_000):
        ts = 1000.0 + i * 4.5
        ev.append(launch.format(ts=ts, i=i))
        ev.append(kernel.format(n=i % 13, s=7 + i % 2, k=ts + 3.0, d=1.0 + i % 7 * 0.5, i=i))
    path = tmp_path_factory.mktemp("longer") / "k.json.gz"
    path.write_bytes(gzip.compress(('{"traceEvents": [' + ", ".join(ev) + "]}").encode(), 1))
    return path


@pytest.mark.parametrize("how", ["SIGINT to the group", "SIGTERM", "SIGKILL"])
def test_no_child_or_temporary_folder_outlives_the_parent(
    tmp_path: Path, how: str, longer: Path
) -> None:
    """The parent signalled while its child imports (its spool exists): Ctrl-C (SIGINT
    to the terminal's process group), SIGTERM, or SIGKILL (the child then learns of the
    parent's death from the kernel). Afterwards neither the child nor the temporary
    folder is left."""
    if how == "SIGKILL" and not sys.platform.startswith("linux"):
        pytest.skip("the parent's death reaches the child through Linux's PR_SET_PDEATHSIG")
    src = longer
    t, pids = tmp_path / "t", tmp_path / "pids"
    t.mkdir()
    p = subprocess.Popen(
        [sys.executable, "-c", RUN, str(t), "0", str(pids), "report", str(src)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's job
    )
    deadline = time.monotonic() + 60
    while not list(t.glob("*/spool/*")) and p.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert p.poll() is None, p.stderr.read() if p.stderr else ""
    child = int(pids.read_text().split()[0])
    assert _alive(child)  # importing still
    if how == "SIGINT to the group":
        os.killpg(p.pid, signal.SIGINT)
    else:
        os.kill(p.pid, signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    want = {"SIGINT to the group": 130, "SIGTERM": -signal.SIGTERM, "SIGKILL": -signal.SIGKILL}
    assert p.returncode == want[how], err
    if how == "SIGINT to the group":
        assert err == "tbdtrace: interrupted\n"
    else:
        assert err == ""
    deadline = time.monotonic() + 10  # SIGKILL: the child ends on its own, after the parent
    while (_alive(child) or list(t.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert list(t.iterdir()) == []
