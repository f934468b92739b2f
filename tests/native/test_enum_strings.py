"""Every enum string the collector's decoder can write, against tbdtrace/schema.py: each
member of each CUPTI enumeration behind an enum column (read from the CUDA 13.0 header,
not from the C++) is decoded by the real decoder, and the string it gives must be the
schema's name for it. Not samples: a new CUPTI member, or a schema rename, fails here."""

from __future__ import annotations

import re

import pytest

from tbdtrace import _native_testing as nt
from tbdtrace import schema

from .cupti_headers import enum_values


def _members(typedef: str, prefix: str) -> dict[str, int]:
    return {
        k.removeprefix(prefix): v
        for k, v in enum_values("cupti_activity.h", typedef).items()
        if not k.endswith("FORCE_INT")
    }


def _decode(kind: str, fields: dict) -> dict:
    return nt.decode_records([nt.test_record(kind, fields)])


def _column(res: dict, table: str, column: str) -> list:
    """The decoded string column (None for a null, no row: [])."""
    cols = res["tables"].get(table)
    if cols is None:
        return []
    values, valid, _ = cols[column]
    strings = res["strings"]
    return [
        strings[int(c)] if valid is None or valid[i >> 3] >> (i & 7) & 1 else None
        for i, c in enumerate(values)
    ]


# The schema's name for each CUPTI member, by a rule on the member's own name.
def _copy_name(m: str) -> str | None:
    return None if m == "UNKNOWN" else m[0] + "to" + m[3]  # HTOD -> HtoD


def _memory_name(m: str) -> str:
    return m.lower()


def _sync_name(m: str) -> str:
    return m.removesuffix("_SYNCHRONIZE").lower()


def _overhead_name(m: str) -> str:
    # The one name the collector shortens: module loading the runtime triggered.
    return "module_loading" if m == "RUNTIME_TRIGGERED_MODULE_LOADING" else m.lower()


def test_copy_kinds() -> None:
    members = _members("CUpti_ActivityMemcpyKind", "CUPTI_ACTIVITY_MEMCPY_KIND_")
    assert len(members) == 11
    seen = set()
    for m, v in members.items():
        got = _column(_decode("memcpy", {"copyKind": v}), "memcpy", "copy_kind")
        assert got == [_copy_name(m)], m
        if got[0] is not None:
            assert got[0] in schema.MEMCPY_KINDS, m
            seen.add(got[0])
    assert seen == set(schema.MEMCPY_KINDS)


@pytest.mark.parametrize(
    ("kind", "field", "table", "column"),
    [
        ("memcpy", "srcKind", "memcpy", "src_kind"),
        ("memcpy", "dstKind", "memcpy", "dst_kind"),
        ("memset", "memoryKind", "memset", "memory_kind"),
        ("memory", "memoryKind", "memory", "memory_kind"),
    ],
)
def test_memory_kinds(kind: str, field: str, table: str, column: str) -> None:
    members = _members("CUpti_ActivityMemoryKind", "CUPTI_ACTIVITY_MEMORY_KIND_")
    extra = {"memoryOperationType": 1} if kind == "memory" else {}
    seen = set()
    for m, v in members.items():
        got = _column(_decode(kind, {field: v, **extra}), table, column)
        assert got == [_memory_name(m)], m
        seen.add(got[0])
    assert seen == set(schema.MEMORY_KINDS)
    # A value CUPTI may add later is named, never dropped or garbled.
    assert _column(_decode(kind, {field: 99, **extra}), table, column) == ["unknown"]


def test_sync_kinds() -> None:
    members = _members("CUpti_ActivitySynchronizationType", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_")
    seen = set()
    for m, v in members.items():
        got = _column(_decode("sync", {"type": v}), "sync", "sync_kind")
        assert got == [_sync_name(m)], m
        seen.add(got[0])
    assert seen == set(schema.SYNC_KINDS)


def test_overhead_kinds() -> None:
    members = _members("CUpti_ActivityOverheadKind", "CUPTI_ACTIVITY_OVERHEAD_")
    assert len(members) == 10
    seen = set()
    for m, v in members.items():
        got = _column(_decode("overhead", {"overheadKind": v}), "overhead", "name")
        assert got == [_overhead_name(m)], m
        seen.add(got[0])
    assert seen == set(schema.OVERHEAD_KINDS)


def test_memory_actions() -> None:
    members = _members("CUpti_ActivityMemoryOperationType", "CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_")
    names = {"ALLOCATION": "alloc", "RELEASE": "free"}
    for m, v in members.items():
        res = _decode("memory", {"memoryOperationType": v, "memoryKind": 3})
        got = _column(res, "memory", "action")
        assert got == ([names[m]] if m in names else []), m  # INVALID: no row, counted
        if m not in names:
            assert res["unknown_kind"] == 1
    assert set(names.values()) == set(schema.MEMORY_ACTIONS)


def test_api_and_marker_kinds() -> None:
    assert _column(_decode("runtime", {"cbid": 211}), "runtime", "api") == ["runtime"]
    assert _column(_decode("driver", {"cbid": 307}), "runtime", "api") == ["driver"]
    assert {"runtime", "driver"} == set(schema.API_KINDS)
    flags = enum_values("cupti_activity.h", "CUpti_ActivityFlag")
    inst = flags["CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS"]
    start, end = flags["CUPTI_ACTIVITY_FLAG_MARKER_START"], flags["CUPTI_ACTIVITY_FLAG_MARKER_END"]
    recs = [
        nt.test_record("marker", {"flags": inst, "id": 1, "name": "m"}),
        nt.test_record("marker", {"flags": start, "id": 2, "name": "r", "timestamp": 5}),
        nt.test_record("marker", {"flags": end, "id": 2, "timestamp": 9}),
    ]
    got = _column(nt.decode_records(recs), "markers", "kind")
    assert sorted(got) == ["mark", "range"] and set(got) == set(schema.MARKER_KINDS)


def test_every_collector_enum_column_is_checked_here() -> None:
    """The enum columns of the collector's tables: each is covered by a test above."""
    covered = {
        ("memcpy", "copy_kind"), ("memcpy", "src_kind"), ("memcpy", "dst_kind"),
        ("memset", "memory_kind"), ("memory", "memory_kind"), ("memory", "action"),
        ("sync", "sync_kind"), ("overhead", "name"), ("runtime", "api"), ("markers", "kind"),
    }  # fmt: skip
    native = {
        (table, name)
        for table, _tid, cols in nt.layout()
        if not table.startswith("_")
        for name, _typ in cols
        if re.match(r"enum:", schema.table(table).column(name).unit)
    }
    assert native == covered
