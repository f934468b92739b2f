"""What a Kineto file's top-level keys say, shared by the Python and C++ import paths.

Rank (``distributedInfo``), time base (``baseTimeNanoseconds``), devices
(``deviceProperties``, which also tell ROCm from CUDA), per-file meta and the import's
meta.json content (:func:`file_meta`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.importers import validate
from tbdtrace.importers.columns import TableBuilder
from tbdtrace.importers.kineto.vocab import _int


@dataclass(frozen=True)
class FileInfo:
    """One input file's top-level keys, as the importer uses them."""

    path: Path
    doc: dict[str, Any]  # top-level keys (traceEvents aside)
    dist: dict[str, Any]  # distributedInfo, or {}
    rank: int | None
    base: int  # baseTimeNanoseconds, added to every time
    rocm: bool
    devices: Any  # deviceProperties as written


class FileHeaders:
    """The files of one import: their meta (:attr:`meta_files`), devices (``t["devices"]``)
    and events left out by reason (:attr:`skipped`)."""

    def __init__(self, tables: dict[str, TableBuilder] | None = None) -> None:
        self.t = tables if tables is not None else {"devices": TableBuilder("devices")}
        self.meta_files: list[dict[str, Any]] = []
        self.is_rocm = False
        self.skipped: Counter[str] = Counter()  # reason -> events left out (validate.py)

    def begin_file(self, path: Path, doc: dict[str, Any], rank_if_unknown: int | None) -> FileInfo:
        """What a file's top-level keys say (rank, time base, devices); adds its devices."""
        info = doc.get("distributedInfo")
        dist: dict[str, Any] = info if isinstance(info, dict) else {}
        rank = _int(dist.get("rank"))
        if rank is None:
            rank = rank_if_unknown
        base = _int(doc.get("baseTimeNanoseconds")) or 0
        devices = doc.get("deviceProperties") or []
        rocm = any("AMD" in str(d.get("name", "")) for d in devices if isinstance(d, dict))
        self.is_rocm = self.is_rocm or rocm
        for d in devices:
            if isinstance(d, dict):
                self._device(d, rank, "rocm" if rocm else "cuda")
        return FileInfo(path, doc, dist, rank, base, rocm, devices)

    def end_file(self, f: FileInfo, n_events: int, skipped: dict[str, int] | None = None) -> None:
        """Records the file's meta; ``skipped``: its events left out, by reason (the caller
        adds them to :attr:`skipped`)."""
        self.meta_files.append(
            {
                "file": str(f.path),
                "rank": f.rank,
                "schemaVersion": f.doc.get("schemaVersion"),
                "traceName": f.doc.get("traceName"),
                "baseTimeNanoseconds": f.base,
                "world_size": _int(f.dist.get("world_size")),
                "backend": f.dist.get("backend"),
                "deviceProperties": f.devices,
                "events": n_events,
                "skipped_events": validate.merged(skipped or {}),
            }
        )

    def _device(self, d: dict[str, Any], rank: int | None, device_type: str) -> None:
        self.t["devices"].append(
            device_id=_int(d.get("id")),
            device_type=device_type,
            rank=rank,
            name=str(d.get("name", "unknown")),
            sm_count=_int(d.get("numSms")),
            compute_capability_major=_int(d.get("computeMajor")),
            compute_capability_minor=_int(d.get("computeMinor")),
            memory_bytes=_int(d.get("totalGlobalMem")),
            max_threads_per_block=_int(d.get("maxThreadsPerBlock")),
            shared_memory_per_block_bytes=_int(d.get("sharedMemPerBlock")),
            registers_per_block=_int(d.get("regsPerBlock")),
            warp_size=_int(d.get("warpSize")),
        )


def file_meta(
    imp: FileHeaders,
    files: list[Path],
    tables: dict[str, dict[str, pa.Array]] | None,
    start_time_ns: int | None = None,
) -> dict[str, Any]:
    """meta.json content of an import; ``start_time_ns``: the earliest start, when the
    caller knows it without ``tables`` (the streaming import)."""
    if tables is not None:
        starts = [pc.min(c["start_ns"]).as_py() for c in tables.values() if "start_ns" in c]
        start_time_ns = min(starts) if starts else None
    ranks = sorted({m["rank"] for m in imp.meta_files if m["rank"] is not None})
    return {
        "source": "kineto",
        "framework": "pytorch",
        "source_files": [str(p) for p in files],
        "ranks": ranks,
        "start_time_ns": start_time_ns,
        "clock": "CLOCK_REALTIME",
        "clock_offset_ns": imp.meta_files[0]["baseTimeNanoseconds"] if imp.meta_files else 0,
        "devices": [d for m in imp.meta_files for d in m["deviceProperties"]],
        "skipped_events": validate.merged(imp.skipped),
        "extra": {
            "files": [
                {k: v for k, v in m.items() if k != "deviceProperties"} for m in imp.meta_files
            ],
            "rocm": imp.is_rocm,
        },
    }
