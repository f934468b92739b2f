"""The hostile-input case table: files `tbdtrace import` must survive (docs/RELIABILITY.md,
"Input").

Each case is a file's content and what the import must do with it: exit 0 with exactly
the listed skipped-event counts (and at least the listed rows), or exit 1 with one line
that names the file and holds the listed words. The expectations are written by hand from
the content (each bad value is placed on purpose), not taken from the importers. Classes:
empty, short, truncated, corrupt, out-of-range values (Kineto, MXNet, TensorFlow trace
viewer, nsys), mistyped fields, and files of other tools or of a wrong forced --format.
Run by tests/robustness/test_cases_input.py; the hostile SQL cases are in cases_sql.py.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Case:
    name: str
    content: bytes
    expect: int  # exit code of `tbdtrace import`
    says: tuple[str, ...] = ()  # exit 1: words of the one line
    skipped: dict[str, int] = field(default_factory=dict)  # exit 0: meta skipped_events
    rows: dict[str, int] = field(default_factory=dict)  # exit 0: rows of these tables
    fmt: str | None = None  # --format
    suffix: str = ".json"


def kin(*events: str, header: str = '"schemaVersion": 1') -> bytes:
    """A Kineto document from event JSON texts (so NaN/Infinity can be written)."""
    body = ", ".join(events)
    return f'{{{header}, "traceEvents": [{body}]}}'.encode()


GOOD_K = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5}'
GOOD_OP = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 3, "dur": 4}'


def kx(ts: str = "20", dur: str = "1", cat: str = "kernel", extra: str = "") -> str:
    return (
        f'{{"ph": "X", "cat": "{cat}", "name": "bad", "pid": 0, "tid": 7, '
        f'"ts": {ts}, "dur": {dur}{extra}}}'
    )


def gz(b: bytes) -> bytes:
    return gzip.compress(b, mtime=0)


SMALL = kin(GOOD_K, GOOD_OP, GOOD_K.replace('"ts": 10', '"ts": 30'))


def _cut(b: bytes, frac: float) -> bytes:
    return b[: max(1, int(len(b) * frac))]


# ---- empty, short, truncated, corrupt --------------------------------------------------

STRUCTURE = [
    Case("empty", b"", 1, ("empty",)),
    Case("whitespace only", b"  \n\t\n", 1, ("empty",)),
    Case("empty gzip", gz(b""), 1, ("empty",), suffix=".json.gz"),
    Case("gzip of whitespace", gz(b"\n\n"), 1, ("empty",), suffix=".json.gz"),
    Case("one brace", b"{", 1, ("truncated",)),
    Case("one bracket", b"[", 1, ("truncated",)),
    Case("empty object", b"{}", 1, ("too short",)),
    Case("empty list", b"[]", 1, ("too short",)),
    Case("two letters", b"ab", 1, ("too short",)),
    Case("null", b"null", 1, ("too short",)),
    Case("a number", b"0", 1, ("too short",)),
    Case("a NUL byte", b"\x00", 1, ("too short",)),
    Case("tiny object", b'{"a": 1}', 1, ("too short",)),
    *[
        Case(f"kineto cut at {int(f * 100)}%", _cut(SMALL, f), 1, ("truncated",))
        for f in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
    ],
    *[
        Case(
            f"gzip cut at {int(f * 100)}%", _cut(gz(SMALL * 1), f), 1, ("gzip",), suffix=".json.gz"
        )
        for f in (0.2, 0.5, 0.8, 0.95)
    ],
    Case(
        "gzip with bad CRC",
        gz(SMALL)[:-8] + b"\0\0\0\0" + gz(SMALL)[-4:],
        1,
        ("gzip",),
        suffix=".json.gz",
    ),
    Case("gzip garbage after", gz(SMALL) + b"garbage!", 1, ("gzip",), suffix=".json.gz"),
    Case("gzip of truncated json", gz(SMALL[:-7]), 1, ("truncated",), suffix=".json.gz"),
    Case("random bytes", bytes(range(256)) * 4, 1, ("unrecognised",)),
    Case("zero bytes", b"\0" * 4096, 1, ("unrecognised",)),
    Case("sqlite header only", b"SQLite format 3\x00" + b"\0" * 84, 1, ("SQLite",)),
    Case("sqlite cut", b"SQLite format 3\x00" + b"\x10\x00\x01\x01" + b"\0" * 300, 1, ("SQLite",)),
    Case("kineto, junk after the document", SMALL + b" ]]", 1, ("JSON",)),
    Case(
        "kineto, events not a list",
        b'{"schemaVersion": 1, "traceEvents": {"a": 1}}',
        1,
        ("traceEvents",),
    ),
    Case(
        "kineto, no traceEvents",
        b'{"schemaVersion": 1, "deviceProperties": []}',
        1,
        ("traceEvents",),
    ),
    Case("kineto, no events", kin(), 1, ("no kineto events",)),
    Case(
        "kineto, only metadata events",
        kin('{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}}'),
        1,
        ("no kineto events",),
    ),
    Case(
        "kineto, events not objects", kin("1", '"x"', "null", "[]", GOOD_K), 0, rows={"kernels": 1}
    ),
    Case("kineto, 5000-digit integer", kin(kx(ts="1" * 5000)), 1, ("JSON",)),
    Case(
        "kineto, nesting 100000 deep",
        b'{"schemaVersion": 1, "traceEvents": [' + b"[" * 100000 + b"]" * 100000 + b"]}",
        1,
        ("JSON",),
    ),
    Case(
        "kineto, invalid UTF-8 in a name",
        kin(GOOD_K.replace('"k"', '"k\xff\xfe"')).replace(b"\xc3\xbf\xc3\xbe", b"\xff\xfe"),
        0,
        rows={"kernels": 1},
    ),
    Case("kineto, UTF-8 BOM", b"\xef\xbb\xbf" + SMALL, 1, ("JSON",)),
    Case(
        "kineto, duplicated keys",
        kin(GOOD_K.replace('"dur": 5', '"dur": 5, "dur": 6')),
        0,
        rows={"kernels": 1},
    ),
    Case(
        "kineto, duplicated traceEvents",
        b'{"schemaVersion": 1, "traceEvents": [], "traceEvents": [' + GOOD_K.encode() + b"]}",
        0,
        rows={"kernels": 1},
    ),
]

# ---- out-of-range and mistyped values: Kineto -----------------------------------------

KINETO_VALUES = [
    Case(
        "ts Infinity",
        kin(GOOD_K, kx(ts="Infinity")),
        0,
        skipped={"time_not_finite": 1},
        rows={"kernels": 1},
    ),
    Case("ts -Infinity", kin(GOOD_K, kx(ts="-Infinity")), 0, skipped={"time_not_finite": 1}),
    Case("ts NaN", kin(GOOD_K, kx(ts="NaN")), 0, skipped={"time_not_finite": 1}),
    Case("dur Infinity", kin(GOOD_K, kx(dur="Infinity")), 0, skipped={"time_not_finite": 1}),
    Case("dur NaN", kin(GOOD_K, kx(dur="NaN")), 0, skipped={"time_not_finite": 1}),
    Case("ts 1e30", kin(GOOD_K, kx(ts="1e30")), 0, skipped={"time_out_of_range": 1}),
    Case("ts 1e300", kin(GOOD_K, kx(ts="1e300")), 0, skipped={"time_out_of_range": 1}),
    Case("ts 1e999999999", kin(GOOD_K, kx(ts="1e999999999")), 0, skipped={"time_out_of_range": 1}),
    Case("ts 2**63", kin(GOOD_K, kx(ts=str(2**63))), 0, skipped={"time_out_of_range": 1}),
    Case("ts -2**63", kin(GOOD_K, kx(ts=str(-(2**63)))), 0, skipped={"time_out_of_range": 1}),
    Case("ts 10**20 us", kin(GOOD_K, kx(ts=str(10**20))), 0, skipped={"time_out_of_range": 1}),
    Case("dur 1e30", kin(GOOD_K, kx(dur="1e30")), 0, skipped={"time_out_of_range": 1}),
    Case(
        "ts + dur beyond int64",
        kin(GOOD_K, kx(ts="9223372036854775", dur="9223372036854775")),
        0,
        skipped={"time_out_of_range": 1},
    ),
    Case("dur negative", kin(GOOD_K, kx(dur="-5")), 0, skipped={"negative_duration": 1}),
    Case("dur -0.001", kin(GOOD_K, kx(dur="-0.001")), 0, skipped={"negative_duration": 1}),
    Case("dur -0 is zero", kin(GOOD_K, kx(dur="-0")), 0, rows={"kernels": 2}),
    Case("ts null", kin(GOOD_K, kx(ts="null")), 0, skipped={"time_not_a_number": 1}),
    Case("ts list", kin(GOOD_K, kx(ts="[1]")), 0, skipped={"time_not_a_number": 1}),
    Case("ts object", kin(GOOD_K, kx(ts='{"a": 1}')), 0, skipped={"time_not_a_number": 1}),
    Case("ts text", kin(GOOD_K, kx(ts='"soon"')), 0, skipped={"time_not_a_number": 1}),
    Case("ts numeric text", kin(GOOD_K, kx(ts='"12.5"')), 0, rows={"kernels": 2}),
    Case("ts text Infinity", kin(GOOD_K, kx(ts='"Infinity"')), 0, skipped={"time_not_finite": 1}),
    Case("dur null", kin(GOOD_K, kx(dur="null")), 0, skipped={"time_not_a_number": 1}),
    Case("dur text", kin(GOOD_K, kx(dur='"long"')), 0, skipped={"time_not_a_number": 1}),
    Case("ts true", kin(GOOD_K, kx(ts="true")), 0, rows={"kernels": 2}),
    Case(
        "args a list",
        kin(GOOD_K, kx(extra=', "args": [1, 2]')),
        0,
        skipped={"args_not_an_object": 1},
    ),
    Case(
        "args a string",
        kin(GOOD_K, kx(extra=', "args": "x"')),
        0,
        skipped={"args_not_an_object": 1},
    ),
    Case("args null is empty", kin(GOOD_K, kx(extra=', "args": null')), 0, rows={"kernels": 2}),
    Case(
        "grid of two", kin(GOOD_K, kx(extra=', "args": {"grid": [1, 2]}')), 0, rows={"kernels": 2}
    ),
    Case(
        "device beyond int32",
        kin(GOOD_K, kx(extra=', "args": {"device": 99999999999}')),
        0,
        rows={"kernels": 2},
    ),
    Case(
        "external id beyond int64",
        kin(GOOD_K, kx(extra=', "args": {"External id": ' + str(2**70) + "}")),
        0,
        rows={"kernels": 2},
    ),
    Case("pid a list", kin(GOOD_OP, GOOD_OP.replace('"pid": 1', '"pid": [1]')), 0, rows={"ops": 2}),
    Case(
        "cat a list is ignored",
        kin(GOOD_K, kx(cat="x", extra=', "cat": ["kernel"]')),
        0,
        rows={"kernels": 1},
    ),
    Case(
        "unrouted event with bad times is ignored",
        kin(GOOD_K, kx(ts="NaN", cat="misc")),
        0,
        rows={"kernels": 1},
    ),
    Case("name a number", kin(GOOD_K.replace('"k"', "5")), 0, rows={"kernels": 1}),
    Case(
        "baseTimeNanoseconds overflows",
        kin(GOOD_K, header='"schemaVersion": 1, "baseTimeNanoseconds": 9223372036854775000'),
        0,
        skipped={"time_out_of_range": 1},
    ),
    Case(
        "memory event ts Infinity",
        kin(
            GOOD_K,
            '{"ph": "i", "name": "[memory]", "pid": 0, "tid": 1, "ts": Infinity, '
            '"args": {"Bytes": 64}}',
        ),
        0,
        skipped={"time_not_finite": 1},
    ),
    Case(
        "memory event args a list",
        kin(GOOD_K, '{"ph": "i", "name": "[memory]", "ts": 1, "args": [64]}'),
        0,
        skipped={"args_not_an_object": 1},
    ),
    Case(
        "every event bad",
        kin(kx(ts="NaN"), kx(dur="-1"), kx(ts="1e30")),
        0,
        skipped={"time_not_finite": 1, "negative_duration": 1, "time_out_of_range": 1},
    ),
    Case(
        "mixed bad values",
        kin(
            GOOD_K,
            GOOD_OP,
            kx(ts="NaN"),
            kx(dur="-1"),
            kx(ts="NaN", cat="cpu_op"),
            kx(extra=', "args": 7'),
        ),
        0,
        skipped={"time_not_finite": 2, "negative_duration": 1, "args_not_an_object": 1},
        rows={"kernels": 1, "ops": 1},
    ),
    Case(
        "top-level list",
        b"[" + GOOD_K.encode() + b", " + GOOD_OP.encode() + b"]",
        0,
        rows={"kernels": 1, "ops": 1},
    ),
]

# ---- other tools' files, wrong --format -------------------------------------------------

CHROME = json.dumps(
    {
        "traceEvents": [
            {
                "args": {"name": "Browser"},
                "cat": "__metadata",
                "name": "process_name",
                "ph": "M",
                "pid": 1,
                "tid": 0,
                "ts": 0,
            },
            {
                "args": {"name": "CrBrowserMain"},
                "cat": "__metadata",
                "name": "thread_name",
                "ph": "M",
                "pid": 1,
                "tid": 1,
                "ts": 0,
            },
            {
                "args": {},
                "cat": "devtools.timeline",
                "dur": 12,
                "name": "RunTask",
                "ph": "X",
                "pid": 1,
                "tid": 1,
                "ts": 100,
                "tdur": 10,
                "tts": 5,
            },
        ],
        "metadata": {"cpu-brand": "x"},
    }
).encode()
JAX = (
    b'{"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":['
    b'{"ph":"M","pid":1,"name":"process_name","args":{"name":"/host:CPU"}},'
    b'{"ph":"X","pid":1,"tid":2,"ts":1.5,"dur":3,"name":"PjitFunction(train_step)"}]}'
)
GENERIC = b'{"traceEvents":[{"ph":"X","pid":1,"tid":2,"ts":1,"dur":3,"name":"f","cat":"c"}]}'

FORMATS = [
    Case("chrome browser trace", CHROME, 1, ("Chrome browser",)),
    Case("chrome browser trace gzipped", gz(CHROME), 1, ("Chrome browser",), suffix=".json.gz"),
    Case("jax trace", JAX, 1, ("JAX",)),
    Case("chrome trace of unknown origin", GENERIC, 1, ("--format kineto",)),
    Case("chrome trace forced kineto", GENERIC, 1, ("no kineto events", "--format"), fmt="kineto"),
    Case("browser trace forced kineto", CHROME, 1, ("no kineto events",), fmt="kineto"),
    Case("kineto forced nsys", SMALL, 1, ("SQLite",), fmt="nsys"),
    Case("kineto forced tensorflow", SMALL, 1, ("no tensorflow events",), fmt="tensorflow"),
    Case("random bytes forced kineto", bytes(range(256)), 1, ("JSON",), fmt="kineto"),
    Case("random bytes forced mxnet", bytes(range(256)), 1, ("JSON",), fmt="mxnet"),
    Case(
        "xplane-like garbage",
        b"\x0a\x09/host:CPU\xff\xff\xff\xff",
        1,
        ("XSpace",),
        suffix=".xplane.pb",
    ),
]

# ---- MXNet and TensorFlow trace viewer ---------------------------------------------------


def mx(*events: str) -> bytes:
    procs = (
        '{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}}, '
        '{"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "MXNET_C_API"}}'
    )
    return f'{{"traceEvents": [{procs}, {", ".join(events)}]}}'.encode()


def mxop(ph: str, ts: str, name: str = "dot", pid: str = "0") -> str:
    return (
        f'{{"ph": "{ph}", "cat": "operator", "name": "{name}", "pid": {pid}, "tid": 1, "ts": {ts}}}'
    )


MX_OK = (mxop("B", "10"), mxop("E", "20"))
MXNET = [
    Case("mxnet ok", mx(*MX_OK), 0, rows={"ops": 1, "kernels": 1}),
    Case(
        "mxnet end before begin",
        mx(*MX_OK, mxop("B", "50"), mxop("E", "40")),
        0,
        skipped={"end_before_start": 1},
        rows={"ops": 1},
    ),
    Case(
        "mxnet begin Infinity",
        mx(*MX_OK, mxop("B", "Infinity"), mxop("E", "40")),
        0,
        skipped={"time_not_finite": 1},
    ),
    Case(
        "mxnet end 1e30",
        mx(*MX_OK, mxop("B", "30"), mxop("E", "1e30")),
        0,
        skipped={"time_out_of_range": 1},
    ),
    Case(
        "mxnet ts text",
        mx(*MX_OK, mxop("B", '"x"'), mxop("E", "40")),
        0,
        skipped={"time_not_a_number": 1},
    ),
    Case(
        "mxnet X negative dur",
        mx(*MX_OK, '{"ph": "X", "cat": "task", "name": "t", "ts": 5, "dur": -3}'),
        0,
        skipped={"negative_duration": 1},
    ),
    Case(
        "mxnet X dur NaN",
        mx(*MX_OK, '{"ph": "X", "cat": "task", "name": "t", "ts": 5, "dur": NaN}'),
        0,
        skipped={"time_not_finite": 1},
    ),
    Case(
        "mxnet pid a list",
        mx(*MX_OK, mxop("B", "30", pid="[0]"), mxop("E", "40", pid="[0]")),
        0,
        rows={"ops": 2},
    ),
    Case(
        "mxnet process args a list",
        mx(*MX_OK).replace(b'"args": {"name": "cpu/0"}', b'"args": ["cpu/0"]'),
        0,
        rows={"ops": 1},
    ),
    Case(
        "mxnet device number huge",
        mx(*MX_OK)
        .replace(b'"cpu/0"', b'"cpu/99999999999999999999"')
        .replace(b'"MXNET_C_API"}}', b'"MXNET_C_API"}}, {"ph": "C", "cat": "MXNET_C_API"}'),
        0,
        rows={"ops": 1},
    ),
    Case(
        "mxnet only unmatched begins",
        mx(mxop("B", "1"), mxop("B", "2")),
        0,
        skipped={"unmatched_begin_end": 2},
    ),
    Case(
        "mxnet end without begin",
        mx(*MX_OK, mxop("E", "30")),
        0,
        skipped={"unmatched_begin_end": 1},
        rows={"ops": 1},
    ),
    Case("mxnet no operator events", mx('{"ph": "C", "name": "n", "ts": 1}'), 1, ("no mxnet",)),
]


def tv(*events: str) -> bytes:
    meta = '{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}}'
    return (
        b'{"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":['
        + ", ".join([meta, *events]).encode()
        + b"]}"
    )


def tvx(ts: str = "1", dur: str = "2", extra: str = "") -> str:
    return f'{{"ph": "X", "pid": 1, "tid": 3, "ts": {ts}, "dur": {dur}, "name": "MatMul"{extra}}}'


TENSORFLOW = [
    Case("tf viewer ok", tv(tvx()), 0, rows={"markers": 1}),
    Case("tf viewer ts Infinity", tv(tvx(), tvx(ts="Infinity")), 0, skipped={"time_not_finite": 1}),
    Case("tf viewer dur negative", tv(tvx(), tvx(dur="-1")), 0, skipped={"negative_duration": 1}),
    Case("tf viewer ts 1e30", tv(tvx(), tvx(ts="1e30")), 0, skipped={"time_out_of_range": 1}),
    Case(
        "tf viewer ts missing",
        tv(tvx(), '{"ph": "X", "pid": 1, "name": "n"}'),
        0,
        skipped={"time_not_a_number": 1},
    ),
    Case("tf viewer tid text", tv(tvx(extra=', "tid": "main"')), 0, rows={"markers": 1}),
    Case(
        "tf viewer step_num text",
        tv(tvx(extra=', "args": {"step_num": "x"}')),
        0,
        rows={"markers": 1},
    ),
    Case("tf viewer events not objects", tv(tvx(), "1", "null"), 0, rows={"markers": 1}),
    Case(
        "tf viewer no traceEvents",
        b'{"displayTimeUnit":"ns","metadata":{"highres-ticks":true}, "x": 1}',
        1,
        ("traceEvents",),
    ),
]


def xplane(events: list[tuple[int, int]], start_ns: int = 1_000, line_ns: int = 0) -> bytes:
    """An XSpace with a /host:CPU plane holding one line of (offset_ps, duration_ps)
    events named "MatMul:MatMul", and a Task Environment plane giving the start time
    (TensorFlow's own protos, as the importer reads them)."""
    from tbdtrace.importers.tensorflow import _xplane_pb2

    pb = _xplane_pb2(Path("cases_input.py"))
    xs = pb.XSpace()
    env = xs.planes.add(name="Task Environment")
    env.stat_metadata[1].name = "profile_start_time"
    env.stats.add(metadata_id=1, uint64_value=start_ns)
    host = xs.planes.add(name="/host:CPU")
    host.event_metadata[1].name = "MatMul:MatMul"
    line = host.lines.add(id=3, name="thread", timestamp_ns=line_ns)
    for off, dur in events:
        line.events.add(metadata_id=1, offset_ps=off, duration_ps=dur)
    return bytes(xs.SerializeToString())


TF_XPLANE = [
    Case("xplane ok", xplane([(0, 2000)]), 0, rows={"ops": 1}, suffix=".xplane.pb"),
    Case(
        "xplane negative duration",
        xplane([(0, 2000), (5000, -1000)]),
        0,
        skipped={"negative_duration": 1},
        rows={"ops": 1},
        suffix=".xplane.pb",
    ),
    Case(
        "xplane start beyond int64",
        xplane([(0, 2000)], start_ns=(1 << 64) - 1),
        0,
        skipped={"time_out_of_range": 1},
        suffix=".xplane.pb",
    ),
    Case(
        "xplane offset beyond int64 with the line time",
        xplane([(0, 2000), (20_000_000, 0)], line_ns=(1 << 63) - 10_000 - 1_000),
        0,
        skipped={"time_out_of_range": 1},
        rows={"ops": 1},
        suffix=".xplane.pb",
    ),
    Case(
        "xplane without a host plane",
        xplane([]).replace(b"/host:CPU", b"/host:XPU"),
        1,
        ("/host:CPU",),
        suffix=".xplane.pb",
    ),
]

# ---- nsys SQLite ----------------------------------------------------------------------


def nsys_db(kernels: list[tuple[object, object]], extra_sql: str = "") -> bytes:
    """An nsys-export-like SQLite file with one kernel row per (start, end)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d, "x.sqlite")
        db = sqlite3.connect(p)
        db.executescript(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
            "INSERT INTO StringIds VALUES (1, 'kern');"
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, "
            "streamId INT, contextId INT, correlationId INT, globalPid INT, demangledName INT, "
            "shortName INT, gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, "
            "blockZ INT);"
        )
        db.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, 1, 1, 1, 1, 1, "
            "1, 1, 1, 128, 1, 1)",
            kernels,
        )
        db.executescript(extra_sql)
        db.commit()
        db.close()
        return p.read_bytes()


OK_K = (100, 200)
NSYS = [
    Case("nsys ok", nsys_db([OK_K]), 0, rows={"kernels": 1}, suffix=".sqlite"),
    Case(
        "nsys end before start",
        nsys_db([OK_K, (300, 250)]),
        0,
        skipped={"end_before_start": 1},
        suffix=".sqlite",
    ),
    Case(
        "nsys start text",
        nsys_db([OK_K, ("soon", 250)]),
        0,
        skipped={"time_not_a_number": 1},
        suffix=".sqlite",
    ),
    Case(
        "nsys end NULL",
        nsys_db([OK_K, (300, None)]),
        0,
        skipped={"time_not_a_number": 1},
        suffix=".sqlite",
    ),
    Case(
        "nsys start REAL",
        nsys_db([OK_K, (1.5, 250)]),
        0,
        skipped={"time_not_a_number": 1},
        suffix=".sqlite",
    ),
    Case(
        "nsys end Infinity",
        nsys_db([OK_K, (300, float("inf"))]),
        0,
        skipped={"time_not_finite": 1},
        suffix=".sqlite",
    ),
    Case(
        "nsys start blob",
        nsys_db([OK_K, (b"\x01", 250)]),
        0,
        skipped={"time_not_a_number": 1},
        suffix=".sqlite",
    ),
    Case(
        "nsys ids text",
        nsys_db([OK_K], "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'gpu', gridX = 1e300;"),
        0,
        rows={"kernels": 1},
        suffix=".sqlite",
    ),
    Case(
        "nsys no StringIds",
        nsys_db([OK_K], "DROP TABLE StringIds;"),
        0,
        rows={"kernels": 1},
        suffix=".sqlite",
    ),
    Case("nsys no rows", nsys_db([]), 1, ("no nsys events",), suffix=".sqlite"),
    Case(
        "sqlite without nsys tables",
        nsys_db([], "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;"),
        1,
        ("Nsight Systems",),
        suffix=".sqlite",
    ),
    Case(
        "nsys kernel table without start",
        nsys_db(
            [],
            "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;"
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (x INT);",
        ),
        1,
        ("table layout",),
        suffix=".sqlite",
    ),
]

CASES: list[Case] = STRUCTURE + KINETO_VALUES + FORMATS + MXNET + TENSORFLOW + TF_XPLANE + NSYS
