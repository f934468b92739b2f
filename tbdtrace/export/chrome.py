"""A :class:`~tbdtrace.export.timeline.Timeline` as Chrome trace-event JSON.

The format chrome://tracing and ui.perfetto.dev open (the Trace Event Format document):
``X`` (complete) events for slices, ``s``/``f`` flow events from each runtime launch to
its device work, ``C`` counter events, ``M`` metadata naming processes and threads.
Times are microseconds; to keep nanoseconds exact in a JSON number they are written
relative to the trace's first event, whose time on the trace clock is in
``otherData.base_time_ns``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.export.timeline import I64, Timeline

CHUNK = 1 << 16  # events per write


def _us(ns: int) -> float:
    """Relative nanoseconds as microseconds (exact: < 2^53 ns after the base)."""
    return ns / 1000


def write(tl: Timeline, out: BinaryIO) -> int:
    """Write ``tl`` to ``out``; returns the number of events written. The same bytes as
    :func:`write_dicts` (while relative times stay under 2^42 us, ~51 days, where
    ``ns / 1000`` and its decimal print alike): the slices' and counters' lines are
    built a column at a time (``_lines``), not one dict per event."""
    sl = tl.slices
    assert sl is not None
    base = _base(tl)
    _head(out, base)
    meta = [orjson.dumps(e) for e in _metadata(tl)]
    out.write(b",\n".join(meta))
    count = len(meta)
    for data, n in _lines(tl, base):
        if count:
            out.write(b",\n")
        out.write(data)
        count += n
    out.write(b"\n]}\n")
    return count


def write_dicts(tl: Timeline, out: BinaryIO) -> int:
    """:func:`write` one Python dict per event (kept as the reference the tests compare
    the column-wise writer with)."""
    sl = tl.slices
    assert sl is not None
    base = _base(tl)
    _head(out, base)
    count = 0
    first = True
    for chunk in _chunks(_events(tl, base)):
        if not first:
            out.write(b",\n")
        out.write(b",\n".join(orjson.dumps(e) for e in chunk))
        first = False
        count += len(chunk)
    out.write(b"\n]}\n")
    return count


def _base(tl: Timeline) -> int:
    sl = tl.slices
    assert sl is not None
    starts = [int(sl.start.min())] if len(sl.start) else []
    if len(tl.counter_ts):
        starts.append(int(tl.counter_ts.min()))
    return min(starts) if starts else 0


def _head(out: BinaryIO, base: int) -> None:
    out.write(b'{"displayTimeUnit":"ns","otherData":')
    out.write(orjson.dumps({"base_time_ns": base, "producer": "tbdtrace export"}))
    out.write(b',"traceEvents":[\n')


# ".0", ".001", ..., ".999" with trailing zeros dropped: how a float prints n / 1000
_FRACTIONS = pa.array([".0"] + [("." + f"{f:03d}").rstrip("0") for f in range(1, 1000)])


def _us_text(ns: I64) -> pa.Array:
    """Relative nanoseconds as JSON microseconds: the exact decimal of ns / 1000."""
    if len(ns) and int(ns.min()) < 0:  # a negative duration (bad input): as a float prints
        return pa.array([x.decode() for x in orjson.dumps((ns / 1000).tolist())[1:-1].split(b",")])
    whole = pc.cast(pa.array(ns // 1000), pa.string())
    return pc.binary_join_element_wise(whole, _FRACTIONS.take(pa.array(ns % 1000)), "")


def _json_strings(values: list[str]) -> pa.Array:
    return pa.array([orjson.dumps(v).decode() for v in values])


def _join(*parts: Any) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def _lines(tl: Timeline, base: int) -> Iterator[tuple[pa.Buffer, int]]:
    """The slices' events (each ``X`` followed by its ``s`` and ``f`` flow events) and the
    counters' ``C`` events, as :func:`_events` orders them: chunks of lines joined by
    ``,\\n`` and their event counts."""
    sl = tl.slices
    assert sl is not None
    strings = _json_strings(tl.strings)
    pids = np.array([tl.processes[t.process].pid for t in tl.tracks], np.int64)
    tids = np.array([t.tid for t in tl.tracks], np.int64)
    args = [
        (orjson.dumps(a.name).decode(), a.values, a.valid, a.string)
        for a in sl.args
        if a.valid.any()
    ]
    for lo in range(0, len(sl.start), CHUNK):
        hi = min(lo + CHUNK, len(sl.start))
        track = sl.track[lo:hi]
        pid = pc.cast(pa.array(pids[track]), pa.string())
        tid = pc.cast(pa.array(tids[track]), pa.string())
        start = sl.start[lo:hi]
        ts = _us_text(start - base)
        where = _join(',"pid":', pid, ',"tid":', tid, ',"ts":', ts)
        x = _join(
            '{"ph":"X","name":',
            strings.take(pa.array(sl.name[lo:hi])),
            ',"cat":',
            strings.take(pa.array(sl.cat[lo:hi])),
            where,
            ',"dur":',
            _us_text(sl.end[lo:hi] - start),
        )
        pieces = []
        for name, values, valid, is_string in args:
            v = values[lo:hi]
            text = strings.take(pa.array(v)) if is_string else pc.cast(pa.array(v), pa.string())
            ok = pa.array(valid[lo:hi])
            pieces.append(pc.if_else(ok, _join(f",{name}:", text), ""))
        if pieces:
            inner = _join(*pieces) if len(pieces) > 1 else pieces[0]
            has = pc.greater(pc.binary_length(inner), 0)
            body = _join(',"args":{', pc.utf8_slice_codeunits(inner, 1), "}")
            x = _join(x, pc.if_else(has, body, ""))
        x = _join(x, "},\n")
        lines = [x]
        counts = np.ones(hi - lo, np.int64)
        for ph, flows, tail in (("s", sl.flow_out, "},\n"), ("f", sl.flow_in, ',"bp":"e"},\n')):
            f = flows[lo:hi]
            has_flow = f != 0
            if not has_flow.any():
                lines.append(None)
                continue
            pos = np.flatnonzero(has_flow)
            fid = pc.cast(pa.array(f[pos]), pa.string())
            head = f'{{"ph":"{ph}","id":'
            lines.append(_join(head, fid, ',"name":"launch","cat":"launch"', where.take(pos), tail))
            counts += has_flow
        # each slice's X, then its s, then its f, in slice order
        first = np.cumsum(counts) - counts
        order = [first]
        at = first + 1
        for k in (1, 2):
            if lines[k] is not None:
                has_flow = (sl.flow_out if k == 1 else sl.flow_in)[lo:hi] != 0
                order.append(at[has_flow])
                at = at + has_flow
        arr = pa.concat_arrays([a for a in lines if a is not None])
        dest = np.concatenate(order)
        perm = np.empty(len(dest), np.int64)
        perm[dest] = np.arange(len(dest), dtype=np.int64)
        yield _joined(arr.take(pa.array(perm))), len(dest)
    if len(tl.counter_ts):
        names = _json_strings([t.name for t in tl.tracks])
        for lo in range(0, len(tl.counter_ts), CHUNK):
            tr = tl.counter_track[lo : lo + CHUNK]
            vals = orjson.dumps(tl.counter_value[lo : lo + CHUNK].tolist())[1:-1].split(b",")
            c = _join(
                '{"ph":"C","name":',
                names.take(pa.array(tr)),
                ',"pid":',
                pc.cast(pa.array(pids[tr]), pa.string()),
                ',"ts":',
                _us_text(tl.counter_ts[lo : lo + CHUNK] - base),
                ',"args":{"value":',
                pa.array([v.decode() for v in vals]),
                "}},\n",
            )
            yield _joined(c), len(tr)


def _joined(lines: pa.Array) -> pa.Buffer:
    """The lines, each ending in ``,\\n``, as one buffer without the last ``,\\n``."""
    offsets = np.frombuffer(lines.buffers()[1], np.int32)
    lo, hi = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return lines.buffers()[2].slice(lo, hi - lo - 2)


def _chunks(events: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    buf: list[dict[str, Any]] = []
    for e in events:
        buf.append(e)
        if len(buf) >= CHUNK:
            yield buf
            buf = []
    if buf:
        yield buf


def _metadata(tl: Timeline) -> Iterator[dict[str, Any]]:
    for p in tl.processes:
        yield {"ph": "M", "name": "process_name", "pid": p.pid, "args": {"name": p.name}}
    for t in tl.tracks:
        if not t.counter:
            yield {
                "ph": "M",
                "name": "thread_name",
                "pid": tl.processes[t.process].pid,
                "tid": t.tid,
                "args": {"name": t.name},
            }


def _events(tl: Timeline, base: int) -> Iterator[dict[str, Any]]:
    sl = tl.slices
    assert sl is not None
    yield from _metadata(tl)
    pids = [tl.processes[t.process].pid for t in tl.tracks]
    tids = [t.tid for t in tl.tracks]
    strings = tl.strings
    track = sl.track.tolist()
    start = (sl.start - base).tolist()
    dur = (sl.end - sl.start).tolist()
    name = sl.name.tolist()
    cat = sl.cat.tolist()
    args = [
        (a.name, a.values.tolist(), a.valid.tolist(), a.string) for a in sl.args if a.valid.any()
    ]
    flow_in, flow_out = sl.flow_in.tolist(), sl.flow_out.tolist()
    for i in range(len(track)):
        tr = track[i]
        ev: dict[str, Any] = {
            "ph": "X",
            "name": strings[name[i]],
            "cat": strings[cat[i]],
            "pid": pids[tr],
            "tid": tids[tr],
            "ts": _us(start[i]),
            "dur": _us(dur[i]),
        }
        a = {n: (strings[v[i]] if s else v[i]) for n, v, ok, s in args if ok[i]}
        if a:
            ev["args"] = a
        yield ev
        for ph, fid in (("s", flow_out[i]), ("f", flow_in[i])):
            if fid:
                fl = {"ph": ph, "id": fid, "name": "launch", "cat": "launch"}
                fl.update(pid=pids[tr], tid=tids[tr], ts=_us(start[i]))
                if ph == "f":
                    fl["bp"] = "e"
                yield fl
    ctrack = tl.counter_track.tolist()
    cts = (tl.counter_ts - base).tolist()
    cval = tl.counter_value.tolist()
    for i in range(len(ctrack)):
        t = tl.tracks[ctrack[i]]
        yield {
            "ph": "C",
            "name": t.name,
            "pid": pids[ctrack[i]],
            "ts": _us(cts[i]),
            "args": {"value": cval[i]},
        }


def write_file(tl: Timeline, path: str | os.PathLike[str]) -> int:
    with Path(path).open("wb") as f:
        return write(tl, f)
