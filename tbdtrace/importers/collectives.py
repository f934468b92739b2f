"""The ``collectives`` table from Kineto's collective kernels, shared by both Kineto paths.

A kernel is a collective when its args name one (``Collective name``, written by PyTorch
since about 2.1) or when its name is an NCCL/RCCL kernel's (``ncclKernel_*``,
``ncclDevKernel_*``); the op then comes from the name (``ncclKernel_AllReduce_RING_LL...``
-> all_reduce). Message bytes are elements x the dtype's size (null when the dtype is not
one of :data:`DTYPE_BYTES`). The host op that issued it (``record_param_comms``,
``nccl:*``, ``c10d::*``) is found by (rank, external id); its span fills host_start_ns /
host_end_ns (the outermost when several match).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.importers.columns import int_array, str_array

# Per-kernel args the importers keep: staging column -> Kineto arg key.
ARGS = {
    "coll_name": "Collective name",
    "coll_in_nelems": "In msg nelems",
    "coll_out_nelems": "Out msg nelems",
    "coll_group_size": "Group size",
    "coll_dtype": "dtype",
    "coll_pg_name": "Process Group Name",
    "coll_seq": "Seq",
}
STR_ARGS = ("coll_name", "coll_dtype", "coll_pg_name")

# c10 ScalarType names as Kineto writes them -> bytes per element.
DTYPE_BYTES = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "ComplexHalf": 4,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
}

_KERNEL_RE = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
# Normalized (lower case, no underscores) name fragments -> op, first match wins.
_OPS = (
    ("allreduce", "all_reduce"),
    ("reducescatter", "reduce_scatter"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("barrier", "barrier"),
    ("sendrecv", "other"),  # NCCL's SendRecv kernel serves send, recv and all_to_all
    ("send", "send"),
    ("recv", "recv"),
)
_HOST_OP_RE = re.compile(r"^(record_param_comms$|nccl:|c10d::|gloo:)")


def normalize_op(text: str | None) -> str:
    """A collective name (``allreduce``, ``_allgather_base``, ``AllReduce``...) -> one of
    schema.COLLECTIVE_OPS."""
    key = (text or "").lower().replace("_", "")
    return next((op for frag, op in _OPS if frag in key), "other")


def kernel_op(name: str) -> str | None:
    """The op of an NCCL/RCCL kernel name; None when the name is not one."""
    m = _KERNEL_RE.match(name)
    return normalize_op(m.group(1)) if m else None


def _distinct(arr: pa.Array) -> tuple[np.ndarray, list[Any]]:
    """(per-row index into distinct values, the values); null rows get -1."""
    d = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    if d.indices.null_count == 0:  # the indices as they are (int32), no filled copy
        return d.indices.to_numpy(), d.dictionary.to_pylist()
    idx = d.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return idx, d.dictionary.to_pylist()


def _ints(arr: pa.Array | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, valid) of an integer column (absent: all null)."""
    if arr is None:
        return np.zeros(n, np.int64), np.zeros(n, bool)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), valid


def from_kernels(
    kern: dict[str, pa.Array], args: dict[str, pa.Array | None], ops: dict[str, pa.Array] | None
) -> dict[str, pa.Array] | None:
    """Collective rows of the kernels table ``kern`` (its columns), ``args`` the
    per-kernel-row arg columns of :data:`ARGS` (None: absent); ``ops`` the ops table's
    columns for the host join. None when no kernel is a collective."""
    n = len(kern["start_ns"])
    # Each row's op as a code into OP_NAMES (-1: none), looked up once per distinct
    # name: no string per row (1M kernels: ~40 ms of object arrays).
    name_idx, names = _distinct(kern["name"])
    name_lut = [kernel_op(str(x)) if x is not None else None for x in names]
    op_code = _op_codes(name_lut)[name_idx]
    coll = args.get("coll_name")
    if coll is not None and coll.null_count < len(coll):
        cidx, cnames = _distinct(coll)
        arg_code = _op_codes([normalize_op(str(c)) for c in cnames])[cidx]
        op_code = np.where(arg_code >= 0, arg_code, op_code)
    keep = np.flatnonzero(op_code >= 0)
    if not len(keep):
        return None
    take = int_array(keep, pa.int64())
    out: dict[str, pa.Array] = {
        c: kern[c].take(take)
        for c in (
            "start_ns",
            "end_ns",
            "device_id",
            "stream_id",
            "correlation_id",
            "external_id",
            "rank",
        )
        if c in kern
    }
    out["op"] = _encoded_codes(op_code[keep])
    for src, dst in (
        ("coll_name", "collective_name"),
        ("coll_pg_name", "process_group"),
        ("coll_dtype", "dtype"),
    ):
        a = args.get(src)
        if a is not None:
            a = a.take(take)
            out[dst] = a if pa.types.is_dictionary(a.type) else pc.dictionary_encode(a)
    seq, seq_ok = _ints(args.get("coll_seq"), n)
    out["sequence_number"] = int_array(seq[keep], pa.int64(), ~seq_ok[keep])
    size = _dtype_sizes(args.get("coll_dtype"), n)[keep]
    for src, elems_col, bytes_col in (
        ("coll_in_nelems", "in_elements", "in_bytes"),
        ("coll_out_nelems", "out_elements", "out_bytes"),
    ):
        v, ok = _ints(args.get(src), n)
        v, ok = v[keep], ok[keep]
        out[elems_col] = int_array(v, pa.int64(), ~ok)
        out[bytes_col] = int_array(v * np.maximum(size, 0), pa.int64(), ~ok | (size < 0))
    g, g_ok = _ints(args.get("coll_group_size"), n)
    out["group_size"] = int_array(g[keep], pa.int32(), ~g_ok[keep])
    hs, he = _host_spans(out, ops)
    out["host_start_ns"] = int_array(hs, pa.int64(), hs == _NONE)
    out["host_end_ns"] = int_array(he, pa.int64(), hs == _NONE)
    return out


_NONE = np.iinfo(np.int64).min
# The ops a collective can have (normalize_op's values), in a fixed order: the codes of
# from_kernels.
OP_NAMES = tuple(dict.fromkeys([op for _, op in _OPS] + ["other"]))
_OP_CODE = {op: i for i, op in enumerate(OP_NAMES)}


def _op_codes(ops: list[str | None]) -> np.ndarray:
    """Per distinct value, its op's code in OP_NAMES; then -1 (a null row's index -1
    reads the last entry)."""
    return np.array([_OP_CODE[o] if o else -1 for o in ops] + [-1], np.int64)


def _encoded_codes(codes: np.ndarray) -> pa.Array:
    """Op codes (no -1) as a dictionary array of the ops' names in first-appearance
    order, as ``dictionary_encode`` numbers them, without a string per row."""
    uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int32)
    rank[by_first] = np.arange(len(uniq), dtype=np.int32)
    labels = [OP_NAMES[int(uniq[i])] for i in by_first]
    return pa.DictionaryArray.from_arrays(
        int_array(rank[inv.reshape(-1)], pa.int32()), str_array(labels)
    )


def _dtype_sizes(dtype: pa.Array | None, n: int) -> np.ndarray:
    if dtype is None:
        return np.full(n, -1, np.int64)
    idx, names = _distinct(dtype)
    lut = np.array([DTYPE_BYTES.get(str(x), -1) for x in names] + [-1], np.int64)
    return lut[idx]


def _host_spans(
    coll: dict[str, pa.Array], ops: dict[str, pa.Array] | None
) -> tuple[np.ndarray, np.ndarray]:
    m = len(coll["start_ns"])
    hs, he = np.full(m, _NONE, np.int64), np.zeros(m, np.int64)
    if ops is None or "external_id" not in ops or "external_id" not in coll:
        return hs, he
    rows = host_op_rows(ops)
    if not len(rows):
        return hs, he
    take = int_array(rows, pa.int64())
    o_ext = ops["external_id"].take(take).to_numpy(zero_copy_only=False)
    o_rank = _rank_keys(ops.get("rank"), take, len(rows))
    o_s = ops["start_ns"].take(take).to_numpy(zero_copy_only=False)
    o_e = ops["end_ns"].take(take).to_numpy(zero_copy_only=False)
    dense = _dense_spans(coll, o_rank, o_ext, o_s, o_e)
    if dense is not None:
        return dense
    # One span per (rank, external id): the earliest start and the latest end of its ops,
    # keys sorted by rank, then id.
    order = np.lexsort((o_ext, o_rank))
    k_rank, k_ext = o_rank[order], o_ext[order]
    new = np.ones(k_rank.size, bool)
    new[1:] = (k_rank[1:] != k_rank[:-1]) | (k_ext[1:] != k_ext[:-1])
    first = np.flatnonzero(new)
    u_rank, u_ext = k_rank[first], k_ext[first]
    u_s = np.minimum.reduceat(o_s[order], first)
    u_e = np.maximum.reduceat(o_e[order], first)
    c_ext = coll["external_id"]
    ext_ok = np.asarray(c_ext.is_valid().to_numpy(zero_copy_only=False), bool)
    c_ext_v = c_ext.fill_null(0).to_numpy(zero_copy_only=False)
    c_rank = _rank_keys(coll.get("rank"), None, m)
    for rk in np.unique(c_rank[ext_ok]).tolist():
        lo = int(np.searchsorted(u_rank, rk, side="left"))
        hi = int(np.searchsorted(u_rank, rk, side="right"))
        if lo == hi:
            continue
        sel = np.flatnonzero(ext_ok & (c_rank == rk))
        pos = lo + np.searchsorted(u_ext[lo:hi], c_ext_v[sel])
        pos = np.minimum(pos, hi - 1)
        hit = u_ext[pos] == c_ext_v[sel]
        hs[sel[hit]] = u_s[pos[hit]]
        he[sel[hit]] = u_e[pos[hit]]
    return hs, he


def _dense_spans(
    coll: dict[str, pa.Array],
    o_rank: np.ndarray,
    o_ext: np.ndarray,
    o_s: np.ndarray,
    o_e: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_host_spans` where the host ops are of one rank and their external ids
    span at most a few times their count (a profiler numbers them in order): each id's
    earliest start and latest end gathered into arrays indexed by the id, no sort of the
    ops (the 1M-kernel file's 313K host ops: ~30 ms less than the lexsort and its
    reductions). None otherwise."""
    if not o_ext.size or o_rank[0] != o_rank.min() or o_rank[0] != o_rank.max():
        return None
    lo, hi = int(o_ext.min()), int(o_ext.max())
    if hi - lo > 4 * o_ext.size + 1024:
        return None
    m = len(coll["start_ns"])
    hs, he = np.full(m, _NONE, np.int64), np.zeros(m, np.int64)
    at = o_ext - lo
    first = np.full(hi - lo + 1, np.iinfo(np.int64).max, np.int64)
    last = np.full(hi - lo + 1, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, at, o_s)
    np.maximum.at(last, at, o_e)
    known = np.zeros(hi - lo + 1, bool)
    known[at] = True
    c_ext = coll["external_id"]
    ext_ok = np.asarray(c_ext.is_valid().to_numpy(zero_copy_only=False), bool)
    c_ext_v = c_ext.fill_null(0).to_numpy(zero_copy_only=False)
    c_rank = _rank_keys(coll.get("rank"), None, m)
    inside = ext_ok & (c_rank == o_rank[0]) & (c_ext_v >= lo) & (c_ext_v <= hi)
    sel = np.flatnonzero(inside)
    pos = c_ext_v[sel] - lo
    hit = known[pos]
    hs[sel[hit]] = first[pos[hit]]
    he[sel[hit]] = last[pos[hit]]
    return hs, he


def host_op_rows(ops: dict[str, pa.Array]) -> np.ndarray:
    """Rows of the ops table (its columns) that issue collectives: record_param_comms,
    nccl:*, c10d::*, gloo:*, with an external id."""
    idx, names = _distinct(ops["name"])
    is_comm = np.array([bool(_HOST_OP_RE.match(str(x))) for x in names] + [False], bool)[idx]
    ext = ops["external_id"]
    if ext.null_count:
        is_comm &= ext.is_valid().to_numpy(zero_copy_only=False)
    return np.flatnonzero(is_comm)


def _rank_keys(rank: pa.Array | None, take: pa.Array | None, n: int) -> np.ndarray:
    if rank is None:
        return np.full(n, -1, np.int64)
    r = rank.take(take) if take is not None else rank
    return r.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
