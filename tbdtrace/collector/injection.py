"""The injection strategy (``capture --backend cupti``): the command's environment and one
trace from the spool its processes wrote.

The command runs with ``CUDA_INJECTION64_PATH`` set to ``libtbdtrace_inject.so`` (the
CUDA driver calls its ``InitializeInjection`` in every process that initializes CUDA,
children included, since they inherit the environment) and ``NVTX_INJECTION64_PATH`` set
to the same library, which hands NVTX to the libcupti already in the process (so NVTX
ranges reach CUPTI's MARKER records from the one CUPTI that is enabled). Each process writes
``<pid>.tbds`` in the spool directory; when the command ends the spools, the harness steps
file and the host samples become one trace (:mod:`.run`).

Python processes of the command also get the capture bootstrap (``sitecustomize/``) on
their PYTHONPATH: in a process that imports torch it records the caching allocator's
history and labels the tensors (``tbdtrace.collector.memory.torch_cuda``), written as
``torchmem-<pid>`` beside the spools and joined to the ``memory`` table as its
``allocated`` level (``CuptiConfig.torch_memory``; ``capture --torch-memory
posthoc|exact|off``; labelled post hoc by :func:`join_torch_memory`), and
it records matmul, convolution and attention ops with shapes and FLOPs
(``tbdtrace.collector.torch_flops``), written as ``torchops-<pid>`` and joined as ``ops``
rows (``CuptiConfig.torch_flops``; ``capture --no-torch-flops``). With capture windows
(``TBDTRACE_WINDOWS``) the collector starts paused and the bootstrap's window controller
resumes and pauses it at the windows' edges (:class:`.window_child.InjectedWindows`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import trace
from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector import merge, spool
from tbdtrace.collector.cupti_backend import CuptiConfig, resolve_activities
from tbdtrace.collector.memory.torch_cuda import join as join_torch_memory
from tbdtrace.errors import TraceError


def child_env(spool_dir: Path, cfg: CuptiConfig, env: dict[str, str]) -> None:
    """Add the injection paths and collector settings to the command's environment."""
    env.update(
        {
            proto.CUDA_INJECTION: str(proto.INJECT_LIB),
            proto.NVTX_INJECTION: str(proto.INJECT_LIB),
            proto.SPOOL_DIR: str(spool_dir),
            proto.ACTIVITIES: ",".join(resolve_activities(cfg)),
            proto.BUFFER_BYTES: str(cfg.buffer_bytes),
            proto.BUFFER_COUNT: str(cfg.buffer_count),
            proto.BUFFER_MAX: str(cfg.buffer_max),
            proto.API: cfg.api,
            proto.FLUSH_INTERVAL_MS: str(cfg.flush_interval_ms),
        }
    )
    if cfg.counters == "flops":
        from tbdtrace.collector.flops import flop_metrics

        env[proto.COUNTER_METRICS] = ",".join(flop_metrics())
    if cfg.torch_memory != "off":
        env[proto.TORCH_MEMORY_SPOOL] = str(spool_dir)
        env[proto.TORCH_MEMORY_MODE] = str(cfg.torch_memory)
    if cfg.torch_flops:
        env[proto.TORCH_FLOPS_SPOOL] = str(spool_dir)


def needs_bootstrap(cfg: CuptiConfig) -> bool:
    """Whether the command's Python processes need the bootstrap (PyTorch recorders)."""
    return cfg.torch_memory != "off" or cfg.torch_flops


def read_spools(spool_dir: Path) -> list[spool.Spool]:
    return [spool.read(p) for p in sorted(spool_dir.glob(f"*{proto.CUPTI_SPOOL_SUFFIX}"))]


def join_torch_ops(spool_dir: Path, tables: dict[str, Any], extra: dict[str, Any]) -> None:
    """Append each ``torchops-<pid>`` part (dispatch-level ops with FLOPs) to
    ``tables["ops"]``; the TF32 settings the program ran with go to
    ``extra["torch"]["allow_tf32"]`` (read by the flops pass)."""
    parts = sorted(p for p in spool_dir.glob(f"{proto.TORCHOPS_PREFIX}*") if p.is_dir())
    if not parts:
        return
    ops, stats = [], []
    rt_tids = _runtime_tids(tables.get("runtime"))
    for p in parts:
        tr = trace.open(p)
        st = dict((tr.meta.get("extra") or {}).get("torch_flops") or {})
        st["pid"] = pid = proto.pid_of(p.name)
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


def assemble(spool_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tables, meta) from a CUPTI spool directory: the per-process spools (a process
    killed mid-write loses only its last chunk) and the PyTorch recorders' parts."""
    spools = read_spools(spool_dir)
    tables, meta = merge.merge(spools)
    extra = dict(meta["extra"])
    join_torch_memory(spool_dir, tables, extra)
    join_torch_ops(spool_dir, tables, extra)
    extra["spools"] = len(spools)
    meta["extra"] = extra
    return tables, meta


def check_windows(cfg: CuptiConfig) -> None:
    if cfg.counters:
        raise TraceError(
            "--counters replays kernels for the whole run; it cannot be combined with "
            "capture windows (--steps, --schedule, --on-demand)"
        )
