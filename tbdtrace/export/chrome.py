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

import orjson

from tbdtrace.export.timeline import Timeline

CHUNK = 1 << 16  # events per write


def _us(ns: int) -> float:
    """Relative nanoseconds as microseconds (exact: < 2^53 ns after the base)."""
    return ns / 1000


def write(tl: Timeline, out: BinaryIO) -> int:
    """Write ``tl`` to ``out``; returns the number of events written."""
    sl = tl.slices
    assert sl is not None
    starts = [int(sl.start.min())] if len(sl.start) else []
    if len(tl.counter_ts):
        starts.append(int(tl.counter_ts.min()))
    base = min(starts) if starts else 0
    out.write(b'{"displayTimeUnit":"ns","otherData":')
    out.write(orjson.dumps({"base_time_ns": base, "producer": "tbdtrace export"}))
    out.write(b',"traceEvents":[\n')
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


def _chunks(events: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    buf: list[dict[str, Any]] = []
    for e in events:
        buf.append(e)
        if len(buf) >= CHUNK:
            yield buf
            buf = []
    if buf:
        yield buf


def _events(tl: Timeline, base: int) -> Iterator[dict[str, Any]]:
    sl = tl.slices
    assert sl is not None
    for p in tl.processes:
        yield {"ph": "M", "name": "process_name", "pid": p.pid, "args": {"name": p.name}}
    pids = [tl.processes[t.process].pid for t in tl.tracks]
    tids = [t.tid for t in tl.tracks]
    for t, pid in zip(tl.tracks, pids, strict=True):
        if not t.counter:
            yield {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": t.tid,
                "args": {"name": t.name},
            }
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
