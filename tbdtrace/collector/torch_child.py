"""``tbdtrace capture --backend torch -- COMMAND``: torch.profiler inside a child process.

Parent (:func:`run_capture`): claims the output directory, starts COMMAND (in its own
process group, :mod:`.supervise`) with the bootstrap directory (``sitecustomize/``) first
on PYTHONPATH and a spool directory ``<out>/.tbdtrace-spool-<pid>-*`` in
``TBDTRACE_TORCH_SPOOL``; samples the child's process tree with the host sampler while it
runs; then assembles the trace directory from the parts the Python processes wrote, the
harness steps file (``TBDTRACE_STEPS_FILE``) and the host samples.

Child (:func:`start_in_child`, called by the bootstrap): starts the torch backend and, at
exit (atexit), writes its tables as a trace directory ``<spool>/part-<pid>``. Every Python
process started with the variables writes a part (spawned workers too); processes that
leave through ``os._exit`` (forked DataLoader workers) write none. On SIGTERM the child
writes its part first, then dies of the signal as it would have; on SIGINT Python's
KeyboardInterrupt unwinds the program and atexit writes the part. What Kineto prints on
stderr while the profiler starts, stops and exports (``USDT:`` lines, "gpuGetDeviceCount
failed" on a machine without a GPU) goes to ``<spool>/profiler-<pid>.log`` and from there
into the trace's ``capture.log``, not to the user's terminal.

A capture stopped by a signal, or a command killed (SIGKILL, the OOM killer), still
yields a trace with what was captured: the parts written, the steps finished and the
host samples; ``meta.partial`` is true and ``meta.extra.partial`` says why. The spool is
removed only once the trace is written and no process of the command's group is left
that could still write it; otherwise it stays, and ``tbdtrace recover`` reads it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import outdir, trace
from tbdtrace.collector import cpuinfo, supervise
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig, read_spill
from tbdtrace.collector.torch_backend import TorchBackend, TorchConfig
from tbdtrace.errors import TraceError

SPOOL_ENV = "TBDTRACE_TORCH_SPOOL"
CONFIG_ENV = "TBDTRACE_TORCH_CONFIG"
STEPS_FILE_ENV = "TBDTRACE_STEPS_FILE"
BOOTSTRAP_DIR = Path(__file__).with_name("sitecustomize")
SPOOL_INFO = "capture.json"  # in a spool: what was captured, by whom (tbdtrace recover)
STEPS_NAME = "steps.jsonl"
HOST_SPILL = "host_samples.jsonl"
CAPTURE_LOG = "capture.log"  # in the trace: what the profiler printed
# Lines Kineto prints on every CPU-only capture: no news for the user.
# ... and TensorFlow's profiler on every capture (profiler_session.cc, save_profile.cc).
BENIGN_LOG = (
    "USDT:",
    "gpuGetDeviceCount failed",
    "STAGE:",
    "ProfilerStep",
    "Profiler session",
    "Collecting XSpace",
)


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 (the C++ libraries' stderr too) at ``path`` for the block."""
    with contextlib.suppress(ValueError, OSError):
        sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


# Helper processes multiprocessing starts (spawn/forkserver): no training runs there, and
# they end when their parent does, often by a signal: they are not profiled.
MP_HELPERS = (b"multiprocessing.resource_tracker", b"multiprocessing.forkserver")


def _is_mp_helper() -> bool:
    try:
        cmdline = Path("/proc/self/cmdline").read_bytes()
    except OSError:
        return False
    return any(h in cmdline for h in MP_HELPERS)


def start_in_child() -> None:
    """Start torch.profiler in this process; write ``<spool>/part-<pid>`` at exit or on
    SIGTERM."""
    if _is_mp_helper():
        return
    spool = Path(os.environ[SPOOL_ENV])
    cfg = TorchConfig(**json.loads(os.environ.get(CONFIG_ENV, "{}")))
    owner = os.getpid()
    log = spool / f"profiler-{owner}.log"
    backend = TorchBackend(cfg)
    try:
        with stderr_to(log):
            backend.start()
    except KeyboardInterrupt:
        # Ctrl-C while torch loads, before the program ran: end as Python would on an
        # interrupt, by the signal, without a traceback from this bootstrap.
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        raise
    from tbdtrace.collector import torch_dist

    torch_dist.watch_init()
    state = ["profiling"]

    def finish() -> None:
        if state[0] != "profiling" or os.getpid() != owner:
            return  # done already, or a forked child that inherited the profiler
        state[0] = "finishing"
        try:
            with stderr_to(log):
                tables, meta = backend.stop()
            _tag_rank(tables, meta, torch_dist.final_rank())
            trace.write(spool / f"part-{owner}", tables, meta)
        except (OSError, TraceError) as e:  # a full disk: one line, not a traceback
            what = outdir.describe_os_error(e) if isinstance(e, OSError) else str(e)
            sys.stderr.write(f"tbdtrace: the profile of process {owner} was not written: {what}\n")
        state[0] = "done"
        if getattr(sys, "last_type", None) is KeyboardInterrupt:
            # Python ends on an unhandled KeyboardInterrupt by killing itself with SIGINT,
            # unless code ran at exit (as here): keep that conventional status.
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)

    def on_term(sig: int, _frame: Any) -> None:
        if state[0] == "finishing" and os.getpid() == owner:
            return  # writing the part already; a second signal from tbdtrace is SIGKILL
        if os.getpid() == owner:
            try:
                finish()
            except Exception as e:  # noqa: BLE001 - dying of the signal matters more
                sys.stderr.write(f"tbdtrace: profile not written on {sig}: {e}\n")
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    atexit.register(finish)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, on_term)


def _tag_rank(tables: dict[str, Any], meta: dict[str, Any], info: dict[str, Any] | None) -> None:
    """A part's rows and meta get the process's rank (None: the process is no rank)."""
    meta.setdefault("extra", {})["process"] = {"pid": os.getpid(), **(info or {})}
    if info is not None:
        from tbdtrace.collector.torch_dist import set_rank

        set_rank(tables, info["rank"])
        meta["ranks"] = [info["rank"]]


def _child_env(
    spool: Path, cfg: TorchConfig, steps_file: Path, backend: str = "torch"
) -> dict[str, str]:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(BOOTSTRAP_DIR) + (os.pathsep + old if old else "")
    if backend == "torch":
        env[SPOOL_ENV] = str(spool)
    else:  # tf, mxnet, auto: started on the framework's import (framework_child)
        env.pop(SPOOL_ENV, None)
        env["TBDTRACE_FRAMEWORK_SPOOL"] = str(spool)
        env["TBDTRACE_FRAMEWORK"] = backend
        # Complete CPU allocator totals for the memory sampler (tf_backend docstring).
        env.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
    env[CONFIG_ENV] = json.dumps({k: getattr(cfg, k) for k in cfg.__dataclass_fields__})
    env["TBDTRACE_PACKAGE_ROOT"] = str(Path(__file__).resolve().parents[2])
    env[STEPS_FILE_ENV] = str(steps_file)
    return env


def read_steps(path: Path) -> dict[str, list[Any]]:
    """``steps`` columns from the harness steps file (JSON lines; see workloads/harness.py)."""
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "step",
            "start_ns",
            "end_ns",
            "pid",
            "rank",
            "samples",
            "warmup",
            "loss",
            "source",
        )
    }
    if not path.exists():
        return cols
    text = path.read_text(errors="replace")
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            vals = [int(r[k]) for k in ("step", "start_ns", "end_ns")]
        except (ValueError, KeyError, TypeError) as e:
            if n == len(lines) and not text.endswith("\n"):
                break  # the last record, torn by a process killed while writing it
            raise TraceError(
                f"{path}:{n}: bad steps record ({e}); the workload harness "
                "writes one JSON object per line"
            ) from e
        for k, v in zip(("step", "start_ns", "end_ns"), vals, strict=True):
            cols[k].append(v)
        cols["pid"].append(r.get("pid"))
        cols["rank"].append(r.get("rank"))
        cols["samples"].append(r.get("samples"))
        cols["warmup"].append(r.get("warmup"))
        cols["loss"].append(r.get("loss"))
        cols["source"].append("harness")
    return cols


def _process(meta: dict[str, Any]) -> dict[str, Any]:
    return dict((meta.get("extra") or {}).get("process") or {})


def _assemble(parts: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One trace from the parts. When some processes are ranks (torch_dist), the parts of
    processes that are not (the torchrun agent, a spawning parent) are left out of the
    tables and listed in ``meta.extra.parts`` with ``rank`` null."""
    tables: dict[str, list[pa.Table]] = {}
    metas = [trace.open(p).meta for p in parts]
    procs = [_process(m) for m in metas]
    ranked = any(pr.get("rank") is not None for pr in procs)
    for p, pr in zip(parts, procs, strict=True):
        if ranked and pr.get("rank") is None:
            continue
        tr = trace.open(p)
        for name in _names(p):
            tables.setdefault(name, []).append(tr.table(name))
    out = {n: _concat(ts) for n, ts in tables.items()}
    meta: dict[str, Any] = dict(metas[0]) if metas else {"source": "torch"}
    meta["extra"] = dict(meta.get("extra") or {})
    meta["extra"].pop("process", None)
    meta["extra"]["parts"] = [
        {"dir": p.name, "start_time_ns": m.get("start_time_ns"), **pr}
        for p, m, pr in zip(parts, metas, procs, strict=True)
    ]
    if ranked:
        ranks = sorted({pr["rank"] for pr in procs if pr.get("rank") is not None})
        worlds = sorted({pr["world_size"] for pr in procs if pr.get("world_size") is not None})
        meta["ranks"] = ranks
        meta["extra"]["distributed"] = {
            "ranks": ranks,
            "world_size": worlds[0] if len(worlds) == 1 else worlds,
            "rank_of_pid": {
                str(pr["pid"]): pr["rank"] for pr in procs if pr.get("rank") is not None
            },
            "not_ranks": [pr["pid"] for pr in procs if pr.get("rank") is None and "pid" in pr],
        }
    starts = [m["start_time_ns"] for m in metas if m.get("start_time_ns") is not None]
    meta["start_time_ns"] = min(starts) if starts else None
    return out, meta


def _concat(tables: list[pa.Table]) -> pa.Table:
    """One table, one dictionary per string column (an Arrow IPC file allows only one)."""
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks()


def _names(p: Path) -> list[str]:
    return sorted(f.stem for f in p.glob(f"*{trace.TABLE_SUFFIX}"))


def profiler_log(spool: Path) -> tuple[bytes, list[str]]:
    """What the profiler printed (every process's log, in pid order) and the lines of it
    that are news to the user (not :data:`BENIGN_LOG`)."""
    chunks, news = [], []
    for f in sorted(spool.glob("profiler-*.log")):
        data = f.read_bytes()
        if data:
            chunks.append(f"== {f.name}\n".encode() + data)
        for line in data.decode(errors="replace").splitlines():
            if line.strip() and not any(b in line for b in BENIGN_LOG):
                news.append(line.strip())
    return b"".join(chunks), news


def assemble_spool(spool: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(tables, meta, notes) from what a torch-backend spool holds: the parts, the steps
    file and, when spilled, the host samples. ``notes`` say what is missing."""
    parts = sorted(p for p in spool.glob("part-*") if p.is_dir())
    started = sorted(int(f.stem.split("-", 1)[1]) for f in spool.glob("profiler-*.log"))
    tables, meta = _assemble(parts) if parts else ({}, {"source": "torch", "extra": {}})
    notes = []
    have = {int(p.name.split("-", 1)[1]) for p in parts}
    lost = [pid for pid in started if pid not in have]
    if lost:
        notes.append(
            f"no profile from process(es) {', '.join(map(str, lost))} (killed "
            "before the profiler's data was written)"
        )
    meta["extra"]["profiled_pids"] = started
    steps = read_steps(spool / STEPS_NAME)
    dist = meta["extra"].get("distributed")
    if dist and steps["step"]:  # each rank's steps: its own rank, else its pid's
        by_pid = dist["rank_of_pid"]
        steps["rank"] = [
            r if r is not None else by_pid.get(str(p))
            for r, p in zip(steps["rank"], steps["pid"], strict=True)
        ]
    elif steps["step"]:
        del steps["rank"]
    if steps["step"]:
        tables["steps"] = _concat(
            [t for t in (tables.get("steps"), trace.to_table("steps", steps)) if t is not None]
        )
    if (spool / HOST_SPILL).exists():
        tables["host_samples"] = read_spill(spool / HOST_SPILL)
    return tables, meta, notes


_NEEDS = {"tf": "tensorflow", "auto": "torch, tensorflow or mxnet"}


@dataclass
class Result:
    """What a capture wrote and how the command ended."""

    path: Path | None  # the trace directory
    outcome: supervise.Outcome
    partial: str | None = None  # why the trace is partial, or None
    notes: list[str] = field(default_factory=list)  # one-line remarks for the user
    steps: int = 0  # harness steps in the trace
    spool_kept: Path | None = None  # spool left in place (processes still running)


def _remove_spool(spool: Path, pgid: int) -> Path | None:
    """Remove ``spool`` unless a process of the command's group may still write it."""
    for _ in range(100):  # processes of the group that are exiting right now (5 s at most)
        if not supervise.group_alive(pgid) and not supervise.spool_writers(spool):
            shutil.rmtree(spool, ignore_errors=True)
            return None
        time.sleep(0.05)
    return spool


def _apply_test_clock_shift(tables: dict[str, Any], meta: dict[str, Any]) -> None:
    """Test-only: this node's clock reads ``TBDTRACE_TEST_CLOCK_SHIFT_NS`` ahead
    (:mod:`.clock`), so every time the capture writes is shifted by it."""
    from tbdtrace.collector import clock

    delta = clock.shift_ns()
    if not delta:
        return
    clock.shift_tables(tables, delta)
    if meta.get("start_time_ns") is not None:
        meta["start_time_ns"] += delta
    meta["extra"]["test_clock_shift_ns"] = delta


def write_or_keep_spool(
    out: Path,
    tables: dict[str, Any],
    meta: dict[str, Any],
    spool: Path,
    files: dict[str, bytes] | None = None,
) -> Path:
    """``trace.write`` of a capture; when it fails, the spool stays and the one line says
    how to recover it."""
    try:
        return trace.write(out, tables, meta, files=files)
    except (OSError, TraceError) as e:
        what = outdir.describe_os_error(e) if isinstance(e, OSError) else str(e)
        raise TraceError(
            f"{what} (the capture's spool is kept at {spool}: "
            f"`tbdtrace recover {spool} --out DIR` writes it elsewhere)"
        ) from None


def release_spool(res: Result, spool: Path) -> None:
    """Remove the capture's spool once no process of the command can write it; else keep
    it and say so in ``res.notes``."""
    res.spool_kept = _remove_spool(spool, res.outcome.pid)
    if res.spool_kept is not None:
        res.notes.append(
            f"processes of the command still run; their spool is kept at "
            f"{spool} (`tbdtrace recover` reads it once they end)"
        )


def run_capture(
    command: Sequence[str],
    out: outdir.Output,
    torch_config: TorchConfig | None = None,
    sampler: SamplerConfig | None = None,
    reason: str = "requested",
    backend: str = "torch",
) -> Result:
    """Run ``command`` under ``backend`` into the claimed output ``out``: ``torch``
    (torch.profiler from the start), ``tf`` or ``mxnet`` (the framework's profiler from
    its import, :mod:`.framework_child`), or ``auto`` (whichever framework the program
    imports first)."""
    torch_config = torch_config or TorchConfig()
    sampler = sampler or SamplerConfig()
    # Unique even beside a spool a crashed capture with the same pid left (never reused).
    spool = Path(tempfile.mkdtemp(prefix=f"{outdir.SPOOL_PREFIX}{os.getpid()}-", dir=out.path))
    os.chmod(spool, outdir.dir_mode())
    info = {
        "backend": backend,
        "command": list(command),
        "out": str(out.path),
        "tbdtrace_pid": os.getpid(),
        "started_ns": time.time_ns(),
        "backend_choice": reason,
        "sample_hz": sampler.rate_hz,
    }
    (spool / SPOOL_INFO).write_text(json.dumps(info, indent=2) + "\n")
    env = _child_env(spool, torch_config, spool / STEPS_NAME, backend)
    holder: dict[str, HostSampler] = {}

    def start_sampler(pid: int) -> None:
        holder["hs"] = HostSampler(sampler, pid=pid, spill=spool / HOST_SPILL)
        holder["hs"].start()

    try:
        outcome = supervise.run(command, env, on_start=start_sampler)
    except TraceError:
        shutil.rmtree(spool, ignore_errors=True)
        raise
    hs = holder["hs"]
    samples = hs.stop()
    stop = outcome.stop_reason()
    try:
        tables, meta, notes = assemble_spool(spool)
    except TraceError as e:
        raise TraceError(
            f"{e} (the capture's spool is kept at {spool}; after fixing it, "
            f"`tbdtrace recover {spool} --out DIR`)"
        ) from None
    if not meta["extra"]["profiled_pids"] and stop is None:
        _remove_spool(spool, outcome.pid)  # kept while a process of the command runs
        what = "without a GPU, capture" if backend == "auto" else f"--backend {backend}"
        raise TraceError(
            f"{command[0]}: the command wrote no profile (exit code {outcome.exit_code}); "
            f"{what} needs a Python program that imports {_NEEDS.get(backend, backend)}"
        )
    tables["host_samples"] = samples
    _apply_test_clock_shift(tables, meta)
    log, news = profiler_log(spool)
    partial = "; ".join(x for x in (stop, *notes) if x) or None
    meta.update(
        backend=meta.get("backend") or backend,
        host=socket.gethostname(),
        command=list(command),
        partial=partial is not None,
    )
    meta["extra"].update(
        backend_choice=reason,
        exit_code=outcome.exit_code,
        cpu=cpuinfo.describe(),
        host_sampler={"rate_hz": sampler.rate_hz, "nvml": hs.nvml_status, "pid": outcome.pid},
    )
    if partial:
        meta["extra"]["partial"] = partial
    path = write_or_keep_spool(out.path, tables, meta, spool, {CAPTURE_LOG: log} if log else None)
    res = Result(path, outcome, partial, [], len(tables["steps"]) if "steps" in tables else 0)
    if news:
        res.notes.append(
            f"the profiler printed {len(news)} message(s), first: "
            f"{news[0][:120]!r}; all in {path / CAPTURE_LOG}"
        )
    release_spool(res, spool)
    return res


def capture_command(
    command: Sequence[str],
    out: str | os.PathLike[str],
    torch_config: TorchConfig | None = None,
    sampler: SamplerConfig | None = None,
    reason: str = "requested",
    force: bool = True,
) -> tuple[Path, int]:
    """Run ``command`` under the torch backend into ``out``; returns (trace dir, exit code
    of the command, 128 + N when signal N killed it). ``force``: replace a trace there."""
    with outdir.claim(out, force=force) as claimed:
        res = run_capture(command, claimed, torch_config, sampler, reason)
    assert res.path is not None
    return res.path, res.outcome.exit_code
