"""The generated robustness classes (tests/robustness/generators.py): outputs, table
tampering, names, arguments; and concurrent writers and full disks on every output kind.

Every case runs the real command line (tbdtrace.cli.main in this process) and checks what
the class promises: the exit code, one line on stderr for an error and never a traceback,
the files that must survive (bytes, and the kind of file: a FIFO stays a FIFO), and no
temporary file left behind.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tbdtrace
from tbdtrace import meta as meta_io
from tbdtrace import outdir
from tbdtrace.cli import COMMANDS, main
from tests.robustness import generators as gen
from tests.robustness import synth
from tests.xlsx_reader import read_workbook

ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], cwd: Path | None = None) -> tuple[int, str, str]:
    """``tbdtrace ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as e:  # what the program's process would exit with
                rc = e.code if isinstance(e.code, int) else 1
    finally:
        os.chdir(old)
    return rc, out.getvalue(), err.getvalue()


def one_line(rc: int, err: str) -> str:
    """The error's one line (no traceback, nothing else said)."""
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


# ---- shared inputs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inputs")
    profile = synth.kineto(d / "profile.json", ["gemm", "relu", "softmax"])
    other = synth.kineto(d / "other.json", ["gemm", "relu", "layernorm"])
    assert run(["import", str(profile), "--out", str(d / "trace")])[0] == 0
    assert run(["import", str(other), "--out", str(d / "trace2")])[0] == 0
    spool = d / f"{outdir.SPOOL_PREFIX}4242-x"
    spool.mkdir()
    (spool / "capture.json").write_text(json.dumps({"backend": "torch", "command": ["x"]}))
    (spool / "steps.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "step": i,
                    "start_ns": 10**9 + i * 10**6,
                    "end_ns": 10**9 + i * 10**6 + 5 * 10**5,
                    "pid": 1,
                    "samples": 8,
                    "warmup": False,
                }
            )
            + "\n"
            for i in range(3)
        )
    )
    for r in (0, 1):
        clock = {} if r == 0 else {"clock": {"offset_ns": 5, "error_bound_ns": 1}}
        tbdtrace.trace.write(
            d / f"part{r}",
            {
                "kernels": {
                    "start_ns": [100, 200],
                    "end_ns": [150, 260],
                    "name": ["k", "k"],
                    "rank": [r, r],
                },
                "steps": {"step": [0], "start_ns": [50], "end_ns": [300], "rank": [r]},
            },
            {
                "source": "torch",
                "ranks": [r],
                "extra": {"parts": [{"rank": r, "world_size": 2, **clock}]},
            },
        )
    return {
        "trace": d / "trace",
        "trace2": d / "trace2",
        "profile": profile,
        "spool": spool,
        "part0": d / "part0",
        "part1": d / "part1",
    }


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under ``root``: a file's bytes, a link's target, another's kind."""
    out: dict[str, Any] = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = p.read_bytes()
            else:
                out[rel] = ("kind", stat.S_IFMT(st.st_mode))
    return out


# ---- class outputs ------------------------------------------------------------------------


def test_every_output_option_is_covered() -> None:
    """A new output option needs a Writer (how to run it); then every target applies."""
    declared = gen.declared_outputs()
    covered = {(w.command, w.option, w.kind) for w in gen.WRITERS}
    by_option = {(c, o) for c, o, _ in covered}
    missing = [d for d in declared if (d[0], d[1]) not in by_option]
    assert not missing, f"output options without a Writer in generators.py: {missing}"
    writes = {c for c, _, _ in declared}
    # every command is a writer, reads only (info), or rewrites its input in place
    # (upgrade: the kill-point class, test_kill_points.py)
    assert {c.rstrip("_") for c in COMMANDS} - writes == {"info", "upgrade"}


class _Fifo:
    """A FIFO and a thread draining it (so a writer's open and writes never block)."""

    def __init__(self, path: Path):
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.got = bytearray()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._drain, daemon=True)
        self.t.start()

    def _drain(self) -> None:
        import select

        while not self.stop.is_set():
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                with contextlib.suppress(BlockingIOError):
                    self.got += os.read(self.fd, 1 << 16)

    def received(self, timeout_s: float = 5.0) -> bool:
        """Did the writer's bytes arrive (waiting for the draining thread)?"""
        import time

        end = time.monotonic() + timeout_s
        while not self.got and time.monotonic() < end:
            time.sleep(0.01)
        return bool(self.got)

    def close(self) -> None:
        self.stop.set()
        self.t.join()
        os.close(self.fd)


@contextlib.contextmanager
def tiny_fs(path: Path, free: int = 4096, before: Any = None) -> Iterator[None]:
    """A tmpfs at ``path`` with about ``free`` bytes left once ``before()`` (if given) has
    put its files there (skip where mounting is not allowed)."""
    path.mkdir(parents=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()})")
    try:
        if before is not None:
            before()
        st = os.statvfs(path)
        fill = st.f_bavail * st.f_frsize - free
        with open(path / ".filler", "wb") as f:
            f.write(b"\0" * max(fill, 0))
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _make_target(
    t: gen.Target, w: gen.Writer, work: Path, inputs: dict[str, Path], stack: contextlib.ExitStack
) -> tuple[str, Any]:
    """Make the target ``t`` for ``w`` under ``work``; (the path to give, the FIFO)."""
    name = w.name
    user = work / "mine"
    user.mkdir()
    fifo = None
    first_input = inputs[w.inputs[0]] if w.inputs else None
    if t.id == "absent":
        p = work / name
    elif t.id == "missing-parent":
        p = work / "no" / "such" / name
    elif t.id == "user-file":
        p = user / name
        p.write_bytes(b"the user's data\n")
    elif t.id == "empty-dir":
        p = work / "empty"
        p.mkdir()
    elif t.id == "user-dir":
        p = user
        (p / "a.txt").write_bytes(b"keep me")
    elif t.id in ("other-trace", "trace-meta", "trace-table", "trace-marker"):
        shutil.copytree(inputs["trace2"], work / "other")
        p = (
            work
            / "other"
            / {
                "other-trace": "",
                "trace-meta": "meta.json",
                "trace-table": "kernels.parquet",
                "trace-marker": outdir.MARKER,
            }[t.id]
        )
    elif t.id == "input":
        assert first_input is not None
        p = first_input
    elif t.id == "inside-input":
        assert first_input is not None
        p = first_input / name
    elif t.id == "input-symlink":
        assert first_input is not None
        p = work / name
        p.symlink_to(first_input)
    elif t.id == "input-hardlink":
        assert first_input is not None
        p = work / name
        os.link(first_input, p)
    elif t.id == "char-device":
        p = work / name
        try:
            os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null node
            os.close(os.open(p, os.O_WRONLY))
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            p.symlink_to("/dev/null")
    elif t.id == "fifo":
        p = work / name
        fifo = _Fifo(p)
        stack.callback(fifo.close)
    elif t.id == "socket":
        p = work / name
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        stack.callback(s.close)
    elif t.id == "link-to-user-file":
        (user / "real").write_bytes(b"the user's data\n")
        p = work / name
        p.symlink_to(user / "real")
    elif t.id == "dangling-link":
        p = work / name
        p.symlink_to(user / ("made-" + name))
    elif t.id == "link-loop":
        p = work / name
        (work / "loop2").symlink_to(p)
        p.symlink_to(work / "loop2")
    elif t.id == "under-file":
        (user / "f").write_bytes(b"x")
        p = user / "f" / name
    elif t.id == "long-name":
        p = work / ("n" * 300)
    elif t.id == "full-disk":
        full = work / "full"
        stack.enter_context(tiny_fs(full))
        p = full / name
        # One whole page, so the file has no slack in its last page that a short append
        # (diff --summary) could still fill on a full tmpfs.
        p.write_bytes(b"the user's data\n" * 256)
    else:
        raise AssertionError(t.id)
    return str(p), fifo


def _argv(w: gen.Writer, target: str, inputs: dict[str, Path], force: bool) -> list[str]:
    subs = {k: str(v) for k, v in inputs.items()}
    argv = [a.format(o=target, python=sys.executable, **subs) for a in w.argv]
    if force:
        i = argv.index("--") if "--" in argv else len(argv)
        argv.insert(i, "--force")
    return argv


OUTPUT_CASES = gen.output_cases()


@pytest.mark.parametrize(
    ("w", "t", "force"),
    OUTPUT_CASES,
    ids=[f"{w.id}-{t.id}{'-force' if f else ''}" for w, t, f in OUTPUT_CASES],
)
def test_output_target(
    w: gen.Writer, t: gen.Target, force: bool, inputs: dict[str, Path], tmp_path: Path
) -> None:
    first = inputs[w.inputs[0]] if w.inputs else None
    want = gen.expect(w, t, force, first is not None and first.is_dir())
    if want == "skip" or (w.runs == "refusals" and want != "refused"):
        pytest.skip(f"{t.id} does not apply to {w.id}" if want == "skip" else "costly run")
    work = tmp_path / "w"
    work.mkdir()
    with contextlib.ExitStack() as stack:
        target, fifo = _make_target(t, w, work, inputs, stack)
        watched = [work, *(inputs[i] for i in w.inputs)]
        before = {str(r): snapshot(r) if r.is_dir() else r.read_bytes() for r in watched}
        rc, out, err = run(_argv(w, target, inputs, force))
        assert "Traceback" not in err, err
        after = {str(r): snapshot(r) if r.is_dir() else r.read_bytes() for r in watched}
        if want in ("refused", "failed"):
            line = one_line(rc, err)
            assert rc == 1, err
            if want == "failed":
                assert re.search(r"No space left|only [\d.]+ MiB free", line), line
            assert after == before, f"{line}: changed what it refused to write"
            return
        if w.ok_rc:
            assert rc == w.ok_rc and re.search(w.ok_line, err), err
            return
        assert rc == 0, err
        _check_written(w, t, Path(target), work, fifo, before[str(work)], after[str(work)])


def _check_written(
    w: gen.Writer,
    t: gen.Target,
    target: Path,
    work: Path,
    fifo: Any,
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    real = Path(os.path.realpath(target))
    if t.id == "fifo":
        assert stat.S_ISFIFO(os.lstat(target).st_mode), "the FIFO was replaced"
        assert fifo.received(), "nothing written to the FIFO"
        return
    if t.id == "char-device":
        assert not stat.S_ISREG(os.stat(target).st_mode), "the device node was replaced"
        return
    if t.id == "link-to-user-file":
        assert target.is_symlink(), "the link was replaced, not the file it names"
    if w.kind == "append":
        data = real.read_bytes()
        if t.id in ("user-file", "link-to-user-file"):
            assert data.startswith(b"the user's data\n") and len(data) > 16, data[:80]
        assert b"|" in data  # the Markdown summary's table
    elif w.kind == "file":
        assert real.is_file() and real.stat().st_size > 0
        assert stat.S_IMODE(real.stat().st_mode) == 0o666 & ~outdir.umask()
    elif w.kind == "folder":
        assert real.is_dir()
        if w.command != "bench":
            assert list(real.glob("*.csv"))
        if t.id == "user-dir":
            assert (real / "a.txt").read_bytes() == b"keep me"
    else:
        synth.open_strict(real)
    leftovers = [k for k in after if k not in before and Path(k).name.endswith(".tmp")]
    assert not leftovers, leftovers


# ---- concurrency and full disks -----------------------------------------------------------


def test_two_writers_to_one_file(inputs: dict[str, Path], tmp_path: Path) -> None:
    """Two exports --force to one file at once: the file ends whole, one or the other's."""
    out = tmp_path / "t.json"
    cmd = [
        sys.executable,
        "-m",
        "tbdtrace",
        "export",
        str(inputs["trace"]),
        "--format",
        "chrome",
        "--force",
        "-o",
        str(out),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True) for _ in "ab"]
    for p in procs:
        _, e = p.communicate(timeout=300)
        assert p.returncode == 0 and "Traceback" not in e, e
    assert json.loads(out.read_text())["traceEvents"]
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left


def test_report_while_the_trace_is_replaced(inputs: dict[str, Path], tmp_path: Path) -> None:
    """report of a trace that import --force replaces meanwhile: the old trace's figures,
    the new one's, or one line (a table from another write, or an interrupted write) —
    never a mixture of both, never a traceback."""
    d = tmp_path / "t"
    shutil.copytree(inputs["trace"], d)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    imp = [sys.executable, "-m", "tbdtrace", "import", "--force", "--out", str(d)]
    kernels = {}
    for key in ("profile", "profile2"):
        src = (
            inputs["profile"]
            if key == "profile"
            else synth.kineto(tmp_path / "p2.json", ["conv", "pool"])
        )
        subprocess.run([*imp, str(src)], env=env, check=True, capture_output=True)
        kernels[key] = sorted(
            {r["name"] for r in tbdtrace.open(d).table("kernels", ["name"]).to_pylist()}
        )
    seen = set()
    for i in range(6):
        src = tmp_path / "p2.json" if i % 2 == 0 else inputs["profile"]
        writer = subprocess.Popen([*imp, str(src)], env=env, stderr=subprocess.PIPE, text=True)
        while writer.poll() is None:
            rc, out, err = run(["report", str(d), "--format", "json", "--section", "kernels"])
            if rc == 0:
                names = sorted({r["name"] for r in json.loads(out)})  # a row per name
                assert names in kernels.values(), names
                seen.add("whole")
            else:
                line = one_line(rc, err)
                assert re.search(
                    r"interrupted|another write|replaced while|no meta\.json|missing|marker", line
                ), line
                seen.add("refused")
        assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
    assert "whole" in seen


@pytest.mark.parametrize("kind", ["file", "folder", "trace"])
def test_full_disk_mid_write(kind: str, inputs: dict[str, Path], tmp_path: Path) -> None:
    """A disk that fills while the output is written: one line, exit 1, the earlier
    output as it was, no temporary file left (the trace's free-space check is lowered
    so the write itself meets the full disk)."""
    full = tmp_path / "full"

    def setup() -> None:
        if kind == "trace":
            shutil.copytree(inputs["trace2"], full / "t")
        elif kind == "folder":
            (full / "r").mkdir()
            (full / "r/kernels.csv").write_text("mine")
        else:
            (full / "r.txt").write_text("mine")

    with tiny_fs(full, free=8192 if kind == "trace" else 2048, before=setup):
        if kind == "trace":
            before = snapshot(full)
            big = synth.kineto(tmp_path / "big.json", [f"k{i}" for i in range(400)], steps=8)
            import tbdtrace.outdir as od

            old, od.MIN_FREE_BYTES = od.MIN_FREE_BYTES, 0
            try:
                rc, _, err = run(["import", str(big), "--out", str(full / "t"), "--force"])
            finally:
                od.MIN_FREE_BYTES = old
        else:
            before = snapshot(full)
            argv = ["report", str(inputs["trace"]), "--force", "-o", str(full / "r")]
            if kind == "folder":
                argv += ["--format", "csv"]
            else:
                argv[-1] = str(full / "r.txt")
                argv += ["--format", "json"]
            rc, _, err = run(argv)
        line = one_line(rc, err)
        assert rc == 1 and "No space left on device" in line, line
        assert snapshot(full) == before


# ---- class tampering ----------------------------------------------------------------------


def _tamper(kind: str, d: Path, inputs: dict[str, Path], tmp: Path) -> None:
    f = d / "kernels.parquet"
    if kind == "deleted":
        f.unlink()
    elif kind == "truncated":
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])
    elif kind == "swapped":
        shutil.copy(d / "ops.parquet", f)
    elif kind == "foreign":
        f.unlink()
        pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), f)
    elif kind == "garbage":
        f.write_bytes(b"PAR1 not really")
    elif kind == "fifo":
        f.unlink()
        os.mkfifo(f)
    elif kind == "char-device":
        f.unlink()
        f.symlink_to("/dev/zero")
    elif kind == "directory":
        f.unlink()
        f.mkdir()
    elif kind == "link-loop":
        f.unlink()
        (d / "loop").symlink_to(f)
        f.symlink_to(d / "loop")
    elif kind == "other-write":
        other = tmp / "again"
        assert run(["import", str(inputs["profile"]), "--out", str(other)])[0] == 0
        shutil.copy(other / "kernels.parquet", f)
    elif kind == "rows":
        m = json.loads((d / outdir.MARKER).read_text())
        m["tables"]["kernels"]["rows"] += 1
        (d / outdir.MARKER).write_text(json.dumps(m))
    elif kind == "unknown-parquet":
        pq.write_table(pa.table({"a": [1]}), d / "extra.parquet")
    elif kind == "unlisted-table":
        shutil.copy(d / "ops.parquet", d / "memset.parquet")
    else:
        raise AssertionError(kind)


READERS = (
    ("report", ("report", "{d}")),
    ("hotspots", ("hotspots", "{d}")),
    ("sql", ("sql", "{d}", "SELECT count(*) AS n FROM kernels", "--format", "json")),
    ("info", ("info", "{d}")),
    ("export", ("export", "{d}", "--format", "chrome", "-o", "{x}")),
)


@pytest.mark.parametrize("kind", [k for k, _ in gen.TAMPERS + gen.EXTRAS])
def test_tampered_table(kind: str, inputs: dict[str, Path], tmp_path: Path) -> None:
    d = tmp_path / "t"
    shutil.copytree(inputs["trace"], d)
    _tamper(kind, d, inputs, tmp_path)
    extra = kind in dict(gen.EXTRAS)
    for name, argv in READERS:
        args = [a.format(d=d, x=tmp_path / f"{name}.json") for a in argv]
        rc, out, err = run(args)
        assert rc == 0 and "Traceback" not in err, (name, err)
        warnings = [x for x in err.splitlines() if "warning:" in x]
        assert len(warnings) == 1, (name, err)
        if extra:
            assert "ignored" in warnings[0]
            continue
        assert "kernels.parquet" in warnings[0], warnings
        if name == "sql":  # the table is left out: it reads as empty, never as ops
            assert json.loads(out) == [{"n": 0}], out
    rc, _, err = run(["report", str(d), "--strict"])
    if extra:
        assert rc == 0, err
    else:
        line = one_line(rc, err)
        assert rc == 1 and "kernels.parquet" in line and "--strict" in line, line


META_CASES = [
    (field, kind, value)
    for field, kind in meta_io.FIELDS.items()
    for value in gen.wrong_values(kind)
]


def _set_field(doc: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        if part.endswith("[]"):
            key = part[:-2]
            doc.setdefault(key, [{}])
            doc = doc[key][0]
        else:
            doc = doc.setdefault(part, {})
    last = parts[-1]
    if last == "*":
        doc["some_reason"] = value
    else:
        doc[last] = value


@pytest.mark.parametrize(
    ("field", "kind", "value"), META_CASES, ids=[f"{f}={v!r}" for f, _, v in META_CASES]
)
def test_meta_field_of_the_wrong_type(
    field: str, kind: str, value: Any, inputs: dict[str, Path], tmp_path: Path
) -> None:
    d = tmp_path / "t"
    shutil.copytree(inputs["trace"], d)
    doc = json.loads((d / "meta.json").read_text())
    _set_field(doc, field, value)
    (d / "meta.json").write_text(json.dumps(doc))
    rc, _, err = run(["report", str(d)])
    line = one_line(rc, err)
    shown = field.replace("[]", "[0]").replace("*", "some_reason")
    assert rc == 1 and f"field {shown} is" in line, line


def test_merge_of_parts_with_mistyped_metadata(inputs: dict[str, Path], tmp_path: Path) -> None:
    for bad in ({"offset_ns": "5", "error_bound_ns": 1}, "text", [1]):
        part = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
        shutil.copytree(inputs["part1"], part)
        doc = json.loads((part / "meta.json").read_text())
        doc["extra"]["parts"][0]["clock"] = bad
        (part / "meta.json").write_text(json.dumps(doc))
        rc, _, err = run(["merge", str(tmp_path / "m"), str(inputs["part0"]), str(part)])
        line = one_line(rc, err)
        assert rc == 1 and "field extra.parts[0].clock" in line, line


# ---- class names --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("named")
    names = [p for _, p in gen.PAYLOADS]
    a = synth.kineto(d / "a.json", names, thread="\x1b[2Jthread")
    b = synth.kineto(d / "b.json", names[::-1])
    assert run(["import", str(a), "--out", str(d / "trace")])[0] == 0
    assert run(["import", str(b), "--out", str(d / "trace2")])[0] == 0
    m = json.loads((d / "trace" / "meta.json").read_text())
    m["workload"] = "\x1b]0;title\x07=cmd"
    (d / "trace" / "meta.json").write_text(json.dumps(m))
    return {"trace": d / "trace", "trace2": d / "trace2"}


def _csv_cells(text: str) -> list[str]:
    import csv

    return [c for row in csv.reader(io.StringIO(text, newline="")) for c in row]


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for k, x in v.items() for s in (*_strings(k), *_strings(x))]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


def _is_number(c: str) -> bool:
    try:
        float(c)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("oid", "argv", "how"), gen.NAME_OUTPUTS, ids=[o[0] for o in gen.NAME_OUTPUTS]
)
def test_names_cannot_inject(
    oid: str, argv: tuple[str, ...], how: str, named: dict[str, Path], tmp_path: Path
) -> None:
    o = tmp_path / "out"
    args = [a.format(o=o, trace=named["trace"], trace2=named["trace2"]) for a in argv]
    rc, out, err = run(args)
    assert rc == 0, err
    assert not re.search(gen.CONTROL, err), "a control character reached stderr"
    if how in ("text", "text-file"):
        text = o.read_text() if how == "text-file" else out
        assert not re.search(gen.CONTROL, text), "a control character reached the text"
        assert "\\x1b" in text  # shown escaped, not dropped
    elif how in ("csv", "csv-dir"):
        texts = [f.read_text() for f in o.glob("*.csv")] if how == "csv-dir" else [out]
        for text in texts:
            assert not re.search(gen.CONTROL, text.replace("\r\n", "\n"))
            for c in _csv_cells(text):
                assert not c.startswith(("=", "+", "-", "@")) or _is_number(c) or c == "-", c
        assert any("'=HYPERLINK" in t for t in texts)
        assert any(",-12.5," in t or "\n-12.5" in t for t in texts) or oid.startswith("diff")
    elif how == "csv-raw":
        assert "\x1b]8;;http://evil.example/\x07click" in out and '=HYPERLINK("' in out
    elif how == "json":
        strings = _strings(json.loads(out))
        for _, p in gen.PAYLOADS:  # every name exact, in some string of the document
            assert any(p in x for x in strings), p
    elif how == "xlsx":  # the reader fails on a formula cell
        cells = [c for rows in read_workbook(o).values() for r in rows for c in r]
        texts = [c for c in cells if isinstance(c, str)]
        for _, p in gen.PAYLOADS:
            assert p in texts, p
    elif how == "parquet":
        got = pq.read_table(f"{o}.parquet").column("name").to_pylist()
        assert set(got) == {p for _, p in gen.PAYLOADS}
    elif how == "exact-file":
        data = o.read_bytes()
        for _, p in gen.PAYLOADS:
            if oid == "export-chrome":
                assert json.dumps(p)[1:-1].encode() in data or p.encode() in data, p
            else:
                assert p.encode() in data, p
    else:
        raise AssertionError(how)


# ---- class arguments ----------------------------------------------------------------------


def test_every_number_option_is_validated() -> None:
    assert gen.untyped_numbers() == [], "options parsed with a bare int or float"
    import argparse

    from tbdtrace.commands import _args

    for t in (
        _args.positive_int,
        _args.nonnegative_int,
        _args.positive_float,
        _args.scheduler_address,
    ):
        t(gen.GOOD_VALUES[t.__name__])  # a good value passes
        with pytest.raises(argparse.ArgumentTypeError):
            t(gen.BAD_VALUES[t.__name__][0])


ARG_CASES = gen.argument_cases()


@pytest.mark.parametrize(
    ("command", "option", "tname", "value"),
    ARG_CASES,
    ids=[f"{c}{o}={v!r}" for c, o, _, v in ARG_CASES],
)
def test_bad_argument_is_a_usage_error(
    command: str, option: str, tname: str, value: str, tmp_path: Path
) -> None:
    rc, _, err = run([command, f"{option}={value}"])
    line = one_line(rc, err)
    assert rc == 2 and f"argument {option}" in line, line
