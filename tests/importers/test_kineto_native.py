"""The C++ Kineto parser (kineto_native) against the Python parser, and on its own.

The Python path (``kineto.import_files(..., parser="python")``) is the reference: every
table, column (values, nulls, dictionaries) and the meta must be identical. Hand-written
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
from tbdtrace.importers import kineto, validate
from tbdtrace.importers.kineto.vocab import ROUTES
from tests.conftest import KINETO, KINETO_TRACES

HTA = KINETO / "hta"
RANKS = [HTA / "sampled_rank-0.json.gz", HTA / "sampled_rank-1.json.gz"]
ROCM = HTA / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def assert_same(got: tuple[dict, dict], want: tuple[dict, dict]) -> None:  # type: ignore[type-arg]
    (gt, gm), (wt, wm) = got, want
    assert sorted(gt) == sorted(wt)
    for name in wt:
        assert sorted(gt[name]) == sorted(wt[name]), name
        for col, w in wt[name].items():
            g = gt[name][col]
            assert g.type == w.type, (name, col)
            assert g.to_pylist() == w.to_pylist(), (name, col)
            assert g.equals(w), (name, col, "dictionary order or null layout")
    assert gm == wm


def both(paths: list[Path]) -> tuple[tuple[dict, dict], tuple[dict, dict]]:  # type: ignore[type-arg]
    return kineto.import_files(paths, parser="native"), kineto.import_files(paths, parser="python")


# The Python reference takes seconds on the three largest fixtures.
FIXTURES = [
    pytest.param(p, marks=pytest.mark.slow) if p.stat().st_size > 1 << 20 else p
    for p in KINETO_TRACES
]


@pytest.mark.parametrize("src", FIXTURES, ids=[p.name[:40] for p in KINETO_TRACES])
def test_every_fixture_parses_the_same(src: Path) -> None:
    assert_same(*both([src]))


def test_several_files_keep_ranks_and_device_types() -> None:
    # Two ranked files, then a ROCm file without distributedInfo (rank = its position).
    assert "distributedInfo" not in json.loads(gzip.decompress(ROCM.read_bytes()))
    got, want = both([*RANKS, ROCM])
    assert_same(got, want)
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


def test_hand_made_trace_parses_the_same(tmp_path: Path) -> None:
    got, want = both([write(tmp_path, "t.json", doc_text())])
    assert_same(got, want)
    tables, meta = got
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


def test_base_time_after_the_events_is_added(tmp_path: Path) -> None:
    tables, _ = kineto.import_files([write(tmp_path, "t.json", doc_text())], parser="native")
    base = 1700000000000000000
    assert tables["kernels"]["start_ns"].to_pylist()[:2] == [base + 1500, base + 123457]


def test_each_file_keeps_its_own_time_base_and_rank(tmp_path: Path) -> None:
    a = write(tmp_path, "a.json", doc_text())
    b = write(tmp_path, "b.json", doc_text(EVENTS[:12], "", '"baseTimeNanoseconds": 5000'))
    c = write(tmp_path, "c.json", doc_text(EVENTS[:3], HEADER, '"baseTimeNanoseconds": "x"'))
    got, want = both([a, b, c])
    assert_same(got, want)
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


@pytest.mark.parametrize("ts", ['"1.5"', "1.00000000000000000000000000001", "1e401"])
def test_times_it_does_not_reproduce_are_declined(tmp_path: Path, ts: str) -> None:
    p = write(tmp_path, "t.json", doc_text([f'{{"ph": "X", "cat": "kernel", "ts": {ts}}}']))
    with pytest.raises(kineto.Declined):
        kineto.import_files([p], parser="native")


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
def test_unusable_times_are_skipped_and_counted_like_the_python_path(
    tmp_path: Path, ts: str, dur: str, reason: str
) -> None:
    bad = f'{{"ph": "X", "cat": "kernel", "name": "bad", "ts": {ts}, "dur": {dur}}}'
    p = write(tmp_path, "t.json", doc_text([*EVENTS[:3], bad]))
    native = kineto.import_files([p], parser="native")
    python = kineto.import_files([p], parser="python")
    assert_same(native, python)
    assert native[1]["skipped_events"] == python[1]["skipped_events"] == {reason: 1}
    assert "bad" not in native[0]["kernels"]["name"].to_pylist()


def test_declined_file_is_read_by_the_python_path(tmp_path: Path) -> None:
    events = [*EVENTS[:3], '{"ph": "X", "cat": "kernel", "name": "s", "ts": "5.5"}']
    p = write(tmp_path, "t.json", doc_text(events))
    with pytest.raises(kineto.Declined):
        kineto.import_files([p], parser="native")
    assert_same(kineto.import_files([p]), kineto.import_files([p], parser="python"))


def test_op_named_like_a_step_without_a_number_stays_an_op(tmp_path: Path) -> None:
    events = [*EVENTS[:3], '{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#x", "ts": 5}']
    p = write(tmp_path, "t.json", doc_text(events))
    with pytest.raises(kineto.Declined):
        kineto.import_files([p], parser="native")
    tables, _ = kineto.import_files([p])
    assert tables["ops"]["name"].to_pylist() == ["ProfilerStep#x"] and "markers" not in tables


def test_integers_beyond_the_column_type_are_null(tmp_path: Path) -> None:
    tables, _ = kineto.import_files([write(tmp_path, "t.json", doc_text())], parser="native")
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
    got, want = both([p])
    assert_same(got, want)
    names = got[0]["kernels"]["name"].to_pylist()
    assert names == ["a" + b.decode("utf-8", "replace") + "z" for b in bad]
    assert got[0]["ops"]["input_dtypes"].to_pylist() == ['["\\ufffd\\ufffd\\u20ac"]']


def test_input_dims_text_is_json_dumps_compact(tmp_path: Path) -> None:
    tables, _ = kineto.import_files([write(tmp_path, "t.json", doc_text())], parser="native")
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
    with pytest.raises(kineto.Declined):
        kineto.import_files([p], parser="native")
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
def test_robustness_cases_parse_the_same(tmp_path: Path, case: str) -> None:
    p = _robust_variant(tmp_path, case)
    want = kineto.import_files([p], parser="python")
    if case == "quotes":  # the native parser declines; the Python path repairs
        with pytest.raises(kineto.Declined):
            kineto.import_files([p], parser="native")
        assert_same(kineto.import_files([p]), want)
    else:
        assert_same(kineto.import_files([p], parser="native"), want)


def test_concatenated_gzip_members_are_one_file(tmp_path: Path) -> None:
    text = doc_text().encode()
    p = write(tmp_path, "m.json.gz", gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    assert_same(*both([p]))


def test_top_level_list_and_pretty_printing(tmp_path: Path) -> None:
    events = json.loads(gzip.decompress(RANKS[1].read_bytes()))["traceEvents"]
    p = write(tmp_path, "l.json", json.dumps(events, indent=3))
    assert_same(*both([p]))


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
