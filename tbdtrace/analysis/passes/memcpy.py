"""Memory copies: count, bytes and achieved bandwidth per device and direction.

Achieved bandwidth = bytes / summed copy duration (bytes/s). Against a peak where one is
known: a device-to-device copy moves each byte through DRAM twice (read and write), so
its peak is half the DRAM bandwidth; host links (PCIe, NVLink-C2C) and peer links are
not described in traces, so HtoD, DtoH and PtoP copies get no peak.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key, device_keys, dict_codes, row_codes
from tbdtrace.analysis.engine.peaks import device_props, dram_bandwidth
from tbdtrace.arrow_ints import int_column

SCHEMA = outputs.MEMCPY.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: None = None) -> pa.Table:
    """One row per (device, copy_kind), ordered by device then bytes descending.

    Columns: rank, device_type, device_id, copy_kind ("unknown" when the source does not
    say); count; bytes; total_ns (summed durations, ns); bandwidth_bytes_per_s (null for
    zero time); peak_bytes_per_s (null when unknown); peak_fraction = achieved / peak;
    peak_source (where the peak came from, or why there is none).
    """
    ctx = of(ctx)
    t = ctx.table(
        "memcpy", ["start_ns", "end_ns", "device_id", "device_type", "rank", "bytes", "copy_kind"]
    )
    if t.num_rows == 0:
        return SCHEMA.empty_table()
    keys = device_keys(t)
    kc, kl = dict_codes(t, "copy_kind")
    dur = int_column(t, "end_ns") - int_column(t, "start_ns")
    nbytes = int_column(t, "bytes", 0)
    inv, first = row_codes(keys, kc)
    uniq = [(int(keys[i]), int(kc[i])) for i in first]
    count = np.bincount(inv, minlength=len(uniq))
    tot_b = np.bincount(inv, weights=nbytes, minlength=len(uniq))
    tot_ns = np.bincount(inv, weights=dur, minlength=len(uniq))
    props = device_props(ctx)
    rows: list[dict[str, Any]] = []
    for i, (key, code) in enumerate(uniq):
        rank, dtype, dev = decode_device_key(key)
        kind = kl[code] or "unknown"
        bw = tot_b[i] * 1e9 / tot_ns[i] if tot_ns[i] else None
        peak, src = _peak(kind, props.get(key))
        rows.append(
            {
                "rank": rank,
                "device_type": dtype,
                "device_id": dev,
                "copy_kind": kind,
                "count": int(count[i]),
                "bytes": int(tot_b[i]),
                "total_ns": int(tot_ns[i]),
                "bandwidth_bytes_per_s": bw,
                "peak_bytes_per_s": peak,
                "peak_fraction": bw / peak if bw is not None and peak else None,
                "peak_source": src,
            }
        )
    rows.sort(
        key=lambda r: (
            _n(r["rank"]),
            r["device_type"] or "",
            _n(r["device_id"]),
            -r["bytes"],
            r["copy_kind"],
        )
    )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _peak(kind: str, dev: dict[str, Any] | None) -> tuple[float | None, str]:
    if kind != "DtoD":
        return None, f"{kind} runs over a host or peer link whose peak the trace does not give"
    if dev is None:
        return None, "device not described in the trace (devices table)"
    bw, src = dram_bandwidth(dev)
    if bw is None:
        return None, src
    return bw / 2, f"DRAM bandwidth / 2 (read + write); DRAM bandwidth {src}"


def summarize(tbl: pa.Table) -> dict[str, Any]:
    """Totals per copy kind over devices: {kind: {count, bytes, total_ns, bandwidth}}."""
    out: dict[str, Any] = {}
    for r in tbl.to_pylist():
        d = out.setdefault(r["copy_kind"], {"count": 0, "bytes": 0, "total_ns": 0})
        for c in ("count", "bytes", "total_ns"):
            d[c] += r[c]
    for d in out.values():
        d["bandwidth_bytes_per_s"] = d["bytes"] * 1e9 / d["total_ns"] if d["total_ns"] else None
    return out


def _n(v: int | None) -> int:
    return -1 if v is None else v
