"""Match tensor sightings to allocation blocks and label every ``memory`` row.

Used by :mod:`tbdtrace.collector.memory.torch_classify`; pure functions of tables and sightings.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.analysis.engine.memory_blocks import Blocks, pair
from tbdtrace.collector.memory import workspace

# Category codes of sightings, best first: a block seen as several things takes the first.
PRIORITY = ("weights", "optimizer_state", "gradients", "inputs", "activations")


@dataclass
class Obs:
    """Tensors seen by the tracker, one entry per sighting (parallel lists)."""

    ptr: list[int]
    nbytes: list[int]
    ts_ns: list[int]
    cat: list[int]
    device_type: list[str]
    device_id: list[int]


def label(mem: pa.Table, obs: Obs, tol_ns: int, ops: pa.Table | None) -> pa.Table:
    """Set ``category`` on ``mem`` rows from observations, then workspace, then other.

    Rows that already carry a category keep it. Only level=allocated rows are matched
    against tensor observations (reserved blocks hold many tensors).
    """
    blocks = pair(mem)
    cat = np.full(len(blocks), len(PRIORITY), dtype=np.int64)  # len = unlabelled
    _match(blocks, obs, tol_ns, cat)
    names = list(PRIORITY) + [None]
    row_cat: list[str | None] = [None] * mem.num_rows
    for b in range(len(blocks)):
        for r in (blocks.alloc_row[b], blocks.free_row[b]):
            if r >= 0:
                row_cat[r] = names[cat[b]]
    ws = workspace.inside_one_op(mem, blocks, ops) if ops is not None else None
    have = mem.column("category").to_pylist()
    for b in range(len(blocks)):
        if cat[b] < len(PRIORITY):
            continue
        name = "workspace" if ws is not None and ws[b] else "other"
        for r in (blocks.alloc_row[b], blocks.free_row[b]):
            if r >= 0:
                row_cat[r] = name
    final = [h if h is not None else c for h, c in zip(have, row_cat, strict=True)]
    out = mem.set_column(
        mem.schema.get_field_index("category"),
        "category",
        trace_io.to_table("memory", {"category": final}, num_rows=mem.num_rows).column("category"),
    )
    return out.sort_by([("ts_ns", "ascending")])


def _match(blocks: Blocks, obs: Obs, tol_ns: int, cat: npt.NDArray[np.int64]) -> None:
    """Lower ``cat[b]`` to the best category observed on block ``b``.

    Per (device_type, address) the blocks are disjoint in time; an observation at ``t``
    takes the block with ``alloc <= t < free``, else the latest one within ``tol_ns``.
    """
    index: dict[tuple[str, int], list[int]] = {}
    for b in range(len(blocks)):
        level, dtype = blocks.group_keys[blocks.group[b]][:2]
        if level == "allocated" and blocks.address[b] != -1:
            index.setdefault((str(dtype), int(blocks.address[b])), []).append(b)
    a_ts, f_ts = blocks.alloc_ts_ns, blocks.free_ts_ns
    starts: dict[tuple[str, int], list[int]] = {}
    for key, blist in index.items():
        blist.sort(key=lambda x: int(a_ts[x]))
        starts[key] = [int(a_ts[x]) for x in blist]
    for i in range(len(obs.ptr)):
        key = (obs.device_type[i], int(np.uint64(obs.ptr[i]).view(np.int64)))
        bl = index.get(key)
        if not bl:
            continue
        t = obs.ts_ns[i]
        j = bisect.bisect_right(starts[key], t + tol_ns) - 1
        best = -1
        while j >= 0 and f_ts[bl[j]] >= t - tol_ns:
            if a_ts[bl[j]] <= t < f_ts[bl[j]]:
                best = bl[j]
                break
            if best < 0:
                best = bl[j]  # the latest block near t, in case none contains it
            j -= 1
        if best >= 0:
            cat[best] = min(cat[best], obs.cat[i])
