"""The Kineto import (the C++ parser, csrc/kineto) against the tests' oracle, and on its own.

The oracle is tests/rawkineto.py (``expected_tables``), which reads the raw JSON with the
standard library and shares no code with the importer: every table and column it gives
must hold the same values and nulls, and the same skipped-event counts. Other hand-written
expectations come from the raw JSON or from Decimal arithmetic written here.
"""

from __future__ import annotations

import gzip
import json
import random
import threading
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest

from tbdtrace import _native
from tbdtrace.errors import TraceError
from tbdtrace.importers import kineto, validate
from tbdtrace.importers.kineto.vocab import ROUTES
from tests.conftest import KINETO, KINETO_TRACES
from tests.rawkineto import expected_tables

HTA = KINETO / "hta"
RANKS = [HTA / "sampled_rank-0.json.gz", HTA / "sampled_rank-1.json.gz"]
ROCM = HTA / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def assert_matches_oracle(
    got: tuple[dict[str, Any], dict[str, Any]], paths: list[Path], oracle: list[Path] | None = None
) -> None:
    """The import ``got`` of ``paths`` holds what rawkineto reads from them (or from
    ``oracle``, undamaged copies): the same tables, and per column the same values, with
    columns the importer leaves out (null in every row) null in every row of the oracle."""
    tables, meta = got
    want, skipped = expected_tables(oracle or paths)
    event_tables = {t for t in tables if t not in ("devices", "collectives")}
    assert event_tables == set(want)
    for name, cols in want.items():
        for col, values in cols.items():
            if col in tables[name]:
                assert tables[name][col].to_pylist() == values, (name, col)
            else:
                assert all(v is None for v in values), (name, col, "left out but not null")
    assert meta["skipped_events"] == skipped


def check(paths: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Imports ``paths`` and checks the result against the oracle."""
    got = kineto.import_files(paths)
    assert_matches_oracle(got, paths)
    return got


# The oracle (json.loads) takes seconds on the three largest fixtures.
FIXTURES = [
    pytest.param(p, marks=pytest.mark.slow) if p.stat().st_size > 1 << 20 else p
    for p in KINETO_TRACES
]


@pytest.mark.parametrize("src", FIXTURES, ids=[p.name[:40] for p in KINETO_TRACES])
def test_every_fixture_matches_the_oracle(src: Path) -> None:
    check([src])


def test_several_files_keep_ranks_and_device_types() -> None:
    # Two ranked files, then a ROCm file without distributedInfo (rank = its position).
    assert "distributedInfo" not in json.loads(gzip.decompress(ROCM.read_bytes()))
    got = check([*RANKS, ROCM])
    assert set(got[0]["kernels"]["rank"].to_pylist()) == {0, 1, 2}
    assert got[0]["kernels"]["device_type"].dictionary.to_pylist() == ["cuda", "rocm"]


# A small trace with what real files hold and what they seldom do.
EVENTS = [
    '{"ph": "X", "cat": "kernel", "name": "k\\u00e9 \\"q\\" \\\\ \\ud83d\\ude00 ☃", "pid": 0,'
    ' "tid": "stream 7", "ts": 1.5, "dur": 2, "args": {"device": 1, "stream": 7,'
    ' "correlation": 9223372036854775808, "External id": -9223372036854775808,'
    ' "grid": [1, "2", true], "block": [4, 5], "registers per thread": 2147483648,'
    ' "shared memory": -2147483648, "context": "  -12 "}}',
    '{"ph": "X", "cat": "kernel", "name": 123, "ts": 123.4567, "dur": 1e3,'
    ' "args": {"correlation": 5, "registers per thread": 32}}',
    '{"ph": "X", "cat": "Kernel", "ts": -2.25, "dur": 0.0005, "args": null}',
    '{"ph": "X", "cat": "kernel", "name": null, "ts": 2.5E-3, "dur": 1.0015, "args": []}',
    '{"ph": "X", "cat": "kernel", "name": true, "ts": 1694039968955744.4999, "dur": 1e-9,'
    ' "pid": 1.0, "args": {"external id": 77, "grid": [1, 2, 3, 4]}}',
    '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 10,'
    ' "dur": 1, "args": {"bytes": 4096, "device": 0}}',
    '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Odd)", "ts": 11,'
    ' "args": {"bytes": "n/a"}}',
    '{"ph": "X", "cat": "Memset", "name": "Memset (Device)", "ts": 12, "dur": 1}',
    '{"ph": "X", "cat": "gpu_memset", "name": "memset?", "ts": 13, "dur": 1}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 6,'
    ' "ts": 1, "dur": 3, "args": {"cbid": 211, "correlation": 1, "External id": 3}}',
    '{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "ts": 2, "dur": 1}',
    '{"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "ts": 3, "dur": 1,'
    ' "args": {"device": 0, "stream": 7}}',
    '{"ph": "X", "cat": "cuda_sync", "name": "x", "ts": 3, "dur": 1,'
    ' "args": {"cuda_sync_kind": "Event Sync"}}',
    '{"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "ts": 3, "args": {"cuda_sync_kind": 5}}',
    '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 6, "ts": 5, "dur": 2,'
    ' "args": {"External id": 3, "Sequence number": 8, "flops": 100,'
    ' "Input Dims": [[2, 3], [3, -0], [], [1.50, null, true]],'
    ' "Input type": ["float", "é\\u0001\\t/\\u007f", "\\ud800", "😀", "", 1E5]}}',
    '{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 6, "args": {"Input Dims": null,'
    ' "Input type": [NaN, Infinity, -Infinity]}}',
    '{"ph": "X", "cat": "python_function", "name": "f", "ts": 7, "dur": 1}',
    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 5, "tid": 6,'
    ' "ts": 8, "dur": 9, "args": {"External id": 4}}',
    '{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#18446744073709551616", "ts": 8}',
    '{"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "pid": 1, "ts": 8,'
    ' "args": {"device": 2}}',
    '{"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 1, "ts": 9}',
    '{"ph": "X", "cat": "Operator", "name": "ProfilerStep#4\\n", "ts": 9, "dur": 1}',
    '{"ph": "i", "name": "[memory]", "pid": 5, "tid": 6, "ts": 20, "args": {"Bytes": 512,'
    ' "Addr": 18446744073709551615, "Device Id": 0, "Device Type": 1,'
    ' "Total Allocated": 512, "Total Reserved": 2048}}',
    '{"ph": "i", "name": "[memory]", "ts": 21, "args": {"Bytes": -512, "Addr": -1,'
    ' "Device Type": 6}}',
    '{"ph": "i", "name": "[memory]", "ts": 22, "args": {"Bytes": 8, "Device Type": 7}}',
    '{"ph": "i", "name": "[memory]", "ts": 23, "args": {"Bytes": 8}}',
    '{"ph": "i", "name": "[memory]", "args": {"Bytes": 8}}',
    '{"ph": "i", "name": "[memory]", "ts": 24}',
    '{"ph": "X", "cat": "ac2g", "name": "ac2g", "ts": 1}',
    '{"ph": "s", "cat": "kernel", "name": "flow", "ts": 1}',
    '{"ph": "X", "cat": "kernel", "name": "no ts"}',
    '{"ph": "X", "cat": "kernel", "name": "dup", "name": "last wins", "ts": 30,'
    ' "args": {"device": 3}, "args": {"stream": 4}}',
    '{"ph": "M", "name": "process_name", "args": {"name": "python"}}',
    "{}",
    "17",
    '"text"',
    "[1, {}]",
    "null",
]
HEADER = (
    '"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100",'
    ' "totalGlobalMem": 85000000000, "computeMajor": 9, "numSms": 132}],'
    ' "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"}'
)
TRAILER = '"traceName": "t\\u00e9st", "baseTimeNanoseconds": 1700000000000000000'


def doc_text(events: list[str] = EVENTS, header: str = HEADER, trailer: str = TRAILER) -> str:
    body = ",\n  ".join(events)
    head = header + ", " if header else ""
    return "{" + head + '"traceEvents": [\n  ' + body + "\n], " + trailer + "}"


def write(tmp: Path, name: str, data: bytes | str) -> Path:
    p = tmp / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def test_hand_made_trace_matches_the_oracle(tmp_path: Path) -> None:
    tables, meta = check([write(tmp_path, "t.json", doc_text())])
    assert meta["extra"]["files"][0]["events"] == len(EVENTS)
    assert set(tables) == {
        "kernels",
        "memcpy",
        "memset",
        "memory",
        "runtime",
        "ops",
        "markers",
        "steps",
        "devices",
        "sync",
    }
    assert tables["steps"]["step"].to_pylist() == [3, None, 4]


# Keys are matched on their raw bytes, first against the keys that followed the previous
# key in earlier events (csrc/kineto/parser.cpp, KeyTable): keys that are near one of ours
# (a prefix, one character more, the empty key, a long key sharing a prefix, an escape
# spelling one of ours), met after the parser has learnt the usual order, are read as the
# oracle reads them.
NEAR_KEYS = [
    '{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":7,"ts":10,"dur":5,'
    '"args":{"External id":1,"device":1,"stream":7,"correlation":1,"grid":[2,1,1]}}',
    '{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":7,"ts":20,"dur":5,'
    '"args":{"External id":2,"device":1,"stream":7,"correlation":2,"grid":[2,1,1]}}',
    '{"ph":"X","":"kernel","cat":"kernel","name":"","pid":1,"":2,"tid":7,"ts":30,"dur":5,'
    '"args":{"":3,"External id":3,"devic":4,"device":1,"stream":7,"correlation":3}}',
    '{"ph":"X","cat":"kernel","name":"k","pi":5,"pidd":6,"tid ":8,"ts":40,"dur":5,'
    '"args":{"External i":4,"External idx":5,"device":2,"devices":3,"stream":7}}',
    '{"p\\u0068":"X","cat":"kernel","name":"k","\\u0070id":3,"tid":7,"ts":50,"dur":5,'
    '"args":{"External\\u0020id":6,"registers per thread per SM":9,'
    '"registers per thread":32,"stream":7,"correlation":6}}',
    '{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":7,"ts":60,"dur":5,"args":{"External id":7,'
    '"device":1,"stream":7,"correlation":7,"grid":[2,1,1]},"":{"ph":"i"},"ph ":"i"}',
    '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":70,"dur":1,'
    '"args":{"External id":8,"cbid":211,"correlation":8}}',
    '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":80,"dur":1,'
    '"args":{"External id":9,"cbi":1,"cbid":211,"correlation":9,"correlatio":1}}',
]


def test_keys_near_ours_read_as_the_oracle_reads_them(tmp_path: Path) -> None:
    text = '{"schemaVersion":1,"traceEvents":[' + ",".join(NEAR_KEYS * 3) + "]}"
    tables, _ = check([write(tmp_path, "near.json", text)])
    # Written here from the events above (the oracle gives the same): the empty key and
    # the near misses are not ours, the escapes spell ours.
    assert tables["kernels"]["device_id"].to_pylist() == [1, 1, 1, 2, 3, 1] * 3
    assert tables["kernels"]["registers_per_thread"].to_pylist() == ([None] * 4 + [32, None]) * 3


def test_base_time_after_the_events_is_added(tmp_path: Path) -> None:
    tables, _ = kineto.import_files([write(tmp_path, "t.json", doc_text())])
    base = 1700000000000000000
    assert tables["kernels"]["start_ns"].to_pylist()[:2] == [base + 1500, base + 123457]


def test_each_file_keeps_its_own_time_base_and_rank(tmp_path: Path) -> None:
    a = write(tmp_path, "a.json", doc_text())
    b = write(tmp_path, "b.json", doc_text(EVENTS[:12], "", '"baseTimeNanoseconds": 5000'))
    c = write(tmp_path, "c.json", doc_text(EVENTS[:3], HEADER, '"baseTimeNanoseconds": "x"'))
    got = check([a, b, c])
    starts = got[0]["kernels"]["start_ns"].to_pylist()
    b_ts = [1.5, 123.4567, -2.25, 2.5e-3]  # file b's first kernels, base 5000 ns
    assert starts[-8:-4] == [5000 + _ns(repr(t)) for t in b_ts]
    assert starts[-3:] == [_ns(repr(t)) for t in b_ts[:3]]  # file c: base "x" reads as 0
    assert got[0]["kernels"]["rank"].to_pylist()[-8:] == [1] * 5 + [3] * 3


def _ns(text: str) -> int:
    """Microseconds text to ns: exact decimal, half to even (independent of the importer)."""
    return int((Decimal(text) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


TIMES = [
    "0",
    "1",
    "1.5",
    "123.4567",
    "1e3",
    "1E+2",
    "-2.25",
    "-0.0005",
    "0.0005",
    "0.0015",
    "1.0005",
    "1.0015",
    "2.5E-3",
    "3.5e-3",
    "-0",
    "-0.0",
    "1694039968955744",
    "1694039968955744.4999",
    "1694039968955744.5",
    "4203669604595.407",
    "9223372036854775",
    "-9223372036854775.808",
    "0.000000000000000001",
    "12345678901234567.8901e-3",
    "1e-30",
    "7e15",
]


def test_times_convert_exactly() -> None:
    events = [f'{{"ph": "X", "cat": "kernel", "name": "k", "ts": {t}, "dur": 0}}' for t in TIMES]
    parser = _native.KinetoParser(ROUTES)
    parser.begin_file()
    parser.feed(('{"traceEvents": [' + ",".join(events) + "]}").encode())
    parser.finish()
    got = parser.take()["tables"]["kernels"]["start_ns"][0].tolist()
    assert got == [_ns(t) for t in TIMES]
    assert got == [validate.us_to_ns(t if any(c in t for c in ".eE") else int(t)) for t in TIMES]


@pytest.mark.parametrize(
    ("ts", "ns"),
    [
        ('"1.5"', 1500),
        ('" 2.0005 "', 2000),  # half to even
        ('"1e3"', 1_000_000),
        ("1.00000000000000000000000000001", 1000),  # beyond 25 digits: Decimal's rules
        ("1e-401", 0),
    ],
)
def test_times_read_by_pythons_rules(tmp_path: Path, ts: str, ns: int) -> None:
    # The parser asks Python (feed.python_value) for a time written as text, or one whose
    # Decimal context rounding or exponent it leaves to Python.
    base = 1700000000000000000
    p = write(tmp_path, "t.json", doc_text([f'{{"ph": "X", "cat": "kernel", "ts": {ts}}}']))
    tables, meta = kineto.import_files([p])
    assert tables["kernels"]["start_ns"].to_pylist() == [base + ns]
    assert meta["skipped_events"] == {}


@pytest.mark.parametrize(
    ("ts", "reason"),
    [
        ('"soon"', "time_not_a_number"),
        ('"NaN"', "time_not_a_number"),
        ('"-Infinity"', "time_not_finite"),
        ('"1e30"', "time_out_of_range"),
        ("1e401", "time_out_of_range"),
    ],
)
def test_times_as_text_that_are_not_times_are_skipped(tmp_path: Path, ts: str, reason: str) -> None:
    p = write(
        tmp_path, "t.json", doc_text([*EVENTS[:3], f'{{"ph": "X", "cat": "kernel", "ts": {ts}}}'])
    )
    assert_matches_oracle(got := kineto.import_files([p]), [p])
    assert got[1]["skipped_events"] == {reason: 1}


@pytest.mark.parametrize(
    ("ts", "dur", "reason"),
    [
        ("9223372036854776", "0", "time_out_of_range"),  # 1000x beyond int64 ns
        ("1e400", "0", "time_out_of_range"),
        ("-9223372036854776", "0", "time_out_of_range"),
        ("null", "0", "time_not_a_number"),
        ("[1]", "0", "time_not_a_number"),
        ("NaN", "0", "time_not_finite"),
        ("5", "Infinity", "time_not_finite"),
        ("5", "-1", "negative_duration"),
        ("9223372036854775", "9223372036854775", "time_out_of_range"),  # ts + dur overflows
    ],
)
def test_unusable_times_are_skipped_and_counted(
    tmp_path: Path, ts: str, dur: str, reason: str
) -> None:
    bad = f'{{"ph": "X", "cat": "kernel", "name": "bad", "ts": {ts}, "dur": {dur}}}'
    p = write(tmp_path, "t.json", doc_text([*EVENTS[:3], bad]))
    got = check([p])
    assert got[1]["skipped_events"] == {reason: 1}
    assert "bad" not in got[0]["kernels"]["name"].to_pylist()


def test_base_time_that_overflows_a_time_skips_that_event(tmp_path: Path) -> None:
    # ts 5 s plus a base of 2**63 - 1 ns leaves int64: that event is out of range; a
    # negative time keeps the sum in range.
    events = ['{"ph": "X", "cat": "kernel", "name": "k", "ts": 5000000}']
    events += ['{"ph": "X", "cat": "kernel", "name": "early", "ts": -5000000, "dur": 1}']
    events += ['{"ph": "i", "name": "[memory]", "ts": 7, "args": {"Bytes": 8}}']
    p = write(tmp_path, "t.json", doc_text(events, "", f'"baseTimeNanoseconds": {2**63 - 1}'))
    tables, meta = check([p])
    assert tables["kernels"]["name"].to_pylist() == ["early"]
    assert meta["skipped_events"] == {"time_out_of_range": 2}


@pytest.mark.parametrize(
    ("name", "table"),
    [
        ("ProfilerStep#x", "ops"),
        ("ProfilerStep#", "ops"),
        ("ProfilerStep#7\\n", "markers"),  # re's $ matches before a final newline
        ("ProfilerStep#\\u0663", "markers"),  # an Arabic-Indic 3: a Unicode digit
        ("ProfilerStep#3 ", "ops"),
    ],
)
def test_op_named_like_a_step_is_a_step_only_with_a_number(
    tmp_path: Path, name: str, table: str
) -> None:
    events = [*EVENTS[:3], f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "ts": 5}}']
    tables, _ = check([write(tmp_path, "t.json", doc_text(events))])
    assert tables[table]["name"].to_pylist() == [json.loads(f'"{name}"')]
    assert ("steps" in tables) == (table == "markers")


def test_unicode_digits_in_an_integer_field_are_read(tmp_path: Path) -> None:
    # str.isdigit() and int() take any Unicode decimal digits: "\u0664\u0662" is 42.
    ev = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {"device": "\\u0664\\u0662"}}'
    tables, _ = check([write(tmp_path, "t.json", doc_text([ev]))])
    assert tables["kernels"]["device_id"].to_pylist() == [42]


@pytest.mark.parametrize("value", ['"--5"', '"\\u00b2"'])
def test_integer_text_int_cannot_read_is_one_line(tmp_path: Path, value: str) -> None:
    # "--5" and a superscript 2 pass str.isdigit() but int() refuses them.
    ev = f'{{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "args": {{"device": {value}}}}}'
    p = write(tmp_path, "t.json", doc_text([ev]))
    with pytest.raises(TraceError, match=r"t\.json: event 0 is malformed \(an integer"):
        kineto.import_files([p])


def test_name_that_is_a_list_reads_as_python_prints_it(tmp_path: Path) -> None:
    events = ['{"ph": "X", "cat": "kernel", "name": ["a", 1, {"b": null}], "ts": 1}']
    events += ['{"ph": "X", "cat": "cpu_op", "name": NaN, "ts": 2}']
    tables, _ = check([write(tmp_path, "t.json", doc_text(events))])
    assert tables["kernels"]["name"].to_pylist() == ["['a', 1, {'b': None}]"]
    assert tables["ops"]["name"].to_pylist() == ["nan"]


def test_name_with_an_unpaired_surrogate_is_one_line(tmp_path: Path) -> None:
    ev = '{"ph": "X", "cat": "kernel", "name": "k\\ud800", "ts": 1}'
    p = write(tmp_path, "t.json", doc_text([EVENTS[0], ev]))
    with pytest.raises(TraceError, match=r"t\.json: event 1 is malformed \(a name with an"):
        kineto.import_files([p])


def test_object_inside_input_dims_is_its_compact_json(tmp_path: Path) -> None:
    # The parser hands a value with an object to json.dumps (a repeated key: the last).
    dims = '[[1, 2], {"a": 1.50, "a": [NaN], "\\u00e9": null}]'
    ev = f'{{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 1, "args": {{"Input Dims": {dims}}}}}'
    tables, _ = check([write(tmp_path, "t.json", doc_text([ev]))])
    assert tables["ops"]["input_shapes"].to_pylist() == ['[[1,2],{"a":[NaN],"\\u00e9":null}]']


def test_duplicated_trace_events_keep_the_last(tmp_path: Path) -> None:
    # JSON keeps the last of duplicated keys: the file is parsed again past the others.
    first, second = EVENTS[0], EVENTS[5]
    text = '{"traceEvents": [' + first + '], "traceEvents": {}, "traceEvents": [' + second + "]}"
    tables, meta = check([write(tmp_path, "t.json", text)])
    assert set(tables) == {"memcpy"} and meta["extra"]["files"][0]["events"] == 1


def test_integers_beyond_the_column_type_are_null(tmp_path: Path) -> None:
    tables, _ = kineto.import_files([write(tmp_path, "t.json", doc_text())])
    k = tables["kernels"]
    assert k["correlation_id"][:2].to_pylist() == [None, 5]  # 2**63: beyond int64
    assert k["external_id"][0].as_py() == -(2**63)
    assert k["registers_per_thread"][:2].to_pylist() == [None, 32]  # 2**31: beyond int32
    assert k["static_shared_bytes"][0].as_py() == -(2**31)
    assert k["context_id"][0].as_py() == -12 and k["stream_id"][0].as_py() == 7
    assert [k[c][0].as_py() for c in ("grid_x", "grid_y", "grid_z")] == [1, 2, 1]
    assert tables["memory"]["address"].to_pylist()[:2] == [2**64 - 1, None]


def test_invalid_utf8_is_replaced_as_python_decodes_it(tmp_path: Path) -> None:
    bad = [
        b"\xff\xfe",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80",
        b"\xe2\x82",
        b"\xc0\x80",
        b"\xf0\x9f\x98",
        b"\x80",
        b"\xe2\x82\xac",
        b"\xf0\x9f\x98\x80",
    ]
    events = [b'{"ph": "X", "cat": "kernel", "ts": 1, "name": "a' + b + b'z"}' for b in bad]
    events.append(
        b'{"ph": "X", "cat": "cpu_op", "ts": 1, "name": "o",'
        b' "args": {"Input type": ["\xff\xe9\xe2\x82\xac"]}}'
    )
    text = b"[" + b",".join(events) + b"]"
    p = write(tmp_path, "u.json", text)
    got = check([p])
    names = got[0]["kernels"]["name"].to_pylist()
    assert names == ["a" + b.decode("utf-8", "replace") + "z" for b in bad]
    assert got[0]["ops"]["input_dtypes"].to_pylist() == ['["\\ufffd\\ufffd\\u20ac"]']


def test_input_dims_text_is_json_dumps_compact(tmp_path: Path) -> None:
    tables, _ = kineto.import_files([write(tmp_path, "t.json", doc_text())])
    ops = tables["ops"]
    raw = json.loads(doc_text(), parse_float=str)["traceEvents"][14]["args"]
    assert ops["input_shapes"][0].as_py() == json.dumps(raw["Input Dims"], separators=(",", ":"))
    assert ops["input_dtypes"][0].as_py() == json.dumps(raw["Input type"], separators=(",", ":"))
    assert ops["input_dtypes"][1].as_py() == "[NaN,Infinity,-Infinity]"


def _pieces_parse(data: bytes, sizes: Any) -> dict[str, Any]:
    parser = _native.KinetoParser(ROUTES)
    parser.begin_file()
    i = 0
    for n in sizes:
        if i >= len(data):
            break
        parser.feed(data[i : i + n])
        i += n
    parser.feed(data[i:])
    parser.finish()
    out = parser.take()
    flat = {"header": parser.header(), "events": parser.events}
    for t, cols in out["tables"].items():
        for c, (values, valid, nulls) in cols.items():
            flat[f"{t}.{c}"] = (values.tobytes(), None if valid is None else valid.tobytes(), nulls)
    flat["strings"] = tuple(a.tobytes() for a in out["strings"])
    return flat


def _cycle(n: int) -> Any:
    while True:
        yield n


def test_pieces_cut_anywhere_give_the_same_columns() -> None:
    small = doc_text().encode()
    whole = _pieces_parse(small, [len(small)])
    assert _pieces_parse(small, _cycle(1)) == whole
    assert _pieces_parse(small, _cycle(7)) == whole
    big = gzip.decompress(RANKS[0].read_bytes())
    whole = _pieces_parse(big, [len(big)])
    assert whole["kernels.start_ns"][0]  # rows were parsed
    rng = random.Random(5)
    assert _pieces_parse(big, (rng.randint(1, 5000) for _ in iter(int, 1))) == whole
    assert _pieces_parse(big, _cycle(7)) == whole


@pytest.mark.parametrize("cut", [1, 100, 2500, -300, -2])
def test_truncated_input_is_an_error(cut: int) -> None:
    data = doc_text().encode()
    parser = _native.KinetoParser(ROUTES)
    parser.begin_file()
    parser.feed(data[:cut])
    with pytest.raises(_native.KinetoError, match="end of input"):
        parser.finish()


@pytest.mark.parametrize("damage", ["cut", "gzip_cut", "trailing"])
def test_damaged_file_is_one_line_error(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tbdtrace.cli import main

    text = gzip.decompress(RANKS[0].read_bytes())
    if damage == "cut":
        p = write(tmp_path, "d.json.gz", gzip.compress(text[: len(text) // 2]))
    elif damage == "gzip_cut":
        p = write(tmp_path, "d.json.gz", RANKS[0].read_bytes()[:-1000])
    else:
        p = write(tmp_path, "d.json", text + b"\n]")
    with pytest.raises(TraceError, match=r"(truncated|invalid) JSON|gzip data"):
        kineto.import_files([p])
    assert main(["import", str(p), "--out", str(tmp_path / "o")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(p) in lines[0], lines


def _robust_variant(tmp: Path, case: str) -> Path:
    """The damaged files of test_kineto_robust.py, made from the same fixture."""
    doc = json.loads(gzip.decompress(RANKS[0].read_bytes()))
    events = doc["traceEvents"]
    k = next(i for i, e in enumerate(events) if e.get("cat") in ("kernel", "Kernel"))
    o = next(i for i, e in enumerate(events) if e.get("cat") == "cpu_op")
    if case == "overflow":
        events[k]["args"].update(
            {"External id": 2**64 + 5, "correlation": -(2**63) - 1, "registers per thread": 2**80}
        )
    elif case == "nodist":
        del doc["distributedInfo"]
    elif case in ("utf8", "quotes"):
        events[k]["name"] = 'void f<"x">(int)'
        events[o]["name"] = 'aten::op "quoted" end'
    text = json.dumps(doc).encode()
    if case == "utf8":
        text = text.replace(b"void f<", b"void \xff\xfef<")
    if case == "quotes":  # old Kineto: inner quotes unescaped
        text = text.replace(b'\\"', b'"')
    return write(tmp, f"{case}.json", text)


@pytest.mark.parametrize("case", ["overflow", "nodist", "utf8", "quotes"])
def test_robustness_cases_match_the_oracle(tmp_path: Path, case: str) -> None:
    p = _robust_variant(tmp_path, case)
    if case == "quotes":  # repaired (repair.repair_quotes): the oracle reads the escaped text
        (tmp_path / "escaped").mkdir()
        escaped = _robust_variant(tmp_path / "escaped", "utf8")
        escaped.write_bytes(escaped.read_bytes().replace(b"void \xff\xfef<", b"void f<"))
        assert_matches_oracle(kineto.import_files([p]), [p], [escaped])
    else:
        check([p])


def test_concatenated_gzip_members_are_one_file(tmp_path: Path) -> None:
    text = doc_text().encode()
    p = write(tmp_path, "m.json.gz", gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    check([p])


def test_top_level_list_and_pretty_printing(tmp_path: Path) -> None:
    events = json.loads(gzip.decompress(RANKS[1].read_bytes()))["traceEvents"]
    p = write(tmp_path, "l.json", json.dumps(events, indent=3))
    check([p])


def test_parsing_releases_the_gil() -> None:
    data = gzip.decompress(RANKS[0].read_bytes())
    parser = _native.KinetoParser(ROUTES)
    parser.begin_file()
    body = data[data.index(b"[", data.index(b'"traceEvents"')) + 1 : data.rindex(b"]")]
    chunk = b'{"traceEvents": [' + b",".join([body.strip()] * 20)
    t = threading.Thread(target=parser.feed, args=(chunk,))
    spins = 0
    t.start()
    while t.is_alive():
        spins += 1
    t.join()
    assert spins > 1000
