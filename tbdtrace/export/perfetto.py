"""A :class:`~tbdtrace.export.timeline.Timeline` as a Perfetto protobuf trace.

Written with a small vectorized protobuf encoder (field numbers from Perfetto's published
``perfetto_trace.proto``): every slice is a ``TrackEvent`` begin/end pair (an instant
when it lasts 0 ns) on a track declared by a ``TrackDescriptor``, names, categories and
argument names are interned once (``InternedData``) and referred to by id, flows are
``flow_ids``/``terminating_flow_ids``, counters ``TYPE_COUNTER`` events.

Each packet kind (begin, end, instant, counter) is declared once as its fields over whole
columns (``_messages``: field keys, value columns, masks of the rows that have a field),
and the compiled encoder ``tbdtrace._native.encode_rows`` writes each entry's packet
from them, so a million slices take no Python call each (docs/DECISIONS.md 216).
Without the extension, the numpy encoder below writes the same bytes: rows of one packet
kind encoded together as a byte matrix (one row per packet, padded) and a mask of the
bytes in use. Packets are written in time order; at equal times ends come before
instants and begins, inner ends before outer ones and outer begins before inner ones,
so every track's slices nest in file order too.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from tbdtrace.export.timeline import Slices, Timeline, slice_order

try:
    from tbdtrace import _native
except ImportError:  # pragma: no cover - the extension is built by `make native`
    _native = None  # type: ignore[assignment]

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

# perfetto_trace.proto field numbers
TRACE_PACKET = 1  # Trace.packet
P_TIMESTAMP, P_SEQ_ID, P_TRACK_EVENT, P_INTERNED, P_SEQ_FLAGS = 8, 10, 11, 12, 13
P_TRACK_DESCRIPTOR = 60
SEQ_CLEARED, SEQ_NEEDS_STATE = 1, 2
E_CATEGORY_IIDS, E_ANNOTATIONS, E_TYPE, E_NAME_IID, E_TRACK_UUID = 3, 4, 9, 10, 11
E_DOUBLE_COUNTER, E_FLOW_IDS, E_TERMINATING_FLOWS = 44, 47, 48
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
A_NAME_IID, A_INT, A_STRING_IID = 1, 4, 17
I_CATEGORIES, I_NAMES, I_ANNOTATION_NAMES, I_ANNOTATION_STRINGS = 1, 2, 3, 29
D_UUID, D_NAME, D_PROCESS, D_THREAD, D_PARENT, D_COUNTER = 1, 2, 3, 4, 5, 8
PROC_PID, PROC_NAME = 1, 6
THREAD_PID, THREAD_TID, THREAD_NAME = 1, 2, 5
VARINT, FIXED64, LEN = 0, 1, 2

SEQ = 1  # the one trusted_packet_sequence_id
CHUNK = 1 << 16  # packets encoded per numpy pass (bounds the byte matrices' memory)
PROCESS_UUID0 = 1
TRACK_UUID0 = 1 << 20
THREADS = 2


def varint_bytes(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint_bytes((field << 3) | wire)


@dataclass
class Rows:
    """``n`` byte strings: row i is ``m[i, :ln[i]]`` (``ln`` 0: the field is absent)."""

    m: npt.NDArray[np.uint8]
    ln: I64
    full: bool = False  # every row uses all of its ``m`` row (no mask needed)
    data: bytes | None = None  # the bytes of every row, when they are one constant

    def masked(self, present: Mask) -> Rows:
        return Rows(self.m, self.ln * present)


def const(n: int, b: bytes, present: Mask | None = None) -> Rows:
    m = np.broadcast_to(np.frombuffer(b, np.uint8), (n, len(b)))
    ln = np.full(n, len(b), np.int64)
    if present is None:
        return Rows(m, ln, True, b)
    return Rows(m, ln * present)


# x >= _LIMITS[j] needs more than j + 1 bytes as a varint
_LIMITS = np.array([1 << (7 * j) for j in range(1, 10)], np.uint64)


def varint(v: npt.NDArray[np.integer], present: Mask | None = None) -> Rows:
    """Varints of ``v`` (int64 negatives as 10-byte two's complement, as protobuf)."""
    x = np.asarray(v).astype(np.int64).view(np.uint64)
    if len(x) and x.min() == x.max():  # one value (types, ids of a name): a constant
        return const(len(x), varint_bytes(int(x[0])), present)
    top = int(x.max()) if len(x) else 0
    w = max(1, (top.bit_length() + 6) // 7)
    # Column by column (w passes over n values) rather than n x w uint64 temporaries.
    m = np.empty((len(x), w), np.uint8)
    ln = np.ones(len(x), np.int64)
    for j in range(w):
        m[:, j] = (x >> np.uint64(7 * j)) & np.uint64(0x7F)
        if j:
            more = x >= _LIMITS[j - 1]  # a byte j is needed: byte j - 1 has a successor
            ln += more
            m[:, j - 1] |= more.view(np.uint8) << np.uint8(7)
    full = present is None and int(ln.min(initial=w)) == w
    return Rows(m, ln if present is None else ln * present, full)


def fixed64(v: I64, present: Mask | None = None) -> Rows:
    m = np.ascontiguousarray(v, dtype="<u8").view(np.uint8).reshape(len(v), 8)
    ln = np.full(len(v), 8, np.int64)
    return Rows(m, ln if present is None else ln * present, present is None)


Pieces = list[Rows]  # a message not yet laid out: its fields' byte rows, in order


def f_varint(field: int, v: npt.NDArray[np.integer], present: Mask | None = None) -> Pieces:
    return [const(len(v), key(field, VARINT), present), varint(v, present)]


def f_fixed64(field: int, v: I64, present: Mask | None = None) -> Pieces:
    return [const(len(v), key(field, FIXED64), present), fixed64(v, present)]


def f_message(field: int, sub: Pieces, present: Mask | None = None) -> Pieces:
    n = len(sub[0].m)
    if present is not None:
        sub = [p.masked(present) for p in sub]
    size = sub[0].ln.copy()
    for p in sub[1:]:
        size += p.ln
    return [const(n, key(field, LEN), present), varint(size, present), *sub]


def row_lengths(pieces: Pieces) -> I64:
    total = pieces[0].ln.copy()
    for p in pieces[1:]:
        total += p.ln
    return total


def layout(pieces: Pieces) -> tuple[npt.NDArray[np.uint8], Mask]:
    """The rows side by side in one padded byte matrix and the mask of the bytes in use:
    ``m[used]`` (row-major) is every row's bytes, row after row."""
    n = len(pieces[0].ln)
    merged: Pieces = []
    for p in pieces:  # neighbouring constants as one (fewer, wider column copies)
        if p.data is not None and merged and merged[-1].data is not None:
            merged[-1] = const(n, merged[-1].data + p.data)
        else:
            merged.append(p)
    widths = [p.m.shape[1] for p in merged]
    m = np.empty((n, sum(widths)), np.uint8)
    used = np.ones((n, sum(widths)), bool)
    off = 0
    for p, w in zip(merged, widths, strict=True):
        m[:, off : off + w] = p.m
        if not p.full:
            used[:, off : off + w] = np.arange(w)[None, :] < p.ln[:, None]
        off += w
    return m, used


def flat(pieces: Pieces) -> tuple[npt.NDArray[np.uint8], I64]:
    """The rows' bytes, row after row, and each row's length."""
    m, used = layout(pieces)
    return m[used], row_lengths(pieces)


# ---- scalar messages (descriptors, interned data) ----


def _field(field: int, value: int | str | bytes) -> bytes:
    if isinstance(value, int):
        return key(field, VARINT) + varint_bytes(value)
    data = value.encode() if isinstance(value, str) else value
    return key(field, LEN) + varint_bytes(len(data)) + data


def _packet(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return _field(TRACE_PACKET, body)


def _header(tl: Timeline, arg_names: list[str]) -> bytes:
    """Track descriptors and the interned strings (iid = string id + 1)."""
    out = []
    for i, p in enumerate(tl.processes):
        proc = _field(PROC_PID, p.pid & 0x7FFFFFFF) + _field(PROC_NAME, p.name)
        desc = _field(D_UUID, PROCESS_UUID0 + i) + _field(D_PROCESS, proc)
        out.append(_packet(_field(P_TRACK_DESCRIPTOR, desc)))
    for j, t in enumerate(tl.tracks):
        pid = tl.processes[t.process].pid & 0x7FFFFFFF
        desc = _field(D_UUID, TRACK_UUID0 + j)
        if t.thread:
            th = _field(THREAD_PID, pid) + _field(THREAD_TID, t.tid) + _field(THREAD_NAME, t.name)
            desc += _field(D_THREAD, th)
        else:
            desc += _field(D_NAME, t.name) + _field(D_PARENT, PROCESS_UUID0 + t.process)
            if t.counter:
                desc += _field(D_COUNTER, b"")
        out.append(_packet(_field(P_TRACK_DESCRIPTOR, desc)))
    # Each string goes to the interned table of each role it plays (event name, category,
    # annotation value), once: iid = string id + 1 in every table.
    sl = tl.slices
    assert sl is not None
    ns = len(tl.strings)

    def used(*ids: I64) -> I64:  # the string ids that occur, ascending
        seen = np.zeros(ns, bool)
        for x in ids:
            seen[x] = True
        return np.flatnonzero(seen)

    roles: tuple[tuple[int, Any], ...] = (
        (I_NAMES, used(sl.name)),
        (I_CATEGORIES, used(sl.cat)),
        (I_ANNOTATION_STRINGS, used(*(a.values[a.valid] for a in sl.args if a.string))),
    )
    interned = []
    for f, ids in roles:
        for i in np.asarray(ids, np.int64).tolist():
            interned.append(_field(f, _field(1, i + 1) + _field(2, tl.strings[i])))
    for i, s in enumerate(arg_names):
        interned.append(_field(I_ANNOTATION_NAMES, _field(1, i + 1) + _field(2, s)))
    out.append(
        _packet(
            _field(P_SEQ_ID, SEQ),
            _field(P_SEQ_FLAGS, SEQ_CLEARED | SEQ_NEEDS_STATE),
            _field(P_INTERNED, b"".join(interned)),
        )
    )
    return b"".join(out)


# ---- vectorized packets ----


def _first(sl: Slices, s: I64, kind: I64, arg_iids: list[int]) -> Pieces:
    """Begin or instant (``kind``) packets of slice rows ``s``."""
    n = len(s)
    ev: Pieces = [
        *f_varint(E_TYPE, kind),
        *f_varint(E_TRACK_UUID, TRACK_UUID0 + sl.track[s]),
        *f_varint(E_NAME_IID, sl.name[s] + 1),
        *f_varint(E_CATEGORY_IIDS, sl.cat[s] + 1),
    ]
    for a, iid in zip(sl.args, arg_iids, strict=True):
        valid = a.valid[s]
        if not valid.any():
            continue
        v = a.values[s]
        body = [
            *f_varint(A_NAME_IID, np.full(n, iid, np.int64)),
            *(f_varint(A_STRING_IID, v + 1) if a.string else f_varint(A_INT, v)),
        ]
        ev += f_message(E_ANNOTATIONS, body, valid)
    for field, flows in ((E_FLOW_IDS, sl.flow_out), (E_TERMINATING_FLOWS, sl.flow_in)):
        f = flows[s]
        if (f > 0).any():
            ev += f_fixed64(field, f, f > 0)
    return _packet_rows(sl.start[s], ev)


def _end(sl: Slices, s: I64) -> Pieces:
    ev = [
        *f_varint(E_TYPE, np.full(len(s), SLICE_END, np.int64)),
        *f_varint(E_TRACK_UUID, TRACK_UUID0 + sl.track[s]),
    ]
    return _packet_rows(sl.end[s], ev)


def _counter(tl: Timeline, c: I64) -> Pieces:
    ev = [
        *f_varint(E_TYPE, np.full(len(c), COUNTER, np.int64)),
        *f_varint(E_TRACK_UUID, TRACK_UUID0 + tl.counter_track[c]),
        *f_fixed64(E_DOUBLE_COUNTER, tl.counter_value[c].view(np.int64)),
    ]
    return _packet_rows(tl.counter_ts[c], ev)


def _packet_rows(ts: I64, event: Pieces) -> Pieces:
    packet = [
        *f_varint(P_TIMESTAMP, ts),
        const(len(ts), _field(P_SEQ_ID, SEQ) + _field(P_SEQ_FLAGS, SEQ_NEEDS_STATE)),
        *f_message(P_TRACK_EVENT, event),
    ]
    return f_message(TRACE_PACKET, packet)


def _chunk(tl: Timeline, kind: I64, si: I64, ci: I64, arg_iids: list[int]) -> bytes:
    """The packets of one chunk of entries, in the entries' order: each kind is
    encoded in its own layout, then their bytes are interleaved."""
    sl = tl.slices
    assert sl is not None
    first = (kind == SLICE_BEGIN) | (kind == INSTANT)
    subsets = []
    if first.any():
        pos = np.flatnonzero(first)
        subsets.append((pos, _first(sl, si[pos], kind[pos], arg_iids)))
    for k, make in (
        (SLICE_END, lambda p: _end(sl, si[p])),
        (COUNTER, lambda p: _counter(tl, ci[p])),
    ):
        pos = np.flatnonzero(kind == k)
        if pos.size:
            subsets.append((pos, make(pos)))
    # Each entry's packet: its kind's fields, row by row, in entry order: one padded
    # matrix and its mask.
    mats = [(pos, *layout(pieces)) for pos, pieces in subsets]
    w = max(m.shape[1] for _, m, _ in mats)
    out = np.zeros((len(kind), w), np.uint8)
    used = np.zeros((len(kind), w), bool)
    for pos, m, u in mats:
        out[pos, : m.shape[1]] = m
        used[pos, : u.shape[1]] = u
    return bytes(out[used].tobytes())


# ---- compiled path: the messages declared as fields over whole columns ----

# field kinds of tbdtrace._native.encode_rows (csrc/common/proto_rows.h)
K_CONST, K_VARINT, K_FIXED64, K_MESSAGE = 0, 1, 2, 3
# (kind, key, int64 values, the int added to each, the rows that have it, sub-fields)
Field = tuple[int, bytes, Any, int, Any, Any]


def _fv(field: int, values: I64, add: int = 0, mask: Mask | None = None) -> Field:
    return (K_VARINT, key(field, VARINT), np.ascontiguousarray(values, np.int64), add, mask, None)


def _fmsg(field: int, sub: list[Field], mask: Mask | None = None) -> Field:
    return (K_MESSAGE, key(field, LEN), None, 0, mask, sub)


def _fconst(data: bytes) -> Field:
    return (K_CONST, data, None, 0, None, None)


def _ffixed(field: int, values: I64, mask: Mask | None = None) -> Field:
    return (K_FIXED64, key(field, FIXED64), np.ascontiguousarray(values), 0, mask, None)


def _packet_fields(ts: I64, event: list[Field]) -> list[Field]:
    packet = [
        _fv(P_TIMESTAMP, ts),
        _fconst(_field(P_SEQ_ID, SEQ) + _field(P_SEQ_FLAGS, SEQ_NEEDS_STATE)),
        _fmsg(P_TRACK_EVENT, event),
    ]
    return [_fmsg(TRACE_PACKET, packet)]


def _messages(tl: Timeline, arg_iids: list[int]) -> list[list[Field]]:
    """The four packet kinds (begin, end, instant, counter: ``kind - 1``) as fields over
    whole columns: rows of the slices for the first three, of the counters for the last.
    The same fields, in the same order, as ``_first``, ``_end`` and ``_counter``."""
    sl = tl.slices
    assert sl is not None
    named = [
        _fv(E_TRACK_UUID, sl.track, TRACK_UUID0),
        _fv(E_NAME_IID, sl.name, 1),
        _fv(E_CATEGORY_IIDS, sl.cat, 1),
    ]
    for a, iid in zip(sl.args, arg_iids, strict=True):
        if not a.valid.any():
            continue
        value = _fv(A_STRING_IID, a.values, 1) if a.string else _fv(A_INT, a.values)
        body = [_fconst(_field(A_NAME_IID, iid)), value]
        named.append(_fmsg(E_ANNOTATIONS, body, np.ascontiguousarray(a.valid, bool)))
    for field, flows in ((E_FLOW_IDS, sl.flow_out), (E_TERMINATING_FLOWS, sl.flow_in)):
        present = flows > 0
        if present.any():
            named.append(_ffixed(field, flows, present))
    counter = [
        _fconst(_field(E_TYPE, COUNTER)),
        _fv(E_TRACK_UUID, tl.counter_track, TRACK_UUID0),
        _ffixed(E_DOUBLE_COUNTER, tl.counter_value.view(np.int64)),
    ]
    return [
        _packet_fields(sl.start, [_fconst(_field(E_TYPE, SLICE_BEGIN)), *named]),
        _packet_fields(
            sl.end, [_fconst(_field(E_TYPE, SLICE_END)), _fv(E_TRACK_UUID, sl.track, TRACK_UUID0)]
        ),
        _packet_fields(sl.start, [_fconst(_field(E_TYPE, INSTANT)), *named]),
        _packet_fields(tl.counter_ts, counter),
    ]


def write(tl: Timeline, out: BinaryIO) -> int:
    """Write ``tl`` to ``out``; returns the number of track events written."""
    sl = tl.slices
    assert sl is not None
    arg_names = [a.name for a in sl.args]
    arg_iids = list(range(1, len(arg_names) + 1))
    out.write(_header(tl, arg_names))
    nc = len(tl.counter_ts)
    # Slices in (track, start, longer first) order; begins keep it at equal times,
    # ends take it reversed (inner ends first): the stable sort below keeps both.
    order = slice_order(sl.track, sl.start, sl.end)
    dur0 = (sl.end == sl.start)[order]
    ends = order[~dur0][::-1]
    # Each entry: its packet kind less one (the message it is) and its row (a slice's
    # or a counter's), in time order.
    which = np.concatenate(
        [
            np.where(dur0, INSTANT - 1, SLICE_BEGIN - 1).astype(np.int8),
            np.full(len(ends), SLICE_END - 1, np.int8),
            np.full(nc, COUNTER - 1, np.int8),
        ]
    )
    rows = np.concatenate([order, ends, np.arange(nc, dtype=np.int64)])
    if not len(rows):
        return 0
    sort_key = np.concatenate([sl.start[order], sl.end[ends], tl.counter_ts])
    del order, dur0, ends
    sort_key -= sort_key.min()
    sort_key <<= 2
    # at equal times: ends (0), then instants and counters (1), then begins (2)
    sort_key |= np.array([2, 0, 1, 1], np.int64)[which]
    rank = np.argsort(sort_key, kind="stable")
    del sort_key
    which, rows = which[rank], rows[rank]
    del rank

    if _native is not None and hasattr(_native, "encode_rows"):
        messages = _messages(tl, arg_iids)

        def encode(lo: int) -> bytes:
            sel = slice(lo, lo + CHUNK)
            return _native.encode_rows(messages, which[sel], rows[sel])

    else:
        kind = which.astype(np.int64) + 1
        counter = kind == COUNTER
        si, ci = np.where(counter, -1, rows), np.where(counter, rows, -1)

        def encode(lo: int) -> bytes:
            sel = slice(lo, lo + CHUNK)
            return _chunk(tl, kind[sel], si[sel], ci[sel], arg_iids)

    # Chunks encode on two threads (numpy and the compiled encoder release the GIL),
    # written in order.
    with ThreadPoolExecutor(THREADS) as pool:
        for data in pool.map(encode, range(0, len(rows), CHUNK)):
            out.write(data)
    return len(rows)


def write_file(tl: Timeline, path: str | os.PathLike[str]) -> int:
    with Path(path).open("wb") as f:
        return write(tl, f)
