"""``tbdtrace capture --backend torch -- COMMAND``: torch.profiler inside a child process.

Parent (:func:`capture_command`): starts COMMAND with the bootstrap directory
(``sitecustomize/``) first on PYTHONPATH and a spool directory in
``TBDTRACE_TORCH_SPOOL``; samples the child's process tree with the host sampler while it
runs; then assembles the trace directory from the parts the Python processes wrote, the
harness steps file (``TBDTRACE_STEPS_FILE``) and the host samples.

Child (:func:`start_in_child`, called by the bootstrap): starts the torch backend and, at
exit (atexit), writes its tables as a trace directory ``<spool>/part-<pid>``. Every Python
process started with the variables writes a part (spawned workers too); processes that
leave through ``os._exit`` (forked DataLoader workers) write none.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import trace
from tbdtrace.collector import cpuinfo
from tbdtrace.collector.host_sampler import HostSampler, SamplerConfig
from tbdtrace.collector.torch_backend import TorchBackend, TorchConfig
from tbdtrace.errors import TraceError

SPOOL_ENV = "TBDTRACE_TORCH_SPOOL"
CONFIG_ENV = "TBDTRACE_TORCH_CONFIG"
STEPS_FILE_ENV = "TBDTRACE_STEPS_FILE"
BOOTSTRAP_DIR = Path(__file__).with_name("sitecustomize")


def start_in_child() -> None:
    """Start torch.profiler in this process; write ``<spool>/part-<pid>`` at exit."""
    spool = Path(os.environ[SPOOL_ENV])
    cfg = TorchConfig(**json.loads(os.environ.get(CONFIG_ENV, "{}")))
    backend = TorchBackend(cfg)
    backend.start()

    def finish() -> None:
        tables, meta = backend.stop()
        trace.write(spool / f"part-{os.getpid()}", tables, meta)

    atexit.register(finish)


def _child_env(spool: Path, cfg: TorchConfig, steps_file: Path) -> dict[str, str]:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(BOOTSTRAP_DIR) + (os.pathsep + old if old else "")
    env[SPOOL_ENV] = str(spool)
    env[CONFIG_ENV] = json.dumps({k: getattr(cfg, k) for k in cfg.__dataclass_fields__})
    env["TBDTRACE_PACKAGE_ROOT"] = str(Path(__file__).resolve().parents[2])
    env[STEPS_FILE_ENV] = str(steps_file)
    return env


def read_steps(path: Path) -> dict[str, list[Any]]:
    """``steps`` columns from the harness steps file (JSON lines; see workloads/harness.py)."""
    cols: dict[str, list[Any]] = {
        k: [] for k in ("step", "start_ns", "end_ns", "pid", "samples", "warmup", "loss", "source")
    }
    if not path.exists():
        return cols
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            for k in ("step", "start_ns", "end_ns"):
                cols[k].append(int(r[k]))
        except (ValueError, KeyError, TypeError) as e:
            raise TraceError(
                f"{path}:{n}: bad steps record ({e}); the workload harness "
                "writes one JSON object per line"
            ) from e
        cols["pid"].append(r.get("pid"))
        cols["samples"].append(r.get("samples"))
        cols["warmup"].append(r.get("warmup"))
        cols["loss"].append(r.get("loss"))
        cols["source"].append("harness")
    return cols


def _assemble(parts: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    tables: dict[str, list[pa.Table]] = {}
    metas = []
    for p in parts:
        tr = trace.open(p)
        metas.append(tr.meta)
        for name in _names(p):
            tables.setdefault(name, []).append(tr.table(name))
    out = {n: _concat(ts) for n, ts in tables.items()}
    meta: dict[str, Any] = dict(metas[0]) if metas else {"source": "torch"}
    meta["extra"] = dict(meta.get("extra") or {})
    meta["extra"]["parts"] = [
        {"dir": p.name, "start_time_ns": m.get("start_time_ns")}
        for p, m in zip(parts, metas, strict=True)
    ]
    starts = [m["start_time_ns"] for m in metas if m.get("start_time_ns") is not None]
    meta["start_time_ns"] = min(starts) if starts else None
    return out, meta


def _concat(tables: list[pa.Table]) -> pa.Table:
    """One table, one dictionary per string column (an Arrow IPC file allows only one)."""
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks()


def _names(p: Path) -> list[str]:
    return sorted(f.stem for f in p.glob(f"*{trace.TABLE_SUFFIX}"))


def capture_command(
    command: Sequence[str],
    out: str | os.PathLike[str],
    torch_config: TorchConfig | None = None,
    sampler: SamplerConfig | None = None,
    reason: str = "requested",
) -> tuple[Path, int]:
    """Run ``command`` under the torch backend; returns (trace dir, child exit code)."""
    torch_config = torch_config or TorchConfig()
    sampler = sampler or SamplerConfig()
    out_dir = Path(out)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tbdtrace-spool-", dir=out_dir.parent) as tmp:
        spool = Path(tmp)
        steps_file = spool / "steps.jsonl"
        try:
            child = subprocess.Popen(list(command), env=_child_env(spool, torch_config, steps_file))
        except OSError as e:
            raise TraceError(
                f"{command[0]}: cannot start ({e.strerror}); check the command after --"
            ) from e
        hs = HostSampler(sampler, pid=child.pid)
        hs.start()
        rc = child.wait()
        samples = hs.stop()
        parts = sorted(spool.glob("part-*"))
        if not parts:
            raise TraceError(
                f"{command[0]}: the command wrote no torch profile (exit code "
                f"{rc}); --backend torch needs a Python program that imports "
                "torch and exits normally"
            )
        tables, meta = _assemble(parts)
        steps = read_steps(steps_file)
        if steps["step"]:
            tables["steps"] = _concat(
                [t for t in (tables.get("steps"), trace.to_table("steps", steps)) if t is not None]
            )
        tables["host_samples"] = samples
    meta.update(backend="torch", host=socket.gethostname(), command=list(command))
    meta["extra"].update(
        backend_choice=reason,
        exit_code=rc,
        cpu=cpuinfo.describe(),
        host_sampler={"rate_hz": sampler.rate_hz, "nvml": hs.nvml_status, "pid": child.pid},
    )
    return trace.write(out_dir, tables, meta), rc
