"""Read collector spool files (``<pid>.tbds``) and merge them into trace tables.

The format is written by ``csrc/collector/spool.cpp`` (see the comment there): a 16-byte file
header, then whole chunks, each a 32-byte header (magic, type, payload length, rows, CRC-32,
column count) and its payload. Reading stops at the first chunk that is short, has a bad
magic or a bad CRC: a process killed mid-write (SIGKILL) loses only that last chunk.
Columns are mapped without copies (``numpy.frombuffer`` over the file's bytes).

Nulls: version 2 (written since the collector's columns moved to the one column core,
``csrc/common/column_core.h``) stores a column's Arrow validity bitmap after its values; version 1
marked a null with the type's minimum value (-1 for a string code) and is still read.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.errors import TraceError

FILE_MAGIC = b"TBDSPOOL"
CHUNK_MAGIC = 0x4B484354
STRINGS_CHUNK = 100
META_CHUNK = 101
COUNTERS_CHUNK = 102
_FILE_HDR = struct.Struct("<8sII")
_CHUNK_HDR = struct.Struct("<IIQQII")
_COL_HDR = struct.Struct("<HBBIQ")
VERSIONS = (1, 2)
_HAS_VALIDITY = 1  # column flag (v2): a validity bitmap follows the values
_DTYPES: dict[int, np.dtype[Any]] = {
    1: np.dtype("<i4"),
    2: np.dtype("<i8"),
    3: np.dtype("<u8"),
    4: np.dtype("<i4"),
}
# Table ids as in csrc/collector/collector_tables.h (TBD_TABLES).
TABLE_NAMES = {
    1: "kernels",
    2: "memcpy",
    3: "memset",
    4: "memory",
    5: "runtime",
    6: "markers",
    7: "sync",
    8: "overhead",
    9: "devices",
    10: "_contexts",
}


@dataclass
class Spool:
    """One process's spool: column chunks per table, the string table and the meta."""

    path: Path
    pid: int
    version: int = 2
    tables: dict[str, list[dict[str, np.ndarray]]] = field(default_factory=dict)
    # v2: validity bitmaps per table chunk and column (absent: no nulls in that chunk)
    valid: dict[str, list[dict[str, np.ndarray]]] = field(default_factory=dict)
    string_cols: dict[str, set[str]] = field(default_factory=dict)
    strings: list[str] = field(default_factory=list)
    meta: dict[str, Any] | None = None  # None: the process did not stop cleanly
    # hardware counter data per context: chip, metrics, context_id, dropped_ranges, image
    counters: list[dict[str, Any]] = field(default_factory=list)
    chunks: int = 0
    truncated_bytes: int = 0  # bytes after the last whole chunk (0 for a clean file)


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def read(path: str | Path) -> Spool:
    """Parse one spool file; raises TraceError if it is not a spool at all."""
    p = Path(path)
    data = memoryview(p.read_bytes())
    if len(data) < _FILE_HDR.size or bytes(data[:8]) != FILE_MAGIC:
        raise TraceError(
            f"{p}: not a tbdtrace spool file (bad header); "
            "pass the spool directory written by tbdtrace capture"
        )
    _, version, pid = _FILE_HDR.unpack_from(data, 0)
    if version not in VERSIONS:
        raise TraceError(
            f"{p}: spool version {version} is not supported (this tbdtrace reads "
            f"{', '.join(map(str, VERSIONS))}); read it with the tbdtrace that captured it"
        )
    sp = Spool(p, pid, version)
    off = _FILE_HDR.size
    while off + _CHUNK_HDR.size <= len(data):
        magic, typ, nbytes, rows, crc, ncols = _CHUNK_HDR.unpack_from(data, off)
        body = off + _CHUNK_HDR.size
        if magic != CHUNK_MAGIC or body + nbytes > len(data):
            break
        payload = data[body : body + nbytes]
        if zlib.crc32(payload) != crc:
            break
        _chunk(sp, typ, rows, ncols, payload)
        sp.chunks += 1
        off = body + nbytes
    sp.truncated_bytes = len(data) - off
    return sp


def _chunk(sp: Spool, typ: int, rows: int, ncols: int, payload: memoryview) -> None:
    if typ == STRINGS_CHUNK:
        (first,) = struct.unpack_from("<Q", payload, 0)
        if first != len(sp.strings):
            raise TraceError(
                f"{sp.path}: string chunk starts at {first}, expected "
                f"{len(sp.strings)}; the spool is corrupt"
            )
        pos = 8
        for _ in range(rows):
            (n,) = struct.unpack_from("<I", payload, pos)
            sp.strings.append(bytes(payload[pos + 4 : pos + 4 + n]).decode("utf-8", "replace"))
            pos += 4 + n
    elif typ == META_CHUNK:
        sp.meta = json.loads(bytes(payload).rstrip(b"\0").decode())
    elif typ == COUNTERS_CHUNK:
        sp.counters.append(_counters(payload))
    elif typ in TABLE_NAMES:
        name = TABLE_NAMES[typ]
        cols: dict[str, np.ndarray] = {}
        valid: dict[str, np.ndarray] = {}
        pos = 0
        for _ in range(ncols):
            nlen, ctype, flags, _, dbytes = _COL_HDR.unpack_from(payload, pos)
            pos += _COL_HDR.size
            cname = bytes(payload[pos : pos + nlen]).decode()
            pos += _pad8(nlen)
            arr = np.frombuffer(payload[pos : pos + dbytes], dtype=_DTYPES[ctype])
            if len(arr) != rows:
                raise TraceError(
                    f"{sp.path}: {name}.{cname} has {len(arr)} values, "
                    f"header says {rows}; the spool is corrupt"
                )
            cols[cname] = arr
            if ctype == 4:
                sp.string_cols.setdefault(name, set()).add(cname)
            pos += _pad8(dbytes)
            if sp.version >= 2 and flags & _HAS_VALIDITY:
                vbytes = (rows + 7) // 8
                valid[cname] = np.frombuffer(payload[pos : pos + vbytes], dtype=np.uint8)
                if len(valid[cname]) != vbytes:
                    raise TraceError(
                        f"{sp.path}: {name}.{cname} validity is short; the spool is corrupt"
                    )
                pos += _pad8(vbytes)
        sp.tables.setdefault(name, []).append(cols)
        sp.valid.setdefault(name, []).append(valid)
    # Unknown chunk types come from a newer writer: skipped.


def _counters(payload: memoryview) -> dict[str, Any]:
    """A counters chunk (csrc/collector/spool.h, type 102)."""
    pos = 0

    def text() -> str:
        nonlocal pos
        (n,) = struct.unpack_from("<I", payload, pos)
        pos += 4 + n
        return bytes(payload[pos - n : pos]).decode()

    chip = text()
    (nm,) = struct.unpack_from("<I", payload, pos)
    pos += 4
    metrics = [text() for _ in range(nm)]
    ctx, dropped, nbytes = struct.unpack_from("<QQQ", payload, pos)
    pos += 24
    return {
        "chip": chip,
        "metrics": metrics,
        "context_id": ctx,
        "dropped_ranges": dropped,
        "image": bytes(payload[pos : pos + nbytes]),
    }


_NULL = {np.dtype("<i4"): np.iinfo(np.int32).min, np.dtype("<i8"): np.iinfo(np.int64).min}


def _null_mask(sp: Spool, table: str, name: str, parts: list[np.ndarray]) -> np.ndarray | None:
    """True where a value is null, or None when none is."""
    if sp.version == 1:
        arr = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if name in sp.string_cols.get(table, set()):
            mask = arr < 0
        else:
            null = _NULL.get(arr.dtype)
            mask = arr == null if null is not None else np.zeros(len(arr), dtype=bool)
        return mask if mask.any() else None
    bitmaps = [v.get(name) for v in sp.valid.get(table, [])]
    if all(b is None for b in bitmaps):
        return None
    masks = [
        np.zeros(len(part), dtype=bool)
        if bits is None
        else ~np.unpackbits(bits, count=len(part), bitorder="little").astype(bool)
        for part, bits in zip(parts, bitmaps, strict=True)
    ]
    return np.concatenate(masks)


def _column(sp: Spool, table: str, name: str, parts: list[np.ndarray]) -> pa.Array:
    arr = np.concatenate(parts) if len(parts) > 1 else parts[0]
    mask = _null_mask(sp, table, name, parts)
    if name in sp.string_cols.get(table, set()):
        dictionary = pa.array(sp.strings, type=pa.string())
        codes = arr if mask is None else np.where(mask, 0, arr)
        idx = pa.array(codes.astype(np.int32), mask=mask)
        return pa.DictionaryArray.from_arrays(idx, dictionary)
    return pa.array(arr, mask=mask) if mask is not None else pa.array(arr)


def columns(sp: Spool, table: str) -> dict[str, pa.Array]:
    """All chunks of ``table`` as Arrow arrays (nulls and strings resolved)."""
    chunks = sp.tables.get(table, [])
    if not chunks:
        return {}
    return {c: _column(sp, table, c, [ch[c] for ch in chunks]) for c in chunks[0]}


__all__ = ["Spool", "columns", "read"]
