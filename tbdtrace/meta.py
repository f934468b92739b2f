"""``meta.json``: the one typed loader (docs/TRACE_FORMAT.md, "meta.json").

Every field tbdtrace reads from a trace's meta is declared in :data:`FIELDS` with its type,
nested fields by path (``extra.torch.allow_tf32``; ``[]`` for every item of a list:
``extra.parts[].clock.offset_ns``). :func:`check` walks a meta document against it and
raises a :class:`~tbdtrace.errors.TraceError` naming the first field of the wrong type in
one line, so code that reads the meta afterwards meets only the declared types (``null``
is allowed wherever a field may be absent). Fields not declared are kept and not checked:
writers add new ones, and an older tbdtrace keeps reading.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError

# Type names: str, int, number (int or float, finite), bool, object, list, and
# list<T> (every item of type T).
FIELDS: dict[str, str] = {
    "schema_version": "int",
    "source": "str",
    "backend": "str",
    "host": "str",
    "framework": "str",
    "workload": "str",
    "clock": "str",
    "clock_offset_ns": "int",
    "start_time_ns": "int",
    "partial": "bool",
    "command": "list<str>",
    "source_files": "list<str>",
    "ranks": "list<int>",
    "devices": "list<object>",
    "skipped_events": "object",
    "skipped_events.*": "int",
    "cpu": "object",
    "extra": "object",
    "extra.partial": "str",
    "extra.backend_choice": "str",
    "extra.cpu": "object",
    "extra.cpu.logical_cpus": "int",
    "extra.torch": "object",
    "extra.torch.allow_tf32": "object",
    "extra.host_sampler": "object",
    "extra.host_sampler.nvml": "str",
    "extra.files": "list<object>",
    "extra.files[].world_size": "int",
    "extra.files[].rank": "int",
    "extra.memory_categories": "list<str>",
    "extra.memory_model": "object",
    "extra.model_flops_per_sample": "number",
    "extra.spools": "int",
    "extra.spool_errors": "int",
    "extra.spool_lost_rows": "int",
    "extra.exit_code": "int",
    "extra.collector_processes": "list<object>",
    "extra.parts": "list<object>",
    "extra.parts[].rank": "int",
    "extra.parts[].world_size": "int",
    "extra.parts[].clock": "object",
    "extra.parts[].clock.offset_ns": "int",
    "extra.parts[].clock.error_bound_ns": "int",
    "extra.parts[].clock.error": "str",
    "extra.nodes": "list<object>",
    "extra.merge_notes": "list<str>",
    "extra.distributed": "object",
    "extra.clock_alignment": "object",
}

_WORDS = {
    "str": "text",
    "int": "an integer",
    "number": "a number",
    "bool": "true or false",
    "object": "an object",
    "list": "a list",
}


def _what(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number" if math.isfinite(v) else f"{v!r}"
    if isinstance(v, str):
        return "text"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _is(v: Any, kind: str) -> bool:
    if kind.startswith("list<"):
        return isinstance(v, list) and all(_is(x, kind[5:-1]) for x in v)
    if kind == "str":
        return isinstance(v, str)
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "number":
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        return ok and math.isfinite(v)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "object":
        return isinstance(v, dict)
    if kind == "list":
        return isinstance(v, list)
    raise ValueError(f"unknown meta type {kind!r}")


def _describe(kind: str) -> str:
    if kind.startswith("list<"):
        return f"a list of {_WORDS[kind[5:-1]].removeprefix('an ').removeprefix('a ')}s"
    return _WORDS[kind]


def _values(doc: Any, path: list[str]) -> list[tuple[str, Any]]:
    """(name, value) of every field at ``path`` present in ``doc``."""
    out: list[tuple[str, Any]] = [("", doc)]
    for part in path:
        nxt = []
        items = part.endswith("[]")
        key = part[:-2] if items else part
        for name, v in out:
            if not isinstance(v, dict):
                continue
            keys = list(v) if key == "*" else [key]
            for k in keys:
                if k not in v or v[k] is None:
                    continue
                child = f"{name}.{k}" if name else k
                if items:
                    if isinstance(v[k], list):
                        nxt += [(f"{child}[{i}]", x) for i, x in enumerate(v[k])]
                else:
                    nxt.append((child, v[k]))
        out = nxt
    return out


def check(doc: Any, where: str | Path) -> dict[str, Any]:
    """``doc`` when every declared field has its type; else TraceError naming the first
    one that does not (``where`` names the file)."""
    if not isinstance(doc, dict):
        raise TraceError(
            f"{where}: expected a JSON object, found {_what(doc)}; re-create the trace"
        )
    for path, kind in FIELDS.items():
        for name, v in _values(doc, path.split(".")):
            if not _is(v, kind):
                raise TraceError(
                    f"{where}: field {name} is {_what(v)}, expected {_describe(kind)}; "
                    "fix the field or re-create the trace"
                )
    return doc


def load(file: Path) -> dict[str, Any]:
    """Read and check ``meta.json`` (see :func:`check`)."""
    try:
        doc = json.loads(file.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as e:
        raise TraceError(f"{file}: invalid JSON ({e}); re-create the trace") from e
    return check(doc, file)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def dumps(meta: Any) -> str:
    """meta.json's text: strict JSON, which other tools read (a NaN or infinite number,
    which JSON cannot hold, is written as null)."""
    return json.dumps(_finite(meta), indent=2, sort_keys=True, allow_nan=False) + "\n"


def _finite(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


__all__ = ["FIELDS", "check", "dumps", "load"]
