"""Ranks of distributed jobs under ``tbdtrace capture --backend torch`` (docs/DISTRIBUTED.md).

Every captured Python process writes its own part of the trace (:mod:`.profiler_child`); this
module says which rank a process is and turns the collectives the profiler saw on the host
into ``collectives`` rows.

* :func:`env_rank`: rank, local rank and world size from the launcher's environment:
  ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` (torchrun, torch.distributed.run),
  ``OMPI_COMM_WORLD_*`` (Open MPI's mpirun), ``PMI_RANK``/``PMI_SIZE`` (MPICH, Intel MPI),
  ``SLURM_PROCID``/``SLURM_LOCALID``/``SLURM_NTASKS`` (srun), first found wins.
* :func:`watch_init`: ``torch.distributed.init_process_group`` wrapped so a process that
  gets its rank as an argument (``torch.multiprocessing.spawn``) is known too; at the end
  of the capture :func:`final_rank` prefers what torch.distributed said over the
  environment. A process with neither (the torchrun agent, a launcher script) is no rank.
* :func:`host_collectives`: gloo runs each collective on one of its worker threads inside
  a ``gloo:<op>`` range (``user_annotation`` in the profiler's export); each such range is
  one row, its span both the execution (start/end) and, for want of a device, the host
  span (host_start/host_end). The profiler records no collective sequence number for
  gloo, so ranks match them by order (docs/METRICS.md "ranks"). Message elements are the
  product of the input's dims; bytes use the element type the profiler names.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import schema
from tbdtrace.importers import validate
from tbdtrace.importers.collectives import DTYPE_BYTES, normalize_op

# (rank, local rank, world size) variable names per launcher, in the order tried.
LAUNCHER_ENV = (
    ("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE"),
    ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
)
# The profiler's C++ element type names (Input type) -> c10 ScalarType names (DTYPE_BYTES).
_CPP_TYPES = {
    "float": "Float",
    "double": "Double",
    "c10::Half": "Half",
    "c10::BFloat16": "BFloat16",
    "int": "Int",
    "long int": "Long",
    "long": "Long",
    "short int": "Short",
    "signed char": "Char",
    "unsigned char": "Byte",
    "bool": "Bool",
}
# Ops whose output message is the size of their input.
_SAME_OUT = ("all_reduce", "broadcast")

_from_torch: dict[str, Any] = {}  # filled by the init_process_group wrapper
_clock: dict[str, Any] = {}  # this rank's clock offset to rank 0 (collector/clock.py)


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def env_rank(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """``{"rank", "local_rank", "world_size", "rank_source"}`` from the launcher's
    variables, None when none names a rank."""
    env = os.environ if env is None else env
    for source, rk, local, world in LAUNCHER_ENV:
        r = _int(env.get(rk))
        if r is not None:
            return {
                "rank": r,
                "local_rank": _int(env.get(local)),
                "world_size": _int(env.get(world)),
                "rank_source": f"env:{source}",
            }
    return None


def _torch_rank() -> dict[str, Any] | None:
    import sys

    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return {
                "rank": int(dist.get_rank()),
                "world_size": int(dist.get_world_size()),
                "rank_source": "torch.distributed",
            }
    except Exception:  # noqa: BLE001 - a broken group is no reason to lose the profile
        return None
    return None


def watch_init() -> None:
    """Record rank and world size once the program's init_process_group returns."""
    try:
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
    except ImportError:
        return
    if not dist.is_available() or getattr(c10d.init_process_group, "_tbdtrace", False):
        return
    orig = c10d.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        found = _torch_rank()
        if found:
            _from_torch.update(found)
            _measure_clock(found)
        return out

    init_process_group._tbdtrace = True  # type: ignore[attr-defined]
    init_process_group.__wrapped__ = orig  # type: ignore[attr-defined]
    init_process_group.__doc__ = orig.__doc__
    c10d.init_process_group = init_process_group
    dist.init_process_group = init_process_group


def _measure_clock(found: dict[str, Any]) -> None:
    """Measure this rank's clock offset to rank 0 through the rendezvous store (every rank
    does, right after init_process_group: rank 0 answers the others)."""
    from tbdtrace.collector import clock

    try:
        import torch.distributed.distributed_c10d as c10d

        store = c10d._get_default_store()
    except Exception as e:  # noqa: BLE001 - no store: the offset stays unknown
        _clock.update(method=clock.METHOD, offset_ns=None, error=f"no store: {e}"[:200])
        return
    _clock.update(clock.measure(store, found["rank"], found["world_size"]))


def final_rank() -> dict[str, Any] | None:
    """This process's rank at the end of the capture: torch.distributed's (now, or when
    the group was initialized) over the launcher's environment; None when not a rank."""
    env = env_rank()
    found = _torch_rank() or (dict(_from_torch) if _from_torch else None)
    if found is None:
        return env
    if env is not None and env.get("local_rank") is not None:
        found.setdefault("local_rank", env["local_rank"])
    if _clock:
        found["clock"] = dict(_clock)
    return found


def set_rank(tables: dict[str, Any], rank: int) -> None:
    """Put ``rank`` in the rank column of every table of ``tables`` that has one (column
    mappings or Arrow tables, edited in place)."""
    for name, t in list(tables.items()):
        try:
            decl = schema.table(name)
        except KeyError:
            continue
        if "rank" not in decl.column_names:
            continue
        if isinstance(t, pa.Table):
            col = pa.array([rank] * t.num_rows, pa.int32())
            i = t.schema.get_field_index("rank")
            tables[name] = t.set_column(i, "rank", col) if i >= 0 else t.append_column("rank", col)
        elif t:
            n = len(next(iter(t.values())))
            t["rank"] = [rank] * n


def _elements(dims: Any) -> int | None:
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
        return None
    if not all(isinstance(d, int) for d in dims[0]):
        return None
    return math.prod(dims[0])


def host_collectives(chrome_trace: Path) -> dict[str, list[Any]] | None:
    """``collectives`` columns from the ``gloo:<op>`` ranges of a torch.profiler Chrome
    export (module docstring); None when there are none."""
    raw = Path(chrome_trace).read_bytes()
    if b'"gloo:' not in raw:  # every gloo range's name is the JSON string "gloo:<op>"
        return None
    doc = json.loads(raw.decode("utf-8", errors="replace"), parse_float=str)  # exact times
    base = doc.get("baseTimeNanoseconds")
    rows = []
    for ev in doc.get("traceEvents") or []:
        name = ev.get("name")
        if ev.get("ph") != "X" or not isinstance(name, str) or not name.startswith("gloo:"):
            continue
        ts = validate.us_to_ns_checked(ev.get("ts"))
        dur = validate.us_to_ns_checked(ev.get("dur"))
        if isinstance(ts, str) or isinstance(dur, str) or dur < 0:
            continue  # what the importer skips too (validate's reasons)
        rows.append((ts, dur, name, ev.get("args") or {}))
    if not rows:
        return None
    # Times as the Kineto importer makes them: the file's base + the event's microseconds.
    off = base if isinstance(base, int) else 0
    rows.sort(key=lambda r: r[0])
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "start_ns",
            "end_ns",
            "op",
            "collective_name",
            "dtype",
            "in_elements",
            "out_elements",
            "in_bytes",
            "out_bytes",
            "host_start_ns",
            "host_end_ns",
        )
    }
    for ts, dur, name, args in rows:
        start = ts + off
        end = start + dur
        op = normalize_op(name.split(":", 1)[1])
        types = args.get("Input type")
        dtype = _CPP_TYPES.get(types[0]) if isinstance(types, list) and types else None
        n = _elements(args.get("Input Dims"))
        size = DTYPE_BYTES.get(dtype) if dtype else None
        nbytes = n * size if n is not None and size is not None else None
        cols["start_ns"].append(start)
        cols["end_ns"].append(end)
        cols["op"].append(op)
        cols["collective_name"].append(name)
        cols["dtype"].append(dtype)
        cols["in_elements"].append(n)
        cols["in_bytes"].append(nbytes)
        cols["out_elements"].append(n if op in _SAME_OUT else None)
        cols["out_bytes"].append(nbytes if op in _SAME_OUT else None)
        cols["host_start_ns"].append(start)
        cols["host_end_ns"].append(end)
    return cols
