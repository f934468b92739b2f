"""Label PyTorch allocations after the fact: ``--torch-memory posthoc`` (the default).

Nothing runs per operator or per tensor while training. What the labeller reads:

* the allocator's blocks (``memory`` rows: the CUDA caching allocator's history, or
  torch.profiler's memory events on the CPU), paired into blocks [alloc, free);
* :class:`Snapshots`: the addresses of parameters and module buffers (weights), ``.grad``
  (gradients) and optimizer state, read at most once per step boundary (the end of each
  ``optimizer.step()``) and at the capture's start and stop
  (:mod:`.torch_snapshots`);
* the iterations of :mod:`.phases` (steps, and backward from the launching threads or
  the profiler's backward ops).

Rules, first match wins (a block is one allocation's life; *a* its alloc, *f* its free,
never freed counts as after everything):

1. a snapshot address inside the block while it is live: weights, else optimizer_state,
   else gradients (the order of :data:`~.matching.PRIORITY`);
2. allocated in an iteration's backward and still live when the optimizer phase begins
   (freed at the next ``zero_grad``, or never): gradients, unless a snapshot was taken
   while it was live (and did not name it);
3. allocated in the optimizer phase and live after the iteration ends: optimizer_state,
   with the same exception;
4. allocated in the forward (the step's start to backward) and freed during that
   iteration's backward: activations (what autograd saved and released);
5. allocated outside every iteration (before the first step, between steps) and still
   live when the next backward begins, or allocated in a step before its forward's
   compute begins (its first activation's allocation; without one, its first work) and
   live after that step's backward: inputs (the data the step read);
6. the rest: other, i.e. temporaries and workspace (allocated and freed within one phase,
   the loss, handles' workspaces); ``workspace`` where the trace's ops show the block
   inside one operator (:mod:`.workspace`).

Rules 2 and 3 are checked against the snapshots wherever a snapshot was taken while the
block was live; the agreement is in the statistics (``structural_check``).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.analysis.engine.memory_blocks import INT64_MAX, INT64_MIN, Blocks, pair
from tbdtrace.collector.memory import workspace
from tbdtrace.collector.memory.matching import PRIORITY
from tbdtrace.collector.memory.phases import Iterations

I64 = npt.NDArray[np.int64]
WEIGHTS, OPTIMIZER_STATE, GRADIENTS, INPUTS, ACTIVATIONS = range(5)
OTHER = len(PRIORITY)
NAMES = (*PRIORITY, "other")

# What post-hoc labels cannot tell apart (docs/MEMORY.md "Post hoc and exact"): written
# to meta.extra.torch_memory and shown in the report's memory section.
CANNOT_TELL_APART = (
    "activations vs forward temporaries that the program keeps alive into backward, and "
    "tensors saved for backward that outlive it (retain_graph, a graph held by the "
    "program): an allocation from the forward counts as an activation only when the "
    "backward frees it",
    "inputs vs other tensors made before the step and kept through it (a data pool, a "
    "held-out set, an EMA copy): all count as inputs; a batch made or transformed inside "
    "the step after its first kernel counts as other (or as an activation when only "
    "autograd keeps it)",
    "weights reallocated between snapshots, and parameters gathered per step (FSDP), "
    "count as temporaries or activations",
    "CUDA-graph private pools during replay are invisible to the allocator history",
)


@dataclass
class Snapshots:
    """Addresses of live framework tensors, one entry per tensor and sighting."""

    ts_ns: I64  # when it was read (CLOCK_REALTIME, the trace clock)
    address: I64  # the tensor's data pointer, as int64 bit pattern
    category: I64  # WEIGHTS, OPTIMIZER_STATE or GRADIENTS

    @classmethod
    def empty(cls) -> Snapshots:
        z = np.zeros(0, np.int64)
        return cls(z, z.copy(), z.copy())

    def __len__(self) -> int:
        return int(self.ts_ns.size)

    def times(self) -> I64:
        """The distinct times snapshots were taken, sorted."""
        return np.unique(self.ts_ns)

    def to_json(self) -> bytes:
        cols = {k: getattr(self, k).tolist() for k in ("ts_ns", "address", "category")}
        return json.dumps(cols, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Snapshots:
        cols = json.loads(data)
        return cls(*(np.asarray(cols[k], dtype=np.int64) for k in ("ts_ns", "address", "category")))


def _as_int64(addr: int) -> int:
    return int(np.uint64(addr).view(np.int64)) if addr >= 1 << 63 else int(addr)


def match_snapshots(blocks: Blocks, sel: I64, snaps: Snapshots, tol_ns: int) -> I64:
    """Per block (of ``sel``, indices into ``blocks``): the best snapshot category inside
    it while it was live, OTHER where none.

    A tensor's pointer is at its block's start (one storage per block) or, for a view
    (a DDP bucket's ``.grad`` views), inside it: exact addresses are looked up first,
    the rest by containment among the blocks live at that moment.
    """
    cat = np.full(len(blocks), OTHER, dtype=np.int64)
    if not len(snaps) or not sel.size:
        return cat
    a, f, addr = blocks.alloc_ts_ns, blocks.free_ts_ns, blocks.address
    index: dict[int, list[int]] = {}
    for b in sel[np.argsort(a[sel], kind="stable")].tolist():
        index.setdefault(int(addr[b]), []).append(b)
    starts = {k: [int(a[b]) for b in v] for k, v in index.items()}
    missed = []
    for i in range(len(snaps)):
        t, p, c = int(snaps.ts_ns[i]), int(snaps.address[i]), int(snaps.category[i])
        bl = index.get(p)
        best = -1
        if bl:
            j = bisect.bisect_right(starts[p], t + tol_ns) - 1
            while j >= 0 and f[bl[j]] >= t - tol_ns:
                if a[bl[j]] <= t < f[bl[j]]:
                    best = bl[j]
                    break
                if best < 0:
                    best = bl[j]  # the latest block near t, in case none contains it
                j -= 1
        if best >= 0:
            cat[best] = min(cat[best], c)
        else:
            missed.append(i)
    if missed:
        _contained(cat, blocks, sel, snaps, np.asarray(missed, dtype=np.int64))
    return cat


def _contained(cat: I64, blocks: Blocks, sel: I64, snaps: Snapshots, idx: I64) -> None:
    """Snapshot entries ``idx`` by containment: per snapshot time, among the blocks live
    then (which never overlap), the one whose [address, address + bytes) holds it."""
    a, f = blocks.alloc_ts_ns[sel], blocks.free_ts_ns[sel]
    for t in np.unique(snaps.ts_ns[idx]):
        live = sel[(a <= t) & (f > t)]
        if not live.size:
            continue
        live = live[np.argsort(blocks.address[live], kind="stable")]
        lo = blocks.address[live]
        hi = lo + blocks.bytes[live]
        here = idx[snaps.ts_ns[idx] == t]
        p = snaps.address[here]
        j = np.searchsorted(lo, p, side="right") - 1
        ok = (j >= 0) & (p < hi[np.maximum(j, 0)])
        for b, c in zip(live[j[ok]], snaps.category[here][ok], strict=True):
            cat[b] = min(cat[b], int(c))


def structural(blocks: Blocks, sel: I64, its: Iterations, margin_ns: int = 0) -> I64:
    """Per block (of ``sel``): the category rules 2-6 give from its life and the phases
    (OTHER where none applies, and for blocks allocated before the capture)."""
    cat = np.full(len(blocks), OTHER, dtype=np.int64)
    n = len(its)
    if not n or not sel.size:
        return cat
    a, f = blocks.alloc_ts_ns[sel], blocks.free_ts_ns[sel]
    known = a != INT64_MIN
    i = np.searchsorted(its.start_ns, a, side="right") - 1
    ic = np.maximum(i, 0)
    inside = known & (i >= 0) & (a < its.end_ns[ic])
    fwd = inside & (a < its.bwd_start_ns[ic])
    bwd = inside & ~fwd & (a <= its.bwd_end_ns[ic])
    opt = inside & ~fwd & ~bwd
    freed_in_bwd = (f >= its.bwd_start_ns[ic]) & (f <= its.bwd_end_ns[ic] + margin_ns)
    after_bwd = f > its.bwd_end_ns[ic] + margin_ns
    out = np.full(sel.size, OTHER, dtype=np.int64)
    out[bwd & (f >= its.opt_start_ns[ic])] = GRADIENTS
    out[opt & (f >= its.end_ns[ic])] = OPTIMIZER_STATE
    act = fwd & freed_in_bwd
    out[act] = ACTIVATIONS
    # The forward's compute begins with its first activation (a CPU trace's first op may
    # be the batch's making), else with the iteration's first forward work.
    begin = np.full(n, INT64_MAX, dtype=np.int64)
    np.minimum.at(begin, i[act], a[act])
    begin = np.where(begin == INT64_MAX, its.work_ns, begin)
    out[fwd & ~act & (a < begin[ic]) & after_bwd] = INPUTS
    # Outside every iteration: data when it lives into the next backward.
    nxt = np.searchsorted(its.bwd_start_ns, a, side="right")
    outside = known & ~inside & (nxt < n)
    out[outside & (f > its.bwd_start_ns[np.minimum(nxt, n - 1)])] = INPUTS
    cat[sel] = out
    return cat


def _alive_at_any(blocks: Blocks, sel: I64, times: I64) -> npt.NDArray[np.bool_]:
    """Per block of ``sel``: was some snapshot taken while it was live?"""
    lo = np.searchsorted(times, blocks.alloc_ts_ns[sel], side="left")
    hi = np.searchsorted(times, blocks.free_ts_ns[sel], side="left")
    return hi > lo


def _check(
    blocks: Blocks, sel: I64, snap: I64, struct: I64, times: I64
) -> dict[str, dict[str, int]]:
    """Rules 2 and 3 against the snapshots, over the blocks a snapshot could have seen:
    blocks and bytes either source calls gradients / optimizer_state, and where both
    agree."""
    seen = sel[_alive_at_any(blocks, sel, times)] if times.size else sel[:0]
    out = {}
    for code in (GRADIENTS, OPTIMIZER_STATE):
        either = seen[(snap[seen] == code) | (struct[seen] == code)]
        both = either[(snap[either] == code) & (struct[either] == code)]
        out[PRIORITY[code]] = {
            "blocks": int(either.size),
            "agree_blocks": int(both.size),
            "bytes": int(blocks.bytes[either].sum()),
            "agree_bytes": int(blocks.bytes[both].sum()),
        }
    return out


def label_blocks(
    blocks: Blocks, sel: I64, snaps: Snapshots, its: Iterations, resolution_ns: int = 1
) -> tuple[I64, dict[str, Any]]:
    """Category code per block (OTHER outside ``sel``) and statistics.

    Args:
        blocks: the memory table's blocks (:func:`tbdtrace.analysis.engine.memory_blocks.pair`).
        sel: the blocks to label (allocated level, with an address).
        snaps: step-boundary snapshots.
        its: the process's iterations.
        resolution_ns: the clock step of the memory rows (1000 for the CUDA allocator's
            microsecond history): the slack when a snapshot or a free sits at an edge.
    """
    snap = match_snapshots(blocks, sel, snaps, resolution_ns)
    struct = structural(blocks, sel, its, resolution_ns)
    cat = np.where(snap < OTHER, snap, struct)
    # A block a snapshot saw live without naming it is no gradient or state then: the
    # structure speaks for those only where no snapshot was taken in their life
    # (docs/DECISIONS.md 144).
    seen = np.zeros(len(blocks), dtype=bool)
    seen[sel] = _alive_at_any(blocks, sel, snaps.times())
    cat[seen & (snap == OTHER) & ((struct == GRADIENTS) | (struct == OPTIMIZER_STATE))] = OTHER
    stats: dict[str, Any] = {
        "iterations": len(its),
        "phase_source": its.source,
        "steps": its.steps,
        "snapshot_times": int(snaps.times().size),
        "snapshot_tensors": len(snaps),
        "blocks": int(sel.size),
        "from_snapshots": int(np.count_nonzero(snap[sel] < OTHER)),
        "structural_check": _check(blocks, sel, snap, struct, snaps.times()),
    }
    return cat, stats


def label(
    mem: pa.Table,
    snaps: Snapshots,
    its: Iterations,
    ops: pa.Table | Mapping[str, Any] | None = None,
    resolution_ns: int = 1,
) -> tuple[pa.Table, dict[str, Any]]:
    """``mem`` (one process's ``memory`` table) with ``category`` set on every
    allocated-level row that has none, sorted by ts_ns; and the labeller's statistics.

    Rows that carry a category keep it (the start-of-capture rows, labelled from the live
    objects then). ``ops`` (the trace's ops table, optional) turns ``other`` blocks that
    live inside one operator into ``workspace``.
    """
    blocks = pair(mem)
    level = np.array([k[0] == "allocated" for k in blocks.group_keys] or [False], dtype=bool)
    sel = (
        np.flatnonzero(level[blocks.group] & (blocks.address != -1))
        if len(blocks)
        else np.zeros(0, np.int64)
    )
    cat, stats = label_blocks(blocks, sel, snaps, its, resolution_ns)
    if ops is not None and not isinstance(ops, pa.Table):
        ops = trace_io.to_table("ops", ops)
    names = np.array([*NAMES, "workspace", None], dtype=object)
    code = cat.copy()
    if ops is not None:
        ws = workspace.inside_one_op(mem, blocks, ops)
        code[(code == OTHER) & ws] = OTHER + 1
    row_code = np.full(mem.num_rows, OTHER + 2, dtype=np.int64)  # None: not labelled here
    for rows in (blocks.alloc_row[sel], blocks.free_row[sel]):
        ok = rows >= 0
        row_code[rows[ok]] = code[sel][ok]
    have = np.array(mem.column("category").to_pylist(), dtype=object)
    final = np.where(have != None, have, names[row_code]).tolist()  # noqa: E711
    out = mem.set_column(
        mem.schema.get_field_index("category"),
        "category",
        trace_io.to_table("memory", {"category": final}, num_rows=mem.num_rows).column("category"),
    )
    counts: dict[str, int] = {}
    for c in final:
        if c is not None:
            counts[c] = counts.get(c, 0) + 1
    stats["rows_by_category"] = dict(sorted(counts.items()))
    return out.sort_by([("ts_ns", "ascending")]), stats


__all__ = [
    "CANNOT_TELL_APART",
    "NAMES",
    "Snapshots",
    "label",
    "label_blocks",
    "match_snapshots",
    "structural",
]
