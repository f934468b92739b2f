"""Property tests: generated profiler files with out-of-range, missing, duplicated and
mistyped fields (Kineto, MXNet, TensorFlow trace viewer, nsys).

Whatever the input, `tbdtrace import` exits 0 with the skipped events counted in
meta.json, or 1 with one line naming the file; never a traceback. For Kineto kernels the
expected outcome of each event is also computed here, from the generated values (an
oracle written for the test: the reason an event must be skipped, in the documented
order), and every import that succeeds must match tests/rawkineto.py's `expected_tables`
column for column. Examples are bounded so
the module runs in seconds.
"""

from __future__ import annotations

import itertools
import json
import math
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tbdtrace.cli import main
from tbdtrace.importers import kineto
from tbdtrace.importers.kineto import vocab
from tests.importers.test_kineto_parser import assert_matches_oracle

SETTINGS = settings(
    database=None,  # nothing written into the checkout; a failure prints its example
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_COUNTER = itertools.count()

# ---- values as JSON text, with what they must lead to ----------------------------------

I64 = (1 << 63) - 1


def _text(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
    return json.dumps(v)


def _decimal_text(v: Any) -> bool:
    """Is ``v`` text that Python's Decimal reads as a number (it is then a time)?"""
    from decimal import Decimal, InvalidOperation

    if not isinstance(v, str):
        return False
    try:
        Decimal(v.strip())
    except (InvalidOperation, ValueError):
        return False
    return True


# (JSON text, microseconds as an int when usable, reason otherwise)
def _us(kind: str, v: Any) -> tuple[str, Any]:
    return _text(v), (v if kind == "ok" else kind)


TIME = st.one_of(
    st.integers(0, 1 << 40).map(lambda v: _us("ok", v)),
    st.integers(I64 // 1000 + 1, 1 << 80).map(lambda v: _us("time_out_of_range", v)),
    st.integers(-(1 << 80), -(I64 // 1000) - 2).map(lambda v: _us("time_out_of_range", v)),
    st.sampled_from([math.nan, math.inf, -math.inf]).map(lambda v: _us("time_not_finite", v)),
    st.one_of(st.none(), st.lists(st.integers(), max_size=2), st.text(max_size=3))
    .filter(lambda v: not _decimal_text(v))
    .map(lambda v: _us("time_not_a_number", v)),
)
DUR = st.one_of(
    TIME,
    st.integers(-(1 << 40), -1).map(lambda v: (_text(v), "negative_duration")),
    st.just(("", 0)),  # absent: 0
)


@st.composite
def kernel_event(draw: Callable[..., Any]) -> tuple[str, str | None]:
    """(event JSON, expected skip reason or None)."""
    ts_text, ts = draw(TIME)
    dur_text, dur = draw(DUR)
    fields = [
        '"ph": "X"',
        '"cat": "kernel"',
        '"name": "k"',
        '"pid": 0',
        '"tid": 7',
        f'"ts": {ts_text}',
    ]
    if dur_text:
        fields.append(f'"dur": {dur_text}')
    args = draw(
        st.sampled_from(
            ["", ', "args": {}', ', "args": {"device": "x"}', ', "args": [1]', ', "args": null']
        )
    )
    reason: str | None = None
    if isinstance(ts, str):
        reason = ts
    elif isinstance(dur, str):
        reason = dur
    elif args == ', "args": [1]':
        reason = "args_not_an_object"
    return "{" + ", ".join(fields) + args + "}", reason


def _write(tmp: Path, name: str, content: bytes) -> Path:
    p = tmp / f"{next(_COUNTER)}-{name}"
    p.write_bytes(content)
    return p


def _import(
    tmp: Path, src: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, Path, dict[str, Any] | None]:
    """Runs `tbdtrace import`: (exit code, output directory, its meta or None)."""
    out = tmp / f"out-{next(_COUNTER)}"
    rc = main(["import", str(src), "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if rc == 1:
        assert len(err.strip().splitlines()) == 1 and str(src) in err, err
        assert not out.exists()
        return rc, out, None
    assert rc == 0, err
    return rc, out, json.loads((out / "meta.json").read_text())


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("props")


@SETTINGS
@given(events=st.lists(kernel_event(), min_size=1, max_size=8))
def test_kineto_kernels_kept_or_skipped_as_the_oracle_says(
    work: Path, capsys: pytest.CaptureFixture[str], events: list[tuple[str, str | None]]
) -> None:
    good = '{"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 1, "dur": 1}'
    doc = (
        '{"schemaVersion": 1, "traceEvents": [' + ", ".join([good] + [e for e, _ in events]) + "]}"
    )
    src = _write(work, "k.json", doc.encode())
    want_skipped = Counter(r for _, r in events if r is not None)
    tables, meta = kineto.import_files([src])
    assert_matches_oracle((tables, meta), [src])
    assert meta["skipped_events"] == dict(want_skipped)
    kept = 1 + sum(r is None for _, r in events)
    assert len(tables["kernels"]["start_ns"]) == kept
    rc, _, meta = _import(work, src, capsys)
    assert rc == 0 and meta is not None and meta["skipped_events"] == dict(want_skipped)


# ---- structurally hostile documents ---------------------------------------------------

JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(1 << 70), 1 << 70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
KINETO_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]
FIELD_VALUES = {
    "ph": st.sampled_from(["X", "i", "B", "M"]),
    "cat": st.sampled_from(sorted(vocab.ROUTED_CATS) + ["misc"]),
    "name": st.sampled_from(["k", "[memory]", "ProfilerStep#3", "ProfilerStep#x"]),
    "args": st.dictionaries(
        st.sampled_from(
            [
                "External id",
                "device",
                "stream",
                "grid",
                "block",
                "Bytes",
                "Addr",
                "Input Dims",
                "correlation",
                "cuda_sync_kind",
                "CallFrom",
            ]
        ),
        JSON_VALUE,
        max_size=4,
    ),
}


@st.composite
def hostile_event(draw: Callable[..., Any]) -> str:
    """An event with fields missing, duplicated or of any JSON type."""
    pairs = []
    for key in draw(st.lists(st.sampled_from(KINETO_KEYS), max_size=10)):  # repeats: duplicates
        plain = FIELD_VALUES.get(key)
        v = draw(plain if plain is not None and draw(st.booleans()) else JSON_VALUE)
        pairs.append(
            f"{json.dumps(key)}: {_text(v) if not isinstance(v, dict | list) else _dumps(v)}"
        )
    return "{" + ", ".join(pairs) + "}"


def _dumps(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dumps(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_dumps(x) for x in v) + "]"
    return _text(v)


def _one_line_or_counted(rc: int, meta: dict[str, Any] | None) -> None:
    if rc == 0:
        assert meta is not None and all(
            isinstance(n, int) and n > 0 for n in meta["skipped_events"].values()
        )


@SETTINGS
@given(
    events=st.lists(hostile_event(), max_size=6),
    header=st.sampled_from(
        [
            '"schemaVersion": 1',
            '"deviceProperties": [{"id": "x"}]',
            '"baseTimeNanoseconds": 9223372036854775807',
            '"distributedInfo": {"rank": [1]}',
        ]
    ),
)
def test_kineto_hostile_fields(
    work: Path, capsys: pytest.CaptureFixture[str], events: list[str], header: str
) -> None:
    doc = f'{{{header}, "traceEvents": [' + ", ".join(events) + "]}"
    src = _write(work, "h.json", doc.encode())
    rc, _, meta = _import(work, src, capsys)
    _one_line_or_counted(rc, meta)
    if rc == 0:
        assert_matches_oracle(kineto.import_files([src]), [src])


@SETTINGS
@given(events=st.lists(hostile_event(), max_size=6))
def test_mxnet_hostile_fields(
    work: Path, capsys: pytest.CaptureFixture[str], events: list[str]
) -> None:
    procs = '{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}}'
    ops = [e.replace('"cat": "kernel"', '"cat": "operator"') for e in events]
    doc = '{"traceEvents": [' + ", ".join([procs, '{"cat": "MXNET_C_API"}', *ops]) + "]}"
    src = _write(work, "mx.json", doc.encode())
    rc, _, meta = _import(work, src, capsys, "--format", "mxnet")
    _one_line_or_counted(rc, meta)


@SETTINGS
@given(events=st.lists(hostile_event(), max_size=6))
def test_tensorflow_viewer_hostile_fields(
    work: Path, capsys: pytest.CaptureFixture[str], events: list[str]
) -> None:
    meta_ev = '{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}}'
    body = ", ".join([meta_ev, *(e.replace('"pid": 0', '"pid": 1') for e in events)])
    doc = '{"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":[' + body + "]}"
    src = _write(work, "tv.json", doc.encode())
    rc, _, meta = _import(work, src, capsys)
    _one_line_or_counted(rc, meta)


SQL_VALUE = st.one_of(
    st.none(),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.binary(max_size=4),
)


@SETTINGS
@given(rows=st.lists(st.tuples(SQL_VALUE, SQL_VALUE, SQL_VALUE, SQL_VALUE), max_size=6))
def test_nsys_hostile_cells(
    work: Path, capsys: pytest.CaptureFixture[str], rows: list[tuple[Any, ...]]
) -> None:
    src = work / f"{next(_COUNTER)}-n.sqlite"
    db = sqlite3.connect(src)
    db.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, demangledName);"
        "CREATE TABLE NVTX_EVENTS (start, end, eventType, text, globalTid);"
    )
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?)", rows)
    db.commit()
    db.close()
    rc, out, meta = _import(work, src, capsys)
    _one_line_or_counted(rc, meta)
    # The oracle for kernel rows: start and end are integers (SQLite keeps each cell's own
    # type in these untyped columns) and end >= start.
    kept = sum(isinstance(r[0], int) and isinstance(r[1], int) and r[1] >= r[0] for r in rows)
    if rc == 0:
        import tbdtrace

        assert tbdtrace.open(out).num_rows("kernels") == kept
    else:
        assert kept == 0
