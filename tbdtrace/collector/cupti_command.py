"""``tbdtrace capture --backend cupti -- COMMAND``: capture any command through injection.

The command runs with ``CUDA_INJECTION64_PATH`` set to ``libtbdtrace_inject.so`` (the
CUDA driver calls its ``InitializeInjection`` in every process that initializes CUDA,
children included, since they inherit the environment) and ``NVTX_INJECTION64_PATH`` set
to the same library, which hands NVTX to the libcupti already in the process (so NVTX
ranges reach CUPTI's MARKER records from the one CUPTI that is enabled). Each process writes
``<pid>.tbds`` in the spool directory ``<out>/.tbdtrace-spool-<pid>-*``; when the command
ends the spools, the harness steps file and the host samples become one trace. The
command's exit code is returned. SIGINT and SIGTERM are forwarded to the command's process
group (:mod:`.supervise`), whose processes then flush; a process killed outright loses
only its last spool chunk, and the trace is marked partial.

Python processes of the command also get the capture bootstrap (``sitecustomize/``) on
their PYTHONPATH: in a process that imports torch it records the caching allocator's
history and labels the tensors (``tbdtrace.collector.memory.torch_cuda``), written as
``torchmem-<pid>`` beside the spools and joined to the ``memory`` table as its
``allocated`` level (``CuptiConfig.torch_memory``; ``capture --no-torch-memory``), and
it records matmul, convolution and attention ops with shapes and FLOPs
(``tbdtrace.collector.torch_flops``), written as ``torchops-<pid>`` and joined as ``ops``
rows (``CuptiConfig.torch_flops``; ``capture --no-torch-flops``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import outdir, trace
from tbdtrace.collector import cpuinfo, merge, spool, supervise
from tbdtrace.collector.cupti_backend import (
    INJECT_LIB,
    CuptiConfig,
    check_config,
    probe,
    resolve_activities,
)
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig, read_spill
from tbdtrace.collector.memory.torch_cuda import SPOOL_ENV as TORCH_MEMORY_ENV
from tbdtrace.collector.torch_child import (
    BOOTSTRAP_DIR,
    HOST_SPILL,
    SPOOL_INFO,
    STEPS_FILE_ENV,
    STEPS_NAME,
    Result,
    read_steps,
    release_spool,
    write_or_keep_spool,
)
from tbdtrace.collector.torch_flops import SPOOL_ENV as TORCH_FLOPS_ENV
from tbdtrace.errors import TraceError


def child_env(spool_dir: Path, cfg: CuptiConfig, steps_file: Path) -> dict[str, str]:
    """The command's environment: injection paths and collector settings."""
    env = dict(os.environ)
    env.update(
        {
            "CUDA_INJECTION64_PATH": str(INJECT_LIB),
            "NVTX_INJECTION64_PATH": str(INJECT_LIB),
            "TBDTRACE_SPOOL_DIR": str(spool_dir),
            "TBDTRACE_ACTIVITIES": ",".join(resolve_activities(cfg)),
            "TBDTRACE_BUFFER_BYTES": str(cfg.buffer_bytes),
            "TBDTRACE_BUFFER_COUNT": str(cfg.buffer_count),
            "TBDTRACE_BUFFER_MAX": str(cfg.buffer_max),
            "TBDTRACE_API": cfg.api,
            "TBDTRACE_FLUSH_INTERVAL_MS": str(cfg.flush_interval_ms),
            STEPS_FILE_ENV: str(steps_file),
        }
    )
    if cfg.counters == "flops":
        from tbdtrace.collector.flops import flop_metrics

        env["TBDTRACE_COUNTER_METRICS"] = ",".join(flop_metrics())
    if cfg.torch_memory or cfg.torch_flops:
        old = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(BOOTSTRAP_DIR) + (os.pathsep + old if old else "")
        env["TBDTRACE_PACKAGE_ROOT"] = str(Path(__file__).resolve().parents[2])
    if cfg.torch_memory:
        env[TORCH_MEMORY_ENV] = str(spool_dir)
    if cfg.torch_flops:
        env[TORCH_FLOPS_ENV] = str(spool_dir)
    return env


def read_spools(spool_dir: Path) -> list[spool.Spool]:
    return [spool.read(p) for p in sorted(spool_dir.glob("*.tbds"))]


def join_torch_memory(spool_dir: Path, tables: dict[str, Any], extra: dict[str, Any]) -> None:
    """Append each ``torchmem-<pid>`` part (allocated level) to ``tables["memory"]``."""
    parts = sorted(p for p in spool_dir.glob("torchmem-*") if p.is_dir())
    if not parts:
        return
    mems, stats = [], []
    for p in parts:
        tr = trace.open(p)
        mems.append(tr.table("memory"))
        st = dict((tr.meta.get("extra") or {}).get("torch_cuda_history") or {})
        st["pid"] = int(p.name.split("-", 1)[1])
        stats.append(st)
    cupti_mem = tables.get("memory")
    if cupti_mem is not None:  # CUPTI's reserved level, as column mappings
        mems.insert(
            0, cupti_mem if isinstance(cupti_mem, pa.Table) else trace.to_table("memory", cupti_mem)
        )
    tables["memory"] = pa.concat_tables(mems).unify_dictionaries().combine_chunks()
    extra["torch_cuda_history"] = stats


def join_torch_ops(spool_dir: Path, tables: dict[str, Any], extra: dict[str, Any]) -> None:
    """Append each ``torchops-<pid>`` part (dispatch-level ops with FLOPs) to
    ``tables["ops"]``; the TF32 settings the program ran with go to
    ``extra["torch"]["allow_tf32"]`` (read by the flops pass)."""
    parts = sorted(p for p in spool_dir.glob("torchops-*") if p.is_dir())
    if not parts:
        return
    ops, stats = [], []
    rt_tids = _runtime_tids(tables.get("runtime"))
    for p in parts:
        tr = trace.open(p)
        st = dict((tr.meta.get("extra") or {}).get("torch_flops") or {})
        st["pid"] = pid = int(p.name.split("-", 1)[1])
        ops.append(_match_thread_ids(tr.table("ops"), st, rt_tids.get(pid, set())))
        stats.append(st)
        if st.get("allow_tf32"):
            extra.setdefault("torch", {})["allow_tf32"] = st["allow_tf32"]
    old = tables.get("ops")
    if old is not None:
        ops.insert(0, old if isinstance(old, pa.Table) else trace.to_table("ops", old))
    tables["ops"] = pa.concat_tables(ops).unify_dictionaries().combine_chunks()
    extra["torch_flops"] = stats


def _runtime_tids(rt: Any) -> dict[int, set[int]]:
    """pid -> the thread ids CUPTI's runtime records carry."""
    if rt is None:
        return {}
    t = rt if isinstance(rt, pa.Table) else trace.to_table("runtime", rt)
    out: dict[int, set[int]] = {}
    for pid, tid in zip(t.column("pid").to_pylist(), t.column("tid").to_pylist(), strict=True):
        if pid is not None and tid is not None:
            out.setdefault(pid, set()).add(tid)
    return out


def _match_thread_ids(ops: pa.Table, st: dict[str, Any], rt_tids: set[int]) -> pa.Table:
    """Recorded ops carry ``pthread_self()`` (32 bits), CUPTI's default thread id; where
    the process's runtime records carry the OS thread ids instead, use those, so that the
    join by time on the launching thread finds them (``st["thread_ids"]`` says which)."""
    pairs = {int(a): int(b) for a, b in st.get("threads") or []}
    if not rt_tids or rt_tids & set(pairs) or not rt_tids & set(pairs.values()):
        st["thread_ids"] = "pthread_self"
        return ops
    st["thread_ids"] = "os"
    tid = [pairs.get(t, t) for t in ops.column("tid").to_pylist()]
    i = ops.schema.get_field_index("tid")
    return ops.set_column(i, ops.schema.field(i), pa.array(tid, ops.schema.field(i).type))


def assemble_spool(spool_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tables, meta) from a CUPTI spool directory: the per-process spools (a process
    killed mid-write loses only its last chunk), the steps file, the torch memory parts
    and, when spilled, the host samples."""
    spools = read_spools(spool_dir)
    tables, meta = merge.merge(spools)
    steps = read_steps(spool_dir / STEPS_NAME)
    if steps["step"]:
        tables["steps"] = steps
    if (spool_dir / HOST_SPILL).exists():
        tables["host_samples"] = read_spill(spool_dir / HOST_SPILL)
    extra = dict(meta["extra"])
    join_torch_memory(spool_dir, tables, extra)
    join_torch_ops(spool_dir, tables, extra)
    extra["spools"] = len(spools)
    meta["extra"] = extra
    return tables, meta


def run_capture(
    command: Sequence[str],
    out: outdir.Output,
    cfg: CuptiConfig,
    sampler: SamplerConfig,
    reason: str,
    keep_spools: str | os.PathLike[str] | None = None,
) -> Result:
    """Run ``command`` under the injection library into the claimed output ``out``.

    ``keep_spools``: a directory to copy the raw spools (``<pid>.tbds``, ``torchmem-<pid>``,
    the steps file) into before they are merged, for debugging the collector; they are
    copied even when merging fails. The spool itself is ``<out>/.tbdtrace-spool-<pid>-*``,
    removed once the trace is written and no process of the command is left.
    """
    check_config(cfg)
    resolve_activities(cfg)
    if not INJECT_LIB.exists():
        raise TraceError(f"{INJECT_LIB}: injection library missing; run `make native`")
    ok, status, msg = probe()
    if not ok:
        raise TraceError(f"cupti backend: {msg}")
    spool_dir = Path(tempfile.mkdtemp(prefix=f"{outdir.SPOOL_PREFIX}{os.getpid()}-", dir=out.path))
    info = {
        "backend": "cupti",
        "command": list(command),
        "out": str(out.path),
        "tbdtrace_pid": os.getpid(),
        "started_ns": time.time_ns(),
        "backend_choice": reason,
    }
    (spool_dir / SPOOL_INFO).write_text(json.dumps(info, indent=2) + "\n")
    hs = HostSampler(sampler, spill=spool_dir / HOST_SPILL)
    hs.start()
    try:
        outcome = supervise.run(command, child_env(spool_dir, cfg, spool_dir / STEPS_NAME))
    except TraceError:
        hs.stop()
        shutil.rmtree(spool_dir, ignore_errors=True)
        raise
    samples = hs.stop()
    if keep_spools is not None:
        shutil.copytree(spool_dir, keep_spools, dirs_exist_ok=True)
    try:
        tables, meta = assemble_spool(spool_dir)
    except TraceError as e:
        raise TraceError(f"{e} (the capture's spool is kept at {spool_dir})") from None
    tables["host_samples"] = samples
    partial = outcome.stop_reason()
    extra = meta["extra"]
    extra.update(
        backend_choice=reason,
        exit_code=outcome.exit_code,
        cpu=cpuinfo.describe(),
        host_sampler={"rate_hz": sampler.rate_hz, "nvml": hs.nvml_status},
    )
    if partial:
        extra["partial"] = partial
    meta.update(
        backend="cupti",
        host=socket.gethostname(),
        command=list(command),
        extra=extra,
        partial=partial is not None,
    )
    path = write_or_keep_spool(out.path, tables, meta, spool_dir)
    steps = len(tables["steps"]["step"]) if "steps" in tables else 0
    res = Result(path, outcome, partial, [], steps)
    release_spool(res, spool_dir)
    return res


def capture_command(
    command: Sequence[str],
    out: str | os.PathLike[str],
    cfg: CuptiConfig,
    sampler: SamplerConfig,
    reason: str,
    keep_spools: str | os.PathLike[str] | None = None,
    force: bool = True,
) -> tuple[Path, int]:
    """:func:`run_capture` into ``out``; returns (trace dir, the command's exit code)."""
    with outdir.claim(out, force=force) as claimed:
        res = run_capture(command, claimed, cfg, sampler, reason, keep_spools)
    assert res.path is not None
    return res.path, res.outcome.exit_code


__all__ = [
    "INJECT_LIB",
    "assemble_spool",
    "capture_command",
    "child_env",
    "join_torch_memory",
    "join_torch_ops",
    "read_spools",
    "run_capture",
]
