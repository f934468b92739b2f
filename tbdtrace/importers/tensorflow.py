"""Import TensorFlow profiler output: ``.xplane.pb`` (XSpace protobuf) and trace-viewer JSON.

``tf.profiler.experimental.start(logdir)`` / ``stop()`` write
``logdir/plugins/profile/<run>/<host>.xplane.pb``. It is parsed with the XSpace protos
TensorFlow itself ships (``tensorflow.tsl.profiler.protobuf.xplane_pb2``; the
tensorboard-plugin-profile/xprof package is not needed). The trace-viewer JSON that
TensorBoard's profile plugin serves (``xspace_to_tools_data(..., "trace_viewer@")``) is a
Chrome trace and is read as such.

Mapping, for the host plane (``/host:CPU``; one XLine per thread):

* an event whose name is ``<op name>:<op type>`` is a TensorFlow op executed on the CPU:
  an ``ops`` row (name = ``<op name>:<op type>`` as TensorFlow's trace viewer shows it,
  category ``tf_op``) and, since it ran on the CPU, a ``kernels`` row with device_type
  ``cpu``;
* every other event (TraceMe ranges: ``ExecutorState::Process``, eager Python calls, user
  ``tf.profiler.experimental.Trace`` ranges) is a ``markers`` range with domain
  ``tf_traceme``; one with a ``step_num`` stat is also a ``steps`` row.

Times: XPlane lines hold ``timestamp_ns`` and events ``offset_ps``/``duration_ps``; files
written by TensorFlow are normalized to the profile start, which the "Task Environment"
plane records as ``profile_start_time`` (ns since the epoch) and which is added back.
Picoseconds are floored to ns. Device planes (``/device:GPU:N``) are not read yet.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers import sniff as _sniff
from tbdtrace.importers import validate
from tbdtrace.importers.columns import TableBuilder

HOST_PLANE = "/host:CPU"
_OP_RE = re.compile(r"^[^:\s][^:]*:[A-Za-z_][A-Za-z0-9_]*$")


def is_op(name: str) -> bool:
    """``scope/op:Type``: an op executed by TensorFlow's executor."""
    return bool(_OP_RE.match(name))


_PB2 = "tensorflow.tsl.profiler.protobuf.xplane_pb2"


def _xplane_pb2(path: Path) -> Any:
    """TensorFlow's generated XSpace module, loaded from its file without importing
    TensorFlow itself (seconds of start-up, and its profiler runtime clashes with
    torch.profiler's in one process). It is registered under its own name, so a later
    ``import tensorflow`` reuses it instead of registering the protos twice."""
    if _PB2 in sys.modules:
        return sys.modules[_PB2]
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise TraceError(
            f"{path}: reading .xplane.pb needs tensorflow installed; pip install tensorflow-cpu"
        )
    f = Path(list(spec.submodule_search_locations)[0], "tsl/profiler/protobuf/xplane_pb2.py")
    mspec = importlib.util.spec_from_file_location(_PB2, f)
    if mspec is None or mspec.loader is None or not f.exists():
        raise TraceError(f"{path}: this TensorFlow has no {f.name}; upgrade tensorflow")
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[_PB2] = mod
    mspec.loader.exec_module(mod)
    return mod


def _xspace(path: Path) -> Any:
    xs = _xplane_pb2(path).XSpace()
    try:
        xs.ParseFromString(path.read_bytes())
    except Exception as e:  # protobuf raises DecodeError and others
        raise TraceError(
            f"{path}: not a readable XSpace protobuf ({e}); re-capture the profile"
        ) from e
    return xs


def _start_time(xs: Any) -> int:
    for p in xs.planes:
        if p.name == "Task Environment":
            for s in p.stats:
                if p.stat_metadata[s.metadata_id].name == "profile_start_time":
                    return int(s.uint64_value)
    return 0


class _Tables:
    def __init__(self) -> None:
        self.t = {n: TableBuilder(n) for n in ("ops", "kernels", "markers", "steps")}
        self.skipped: Counter[str] = Counter()  # reason -> events left out (validate.py)

    def add(
        self,
        name: str,
        start: int,
        end: int,
        pid: int | None,
        tid: int,
        rank: int | None,
        step: int | None,
        line: str,
    ) -> None:
        reason = _bad_span(start, end)
        if reason is not None:
            self.skipped[reason] += 1
            return
        if is_op(name):
            self.t["ops"].append(
                start_ns=start, end_ns=end, pid=pid, tid=tid, rank=rank, name=name, category="tf_op"
            )
            self.t["kernels"].append(
                start_ns=start,
                end_ns=end,
                device_id=0,
                device_type="cpu",
                pid=pid,
                tid=tid,
                rank=rank,
                name=name,
            )
            return
        self.t["markers"].append(
            start_ns=start,
            end_ns=end,
            pid=pid,
            tid=tid,
            rank=rank,
            name=name,
            domain="tf_traceme",
            kind="range",
        )
        if step is not None:
            self.t["steps"].append(
                step=step, start_ns=start, end_ns=end, pid=pid, rank=rank, source="tf_trace"
            )


def _bad_span(start: int, end: int) -> str | None:
    if not (validate.in_range(start) and validate.in_range(end)):
        return "time_out_of_range"
    return validate.span_ns(start, end)


def _add_xplane(path: Path, out: _Tables, rank: int | None) -> dict[str, Any]:
    xs = _xspace(path)
    base = _start_time(xs)
    host = [p for p in xs.planes if p.name == HOST_PLANE]
    if not host:
        raise TraceError(
            f"{path}: XSpace without a {HOST_PLANE} plane; "
            "re-capture with tf.profiler.experimental.start/stop"
        )
    n = 0
    before = Counter(out.skipped)
    for plane in host:
        step_ids = {k for k, v in plane.stat_metadata.items() if v.name == "step_num"}
        for line in plane.lines:
            t0 = base + line.timestamp_ns
            for ev in line.events:
                if ev.duration_ps < 0:
                    out.skipped["negative_duration"] += 1
                    continue
                md = plane.event_metadata[ev.metadata_id]
                start = t0 + ev.offset_ps // 1000
                step = next(
                    (int(s.int64_value) for s in ev.stats if s.metadata_id in step_ids), None
                )
                out.add(
                    md.name,
                    start,
                    start + ev.duration_ps // 1000,
                    None,
                    line.id,
                    rank,
                    step,
                    line.name,
                )
                n += 1
    return {
        "file": str(path),
        "format": "xplane",
        "profile_start_time_ns": base,
        "events": n,
        "skipped_events": validate.merged(out.skipped - before),
        "hostnames": list(xs.hostnames),
    }


def _trace_viewer_doc(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw.decode("utf-8", errors="replace"), parse_float=str)
    except (OSError, EOFError, zlib.error) as err:
        raise TraceError(
            f"{path}: gzip data is truncated or corrupt ({err}); re-export it"
        ) from err
    except json.JSONDecodeError as err:
        raise TraceError(
            f"{path}: invalid JSON at line {err.lineno} ({err.msg}); "
            "re-export the trace viewer data"
        ) from err
    except (ValueError, RecursionError) as err:
        raise TraceError(f"{path}: invalid JSON ({err}); re-export the trace viewer data") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(f"{path}: no traceEvents list; this is not TensorFlow trace-viewer JSON")
    return doc


def _small_int(v: Any) -> int | None:
    """An int64 value from a JSON number or digit string, else None."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isascii() and v.strip().lstrip("-").isdigit():
        v = int(v.strip())
    return v if isinstance(v, int) and validate.in_range(v) else None


def _add_trace_viewer(path: Path, out: _Tables, rank: int | None) -> dict[str, Any]:
    events = [e for e in _trace_viewer_doc(path)["traceEvents"] if isinstance(e, dict)]
    procs = {
        repr(e.get("pid")): str(e["args"].get("name", ""))
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and isinstance(e.get("args"), dict)
    }
    n = 0
    before = Counter(out.skipped)
    for e in events:
        if e.get("ph") != "X" or not procs.get(repr(e.get("pid")), "").endswith(HOST_PLANE):
            continue
        start = validate.us_to_ns_checked(e.get("ts"))
        dur = validate.us_to_ns_checked(e["dur"]) if "dur" in e else 0
        if isinstance(start, str) or isinstance(dur, str) or dur < 0:
            reason = start if isinstance(start, str) else dur if isinstance(dur, str) else None
            out.skipped[reason or "negative_duration"] += 1
            continue
        a = e.get("args")
        args: dict[str, Any] = a if isinstance(a, dict) else {}
        # The viewer shows the op type as the name and the full "op:Type" as long_name.
        out.add(
            str(args.get("long_name", e.get("name"))),
            start,
            start + dur,
            None,
            _small_int(e.get("tid", 0)) or 0,
            rank,
            _small_int(args.get("step_num")),
            "",
        )
        n += 1
    return {
        "file": str(path),
        "format": "trace_viewer",
        "events": n,
        "skipped_events": validate.merged(out.skipped - before),
        "note": "times relative to the profile start",
    }


def import_files(paths: Sequence[str | Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read TensorFlow profiles (xplane.pb or trace-viewer JSON); one rank per file when
    several are given. Returns (tables, meta) for :func:`tbdtrace.trace.write`."""
    files = [Path(p) for p in paths]
    out = _Tables()
    metas = []
    for i, p in enumerate(files):
        rank = i if len(files) > 1 else None
        with p.open("rb") as f:
            head = f.read(256)
        if _sniff.TV_MAGIC in head or head.lstrip()[:1] == b"{" or head[:2] == b"\x1f\x8b":
            metas.append(_add_trace_viewer(p, out, rank))
        else:
            metas.append(_add_xplane(p, out, rank))
    tables = {n: b.columns() for n, b in out.t.items() if len(b)}
    starts = [min(b.column_values("start_ns")) for b in out.t.values() if len(b)]
    meta = {
        "source": "tensorflow",
        "framework": "tensorflow",
        "source_files": [str(p) for p in files],
        "ranks": list(range(len(files))) if len(files) > 1 else [],
        "start_time_ns": min(starts) if starts else None,
        "skipped_events": validate.merged(out.skipped),
        "extra": {"files": metas},
    }
    return tables, meta


sniff = _sniff.tensorflow  # the format test (tbdtrace.importers.sniff)
